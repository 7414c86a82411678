"""tvm's data wiring (one paper's helpers, kept out of ``pipeline.py`` so that it reads like the method): the slip
policy of the params, a synthetic problem read back from its JSONL record, SmolLM2's sampled solutions of the
synthetic problems, and the labels file read back into per-solution rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from components.io import load_tensors
from components.reasoning.datasets import split_file
from components.reasoning.lm_policy import lm_solutions
from components.reasoning.policy import SlipPolicy
from components.reasoning.problems import Problem, make_problems
from paperflows import derive_seed
from pipelines.tvm.params import DataParams, PolicyParams, TvmParams


def slip_policy(p: TvmParams) -> SlipPolicy:
    """The synthetic sampling policy: its slip rates (carry, plain) and its chance to recover."""
    return SlipPolicy(p.policy.slip_carry, p.policy.slip_plain, p.policy.recover)


def problem_of(record: dict) -> Problem:
    """The synthetic problem a sample record was drawn for."""
    return Problem(record["question"], int(record["start"]), tuple((op, int(x)) for op, x in record["ops"]))


def lm_samples(
    d: DataParams, pol: PolicyParams, cache_dir: Path | None, root: Path | None = None
) -> tuple[list[dict], list[dict], dict]:
    """The LM generator's (SmolLM2, or ``policy.name_or_path``, a relative folder taken from ``root``) sampled
    solutions of the synthetic problems, split by question like a solutions file."""
    from components.llm import load_lm

    problems = make_problems(d.train_questions + d.test_questions, d.seed, d.numbers, 1, d.operand_max, d.cap)
    lm = load_lm(pol.lm_used, cache_dir=cache_dir, seed=d.seed, root=root)
    rows = lm_solutions(
        lm,
        problems,
        d.samples,
        temperature=pol.temperature,
        max_new_tokens=pol.max_new_tokens,
        seed=derive_seed(d.seed, "smollm2"),
    )
    share = d.test_questions / (d.train_questions + d.test_questions)
    train, test, summary = split_file(rows, share, derive_seed(d.seed, "split"))
    return train, test, {**summary, "source": "smollm2", "samples": d.samples, "model": pol.lm_used}


def label_rows(path: Path) -> tuple[list[list[int]], list[int], dict[str, list[np.ndarray]]]:
    """The labels file back to per-solution token ids, prompt lengths and, per label type, each solution's labels
    (one per solution token)."""
    t = load_tensors(path)
    bounds = np.cumsum([0] + t["lengths"].tolist())
    ids = [t["ids"][a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:])]
    prompts = t["prompts"].tolist()
    sol = np.cumsum([0] + [len(r) - p for r, p in zip(ids, prompts)])
    kinds = {k: [t[k][a:b].numpy() for a, b in zip(sol[:-1], sol[1:])] for k in t if k in ("orm", "prm", "tvm")}
    return ids, prompts, kinds
