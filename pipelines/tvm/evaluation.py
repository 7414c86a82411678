"""tvm's search-time scoring (one paper's helpers, kept out of ``pipeline.py`` so that it reads like the method):
step beam search on the synthetic problems guided by a scorer, and the AUCs of a verifier's values at step ends
(against the eventual outcome and, on synthetic data, against recoverability)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from components.metrics.ranking import roc_auc
from components.reasoning.policy import next_line, start_state
from components.reasoning.problems import Problem
from components.reasoning.search import step_beam_search
from paperflows import derive_seed
from pipelines.tvm.data import slip_policy
from pipelines.tvm.params import TvmParams

QUESTION_CORRECT = "correct_by_question"  # search-table column: 0/1 (CHAMP single sample: a share) per question


def beam_accuracy(p: TvmParams, problems: list[Problem], scorer: Callable[..., Any], seed: int) -> dict[str, Any]:
    """Accuracy, generated tokens per question and per-question correctness of step beam search guided by
    ``scorer``."""
    policy = slip_policy(p)
    result = step_beam_search(
        [start_state(q) for q in problems],
        lambda q, s, rng: next_line(problems[q], s, policy, rng),
        lambda s: s.done,
        lambda s: s.lines,
        lambda child, parent: len(child.lines[-1]) + 1,
        scorer,
        beams=p.search.beams,
        per_beam=p.search.per_beam,
        rng=np.random.default_rng(derive_seed(seed, "beam")),
        max_depth=4 * p.data.numbers + 4,
    )
    correct = [float(s.answer == q.answer) for s, q in zip(result.best, problems)]
    return {"accuracy": float(np.mean(correct)), "tokens": float(np.mean(result.tokens)), QUESTION_CORRECT: correct}


def prefix_aucs(records: list[dict], values: list[np.ndarray]) -> dict[str, float]:
    """AUC of the verifier's value at every step end before the answer line: against the solution's eventual
    outcome, and (synthetic) against recoverability, over all prefixes and over the wrong ones only."""
    scores, outcome, recoverable, wrong = [], [], [], []
    for r, v in zip(records, values):
        ok = r.get("line_correct")
        for j in range(len(v) - 1):
            scores.append(float(v[j]))
            outcome.append(bool(r["correct"]))
            if ok is not None:
                recoverable.append(bool(ok[j] or j == 0 or ok[j - 1]))
                wrong.append(not ok[j])
    out = {"prefixes": float(len(scores)), "auc_outcome": roc_auc(scores, outcome)}
    if recoverable:
        s, rec, w = np.array(scores), np.array(recoverable), np.array(wrong)
        out.update(
            {
                "auc_recoverable": roc_auc(s, rec),
                "auc_wrong_prefixes": roc_auc(s[w], rec[w]),
                "wrong_prefixes": float(w.sum()),
                "recoverable_wrong": float((rec & w).sum()),
            }
        )
    return out
