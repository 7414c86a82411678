"""Ranking quality of scores against binary labels.

`roc_auc`: the area under the ROC curve, computed as the Mann-Whitney statistic

    AUC = P(score of a random positive > score of a random negative) + 0.5 * P(equal scores),

from average ranks (ties share their mean rank), so it is exact for tied scores. Undefined (NaN) when one
class is empty.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from components.metrics.stats import ranks


def roc_auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """AUC of ``scores`` for ``labels`` (True = positive); NaN when there is no positive or no negative."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=bool)
    if s.shape != y.shape or s.ndim != 1:
        raise ValueError(f"roc_auc: scores {s.shape} and labels {y.shape} must be 1-D of one length")
    if not np.isfinite(s).all():
        raise ValueError("roc_auc: scores must be finite")
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    r = ranks(s)
    return float((r[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
