"""TVM step beam search: the verifier scoring every step's beams in one batched pass, against one pass per beam.

In one process, on the same held-out synthetic questions, the same slip policy and the same search seed, step
beam search (b beams, K continuations per beam, all questions at once) runs twice, interleaved over repeats:

* batched: the scorer receives every (question, candidate path) of a depth and runs the verifier over them in
  padded batches (one forward per search step while the candidates fit one batch), as `pipelines.tvm` does;
* per beam: the same scorer called once per candidate (one forward per beam), the loop the batched one replaces.

Both must choose the same paths (the values agree to float tolerance). Prints the verifier tokens scored per
second of each and the ratio. The verifier is the default tiny value-head transformer at its initial weights
(speed does not depend on the trained values).

    python benchmarks/tvm_scorer.py [--questions 50] [--beams 4] [--per-beam 4] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from components.reasoning.policy import SlipPolicy, next_line, start_state
from components.reasoning.problems import make_problems
from components.reasoning.search import step_beam_search
from components.reasoning.verifier import Verifier


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--per-beam", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    problems = make_problems(args.questions, seed=7)
    policy, verifier = SlipPolicy(), Verifier(seed=0)
    scored_tokens = {"batched": 0, "per beam": 0}
    calls = {"batched": 0, "per beam": 0}

    def rows(pairs):
        return verifier.encode([(problems[q].question, s.text()) for q, s in pairs]).ids

    def batched(pairs):
        ids = rows(pairs)
        scored_tokens["batched"] += sum(map(len, ids))
        calls["batched"] += 1
        return verifier.last_values(ids)

    def per_beam(pairs):
        ids = rows(pairs)
        scored_tokens["per beam"] += sum(map(len, ids))
        calls["per beam"] += len(ids)
        return np.concatenate([verifier.last_values([row]) for row in ids])

    def search(scorer):
        return step_beam_search(
            [start_state(p) for p in problems],
            lambda q, s, rng: next_line(problems[q], s, policy, rng),
            lambda s: s.done,
            lambda s: s.lines,
            lambda child, parent: len(child.lines[-1]) + 1,
            scorer,
            beams=args.beams,
            per_beam=args.per_beam,
            rng=np.random.default_rng(3),
            max_depth=32,
        )

    seconds: dict[str, list[float]] = {"batched": [], "per beam": []}
    results = {}
    for _ in range(args.repeats):
        for name, scorer in (("batched", batched), ("per beam", per_beam)):
            started = time.perf_counter()
            results[name] = search(scorer)
            seconds[name].append(time.perf_counter() - started)
    same_paths = [a.lines for a in results["batched"].best] == [b.lines for b in results["per beam"].best]
    gap = float(np.max(np.abs(np.subtract(results["batched"].scores, results["per beam"].scores))))
    print(
        f"{args.questions} questions, b = {args.beams}, K = {args.per_beam}, "
        f"{results['batched'].expansions} scored candidates per search, median of {args.repeats} repeats"
    )
    rates = {}
    for name in seconds:
        median = statistics.median(seconds[name])
        rates[name] = scored_tokens[name] / args.repeats / median
        print(
            f"  {name:<9} {median:7.3f} s  {rates[name]:10.0f} verifier tokens/s  "
            f"{calls[name] // args.repeats} forward calls"
        )
    print(
        f"batched / per beam: {rates['batched'] / rates['per beam']:.1f}x tokens/s; same chosen paths: "
        f"{same_paths}; largest score gap {gap:.1e}"
    )
    return 0 if same_paths and gap < 1e-4 else 1


if __name__ == "__main__":
    raise SystemExit(main())
