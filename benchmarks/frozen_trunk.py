"""Scoring with a memoised frozen trunk against the full model: what makes FLAT's 7 methods x 3 seeds fit a CPU.

Scores the answers of ``--rows`` TOFU-style QAs (``sequence_scores``, with gradients, as a training step does)
with SmolLM2-135M + LoRA on the top ``--layers`` layers, once through the full peft model and once through
`components.llm.FrozenTrunkLM` whose memo already holds the rows (the steady state of training and
evaluation), interleaved over repeats in one process with one torch thread; prints the medians and the ratio,
and the largest difference of the summed log-probabilities (they must agree). Then the LM head alone on the
last positions of those rows, forward + backward: the sliced 3-D states as transformers passes them against
`FrozenTrunkLM`'s one [B*K, d] product (a sliced input sends ``linear`` to a batched product with the weight
expanded per row). Last, the frozen-trunk pass with the base model in bf16 (adapters fp32, FLAT's default
``model.precision``) against fp32, interleaved the same way, with the largest log-probability difference.

    python benchmarks/frozen_trunk.py [--rows 16] [--layers 2] [--repeats 5] [--lm smollm2-135m]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from components.llm import FrozenTrunkLM, LocalLM, PairTokens, load_lm, sequence_scores
from components.training import torch_threads
from components.unlearning import AuthorConfig, author_rows
from components.unlearning.evaluate import qa_continuation, qa_prompt
from paperflows.settings import load_settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lm", default="smollm2-135m", choices=("smollm2-135m", "tiny"))
    args = parser.parse_args()
    lora, trunk = _adapted(args, "fp32")
    total = lora.model.config.num_hidden_layers
    rows = author_rows(AuthorConfig(n_authors=max(4, args.rows // 5 + 1)))[: args.rows]
    tokens = lora.tokenize_pairs([qa_prompt(r["question"]) for r in rows], [qa_continuation(r["answer"]) for r in rows])
    trunk.prime(tokens)
    times: dict[str, list[float]] = {"full model": [], "frozen trunk": []}
    with torch_threads(1):
        for _ in range(args.repeats):
            for name, model in (("full model", lora.model), ("frozen trunk", trunk)):
                start = time.perf_counter()
                scores = sequence_scores(model, tokens)
                scores.logp.sum().backward()
                times[name].append(time.perf_counter() - start)
                lora.model.zero_grad(set_to_none=True)
        with torch.no_grad():
            gap = float((sequence_scores(lora.model, tokens).logp - sequence_scores(trunk, tokens).logp).abs().max())
    head_times = _head_times(trunk, tokens, args.repeats)
    fp32_time, bf16_time, bf16_gap = _bf16_times(args, trunk, tokens)
    full, mine = statistics.median(times["full model"]), statistics.median(times["frozen trunk"])
    print(f"{args.lm}, {args.rows} rows, LoRA on the top {args.layers} of {total} layers, forward + backward:")
    print(f"  full model    {full * 1000:8.1f} ms")
    print(f"  frozen trunk  {mine * 1000:8.1f} ms   ({full / mine:.1f}x faster; max |d logp| {gap:.2e})")
    sliced, flat = (statistics.median(head_times[k]) for k in ("sliced", "flat"))
    print(f"LM head on the last {tokens.width + 1} positions of the {args.rows} rows, forward + backward:")
    print(f"  sliced 3-D input  {sliced * 1000:8.1f} ms")
    print(f"  one 2-D product   {flat * 1000:8.1f} ms   ({sliced / flat:.1f}x faster)")
    print("Frozen trunk, forward + backward, by precision of the base weights:")
    print(f"  fp32              {fp32_time * 1000:8.1f} ms")
    print(
        f"  bf16              {bf16_time * 1000:8.1f} ms   ({fp32_time / bf16_time:.1f}x faster; max |d logp| "
        f"{bf16_gap:.3f} over answers of up to {tokens.width} tokens)"
    )


def _adapted(args: argparse.Namespace, precision: str) -> tuple[LocalLM, FrozenTrunkLM]:
    """The LM in ``precision`` with LoRA on its top ``args.layers`` layers, and that model over a frozen trunk."""
    lm = load_lm(args.lm, cache_dir=load_settings().cache_dir, precision=precision)
    total = lm.model.config.num_hidden_layers
    lora = lm.with_lora(
        r=16,
        alpha=32,
        layers=list(range(total - args.layers, total)),
        target_modules=("q_proj", "v_proj", "up_proj", "down_proj"),
    )
    return lora, FrozenTrunkLM(lora.model, split=total - args.layers, pad_id=int(lm.tokenizer.pad_token_id))


def _bf16_times(args: argparse.Namespace, trunk: FrozenTrunkLM, tokens: PairTokens) -> tuple[float, float, float]:
    """Median times of the fp32 and bf16 frozen-trunk passes, side by side, and their largest logp difference."""
    _, low = _adapted(args, "bf16")
    low.prime(tokens)
    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    with torch_threads(1):
        for _ in range(args.repeats):
            for name, model in (("fp32", trunk), ("bf16", low)):
                start = time.perf_counter()
                sequence_scores(model, tokens).logp.sum().backward()
                times[name].append(time.perf_counter() - start)
                model.zero_grad(set_to_none=True)
        with torch.no_grad():
            gap = float((sequence_scores(trunk, tokens).logp - sequence_scores(low, tokens).logp).abs().max())
    return statistics.median(times["fp32"]), statistics.median(times["bf16"]), gap


def _head_times(trunk: FrozenTrunkLM, tokens: PairTokens, repeats: int) -> dict[str, list[float]]:
    keep = tokens.width + 1
    states = torch.randn(len(tokens), tokens.ids.shape[1], trunk._head.weight.shape[1])
    times: dict[str, list[float]] = {"sliced": [], "flat": []}
    with torch_threads(1):
        for _ in range(repeats):
            for name, head in (("sliced", trunk._head), ("flat", trunk._project)):
                hidden = states.clone().requires_grad_(True)
                start = time.perf_counter()
                head(hidden[:, -keep:]).logsumexp(-1).sum().backward()
                times[name].append(time.perf_counter() - start)
    return times


if __name__ == "__main__":
    main()
