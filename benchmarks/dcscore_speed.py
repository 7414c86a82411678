"""DCScore with the rule judge on 300 synthetic captions (target: <= 10 s), beside the metrics it is compared with.

In one process, interleaved over repeats, on the default meta-evaluation's captions (300 scenes of 3-8 objects,
one simulated caption each): the full DCScore procedure (decompose -> 3 matchings -> 3 verifications -> 9 trials
per caption, judge noise 0.05), and as peers sentence BLEU-4 (sacrebleu), ROUGE-L (rouge-score), TF-IDF cosine
(scikit-learn) and the CAPTURE-style tuple F1 on the same captions. Prints the median seconds of each and
DCScore's ratio to each peer. Parser caches are cleared before every DCScore repeat (a cold start).

    python benchmarks/dcscore_speed.py [--repeats 3] [--captions 300]
"""

from __future__ import annotations

import argparse
import statistics
import time

from components.captions import parsing, rule_judge
from components.captions.baselines import METRICS
from components.captions.dcscore import CaptionItem, dcscore, score_items
from components.captions.rule_judge import RuleJudge, RuleJudgeConfig
from components.captions.simulator import SimulatorConfig, simulate_captions
from components.captions.world import fact_sentence, make_scenes, oracle_caption, oracle_facts

TARGET_S = 10.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--captions", type=int, default=300)
    args = parser.parse_args()
    scenes = make_scenes(args.captions, 0, 3, 8)
    captions, _ = simulate_captions(scenes, SimulatorConfig(), 1)
    texts, references = [c.caption for c in captions], [oracle_caption(s) for s in scenes]
    items = [
        CaptionItem(i, s.name, t, r, tuple(fact_sentence(f) for f in oracle_facts(s)))
        for i, (s, t, r) in enumerate(zip(scenes, texts, references))
    ]
    judge = RuleJudge({s.name: s for s in scenes}, RuleJudgeConfig(flip_rate=0.05))
    times: dict[str, list[float]] = {"DCScore (rule judge, 3 x 3 trials)": [], **{name: [] for name in METRICS}}
    value = float("nan")
    for _ in range(args.repeats):
        for cache in (parsing._corrected, rule_judge.unit_fact, rule_judge._oracle_index):
            cache.cache_clear()
        started = time.perf_counter()
        value = dcscore(score_items(judge, items))[0]
        times["DCScore (rule judge, 3 x 3 trials)"].append(time.perf_counter() - started)
        for name, metric in METRICS.items():
            started = time.perf_counter()
            metric(texts, references)
            times[name].append(time.perf_counter() - started)
    medians = {name: statistics.median(t) for name, t in times.items()}
    ours = medians["DCScore (rule judge, 3 x 3 trials)"]
    print(f"{args.captions} captions, median of {args.repeats} repeats; DCScore = {value:.2f}")
    for name, seconds in medians.items():
        ratio = "" if seconds == ours else f"  (DCScore / this: {ours / seconds:.1f}x)"
        print(f"  {name:<36} {seconds:7.3f} s{ratio}")
    verdict = "meets" if ours <= TARGET_S else "MISSES"
    print(f"DCScore on {args.captions} captions: {ours:.2f} s, {verdict} the target of {TARGET_S:g} s")
    return 0 if ours <= TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
