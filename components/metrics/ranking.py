"""Full-ranking top-k metrics with one target per user, in RecBole's definitions.

With ``rank`` the 1-based position of the user's target item among all scored items:

    Recall@k = 1[rank <= k]                     (one relevant item: recall equals the hit ratio)
    NDCG@k   = 1[rank <= k] / log2(rank + 1)    (the ideal DCG of one relevant item is 1)

averaged over users. Ties are broken against the target: ``rank = 1 + #{items scoring strictly higher}
+ #{other items scoring equal}``, so a model that scores everything alike earns nothing. Columns set to
``-inf`` (the padding id 0, or masked items) never outrank the target unless it is masked itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["ranking_metrics", "target_ranks"]


def target_ranks(scores: Tensor, targets: Tensor) -> Tensor:
    """1-based rank of each row's target column, ties counted against the target: ``[B, N], [B] -> [B]``."""
    if scores.ndim != 2 or targets.shape != scores.shape[:1]:
        raise ValueError(f"expected scores [B, N] and targets [B], got {tuple(scores.shape)}, {tuple(targets.shape)}")
    target_scores = scores.gather(1, targets[:, None])
    return (scores >= target_scores).sum(1)   # the target itself counts once: 1 + higher + other ties


def ranking_metrics(scores: Tensor, targets: Tensor, ks: Sequence[int] = (5, 10)) -> dict[str, float]:
    """``{"recall@k", "ndcg@k"}`` for every k, averaged over the rows (see the module docstring)."""
    if not ks or min(ks) < 1:
        raise ValueError(f"ks must be non-empty positive cut-offs, got {ks}")
    ranks = target_ranks(scores, targets).double()
    out = {}
    for k in ks:
        hit = ranks <= k
        out[f"recall@{k}"] = float(hit.double().mean())
        out[f"ndcg@{k}"] = float(torch.where(hit, 1.0 / torch.log2(ranks + 1.0), torch.zeros_like(ranks)).mean())
    return out
