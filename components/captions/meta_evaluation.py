"""Meta-evaluation of caption metrics: how well each metric's score follows the human score of the same
captions, per group of captions (a seed), over all, the long and the short ones.

The input is one row per caption: its group (``seed``), ``human_score`` (``None`` when it has none), ``valid``
(the judge's DCScore is usable), ``words`` and one column per metric (:data:`METRIC_COLUMNS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from components.metrics.stats import CORRELATIONS

# metric name -> column of the joined per-caption table
METRIC_COLUMNS = {
    "dcscore": "dcscore",
    "dcscore_precision": "precision",
    "dcscore_recall": "recall",
    "capture": "capture",
    "bleu4": "bleu4",
    "rouge_l": "rouge_l",
    "tfidf_cosine": "tfidf_cosine",
}


def seed_groups(rows: Sequence[dict[str, Any]]) -> list[Any]:
    """The groups (``seed`` values) of the rows, in order of first appearance."""
    return list(dict.fromkeys(r["seed"] for r in rows))


def long_mask(words: Sequence[int], long_share: float) -> np.ndarray:
    """True for the ``round(long_share * n)`` captions with the most words (ties by position), at least one
    caption on each side."""
    n = len(words)
    k = min(n - 1, max(1, round(long_share * n)))
    order = np.argsort(-np.asarray(words, dtype=float), kind="stable")
    mask = np.zeros(n, dtype=bool)
    mask[order[:k]] = True
    return mask


def scored_captions(rows: Sequence[dict[str, Any]], group: Any) -> list[dict[str, Any]]:
    """A group's captions that have a human score and a valid DCScore (the captions every metric scored)."""
    return [r for r in rows if r["seed"] == group and r["human_score"] is not None and r["valid"]]


def correlation_rows(rows: Sequence[dict[str, Any]], long_share: float) -> list[dict[str, Any]]:
    """Per seed (group), subset and metric: n and the Pearson, Spearman and Kendall correlations with the human
    score (groups of fewer than 4 scored captions are left out)."""
    out = []
    for group in seed_groups(rows):
        mine = scored_captions(rows, group)
        if len(mine) < 4:
            continue
        long = long_mask([r["words"] for r in mine], long_share)
        for subset, keep in (("all", np.ones(len(mine), bool)), ("long", long), ("short", ~long)):
            chosen = [r for r, k in zip(mine, keep) if k]
            human = [float(r["human_score"]) for r in chosen]
            for metric, column in METRIC_COLUMNS.items():
                if column not in chosen[0]:  # a metric not computed for these captions (CAPTURE on real files)
                    continue
                x = [float(r[column]) for r in chosen]
                out.append(
                    {
                        "seed": group,
                        "subset": subset,
                        "metric": metric,
                        "n": len(chosen),
                        **{c: fn(x, human) if len(chosen) >= 2 else float("nan") for c, fn in CORRELATIONS.items()},
                    }
                )
    return out
