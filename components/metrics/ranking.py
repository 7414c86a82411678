"""Ranking quality: the ROC AUC of scores against binary labels, and full-ranking top-k metrics.

`roc_auc`: the area under the ROC curve, computed as the Mann-Whitney statistic

    AUC = P(score of a random positive > score of a random negative) + 0.5 * P(equal scores),

from average ranks (ties share their mean rank), so it is exact for tied scores. Undefined (NaN) when one
class is empty.

`ranking_metrics`: full-ranking top-k metrics with one target per user, in RecBole's definitions. With ``rank``
the 1-based position of the user's target item among all scored items:

    Recall@k = 1[rank <= k]                     (one relevant item: recall equals the hit ratio)
    NDCG@k   = 1[rank <= k] / log2(rank + 1)    (the ideal DCG of one relevant item is 1)

averaged over users. Ties are broken against the target: ``rank = 1 + #{items scoring strictly higher}
+ #{other items scoring equal}``, so a model that scores everything alike earns nothing. Columns set to
``-inf`` (the padding id 0, or masked items) never outrank the target unless it is masked itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from components.metrics.stats import ranks

__all__ = ["ranking_metrics", "roc_auc", "target_ranks"]


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


def target_ranks(scores: Tensor, targets: Tensor) -> Tensor:
    """1-based rank of each row's target column, ties counted against the target: ``[B, N], [B] -> [B]``."""
    if scores.ndim != 2 or targets.shape != scores.shape[:1]:
        raise ValueError(f"expected scores [B, N] and targets [B], got {tuple(scores.shape)}, {tuple(targets.shape)}")
    target_scores = scores.gather(1, targets[:, None])
    return (scores >= target_scores).sum(1)  # the target itself counts once: 1 + higher + other ties


def ranking_metrics(scores: Tensor, targets: Tensor, ks: Sequence[int] = (5, 10)) -> dict[str, float]:
    """``{"recall@k", "ndcg@k"}`` for every k, averaged over the rows (see the module docstring)."""
    if not ks or min(ks) < 1:
        raise ValueError(f"ks must be non-empty positive cut-offs, got {ks}")
    position = target_ranks(scores, targets).double()
    out = {}
    for k in ks:
        hit = position <= k
        out[f"recall@{k}"] = float(hit.double().mean())
        out[f"ndcg@{k}"] = float(torch.where(hit, 1.0 / torch.log2(position + 1.0), torch.zeros_like(position)).mean())
    return out
