"""Exact discrete optimal transport between equal-size point sets (assignment problems).

With uniform weights on two sets of N points, the optimal transport plan is a permutation
(Birkhoff-von Neumann), so exact OT is the linear assignment problem

    perm* = argmin_{perm in S_N}  sum_i C[i, perm[i]],

solved here with scipy's ``linear_sum_assignment`` (Jonker-Volgenant, O(N^3)).
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from torch import Tensor

__all__ = ["squared_distances", "exact_assignment", "batched_exact_assignment", "pair_cost"]


def squared_distances(x: Tensor, y: Tensor) -> Tensor:
    """Squared Euclidean distances between two (batched) point sets.

    Args:
        x: ``[..., N, D]``.
        y: ``[..., M, D]`` (same leading batch shape as ``x``).

    Returns:
        ``[..., N, M]`` with ``C[..., i, j] = ||x_i - y_j||^2``, computed by differences (not the
        ``|x|^2 + |y|^2 - 2<x, y>`` expansion) so that equal points give exactly 0.
    """
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(f"point dimension mismatch: x has D={x.shape[-1]}, y has D={y.shape[-1]}")
    return (x.unsqueeze(-2) - y.unsqueeze(-3)).pow(2).sum(-1)


def exact_assignment(cost: Tensor) -> Tensor:
    """Minimum-cost assignment of rows to columns.

    Args:
        cost: ``[N, M]`` cost matrix with ``N <= M`` (finite values).

    Returns:
        ``perm``: LongTensor ``[N]`` on ``cost.device``; row ``i`` is matched to column ``perm[i]``,
        the columns are distinct, and ``sum_i cost[i, perm[i]]`` is minimal.

    Raises:
        ValueError: if ``cost`` is not 2-D, has more rows than columns, or holds NaN/inf.
    """
    if cost.ndim != 2:
        raise ValueError(f"cost must be [N, M], got shape {tuple(cost.shape)}")
    n, m = cost.shape
    if n > m:
        raise ValueError(f"cost has more rows than columns ({n} > {m}); transpose it")
    c = cost.detach().to("cpu", torch.float64).numpy()
    if not np.isfinite(c).all():
        raise ValueError("cost contains NaN or inf")
    rows, cols = linear_sum_assignment(c)
    perm = np.empty(n, dtype=np.int64)
    perm[rows] = cols
    return torch.from_numpy(perm).to(cost.device)


def batched_exact_assignment(x0: Tensor, x1: Tensor) -> Tensor:
    """Per-sample exact OT between point sets (equivariant OT coupling).

    For each batch element b, solves ``perm_b = argmin_perm sum_i ||x0[b, i] - x1[b, perm[i]]||^2``.

    Args:
        x0: ``[B, N, D]`` source points.
        x1: ``[B, N, D]`` target points.

    Returns:
        ``perm``: LongTensor ``[B, N]``; ``x1.gather(1, perm[..., None].expand_as(x1))`` is paired with ``x0``.
    """
    if x0.ndim != 3 or x0.shape != x1.shape:
        raise ValueError(f"x0 and x1 must both be [B, N, D]; got {tuple(x0.shape)} and {tuple(x1.shape)}")
    cost = squared_distances(x0.detach(), x1.detach())
    return torch.stack([exact_assignment(c) for c in cost])


def pair_cost(x0: Tensor, x1: Tensor) -> Tensor:
    """Transport cost of a given pairing: mean squared distance between paired points, per sample.

    Args:
        x0: ``[B, N, D]`` (point sets) or ``[B, D]`` (one vector per sample).
        x1: same shape as ``x0``; ``x1[b, i]`` is the partner of ``x0[b, i]``.

    Returns:
        ``[B]``: ``mean_i ||x0[b, i] - x1[b, i]||^2`` (sum over the last axis, mean over the axes
        between batch and last; for ``[B, D]`` this is just ``||x0[b] - x1[b]||^2``).
    """
    if x0.shape != x1.shape:
        raise ValueError(f"shape mismatch: {tuple(x0.shape)} vs {tuple(x1.shape)}")
    if x0.ndim < 2:
        raise ValueError(f"expected at least [B, D], got {tuple(x0.shape)}")
    sq = (x0 - x1).pow(2).sum(-1)
    return sq.flatten(1).mean(1) if sq.ndim > 1 else sq
