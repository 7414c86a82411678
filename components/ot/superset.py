"""Offline superset OT and online subsampling (NSOT, arXiv 2502.12456, "not-so-optimal" transport).

Offline, once per training shape: draw a Gaussian superset X~0 in R^{M x D}, solve the OT bijection
Pi between X~0 and the data superset X~1 (M points sampled from the surface), and store the pairs
reordered so that row i of X0 is paired with row i of X1 (X1 = X~1[Pi]).
Online, each step: draw a random index subset I with |I| = N and use (X0[I], X1[I]), which keeps the
pairing at zero online cost. Optionally blend toward the independent coupling (hybrid coupling):

    x0 <- sqrt(1 - beta) * x0 + sqrt(beta) * eps,   eps ~ N(0, I).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial

import torch
from torch import Tensor

from components.ot.assignment import exact_assignment, pair_cost, squared_distances
from components.ot.sinkhorn import entropic_assignment

__all__ = ["ASSIGNMENT_SOLVERS", "superset_pairs", "precompute_superset_ot", "subsample_pairs", "hybrid_coupling"]

#: cost [M, M] -> perm [M] (row i of the noise paired with column perm[i] of the data).
ASSIGNMENT_SOLVERS: dict[str, Callable[[Tensor], Tensor]] = {
    "exact": exact_assignment,
    "sinkhorn": partial(entropic_assignment, eps=0.01, n_iters=300),
}


def _solver(name: str) -> Callable[[Tensor], Tensor]:
    try:
        return ASSIGNMENT_SOLVERS[name]
    except KeyError:
        raise ValueError(f"unknown OT solver {name!r}; expected one of {sorted(ASSIGNMENT_SOLVERS)}") from None


def superset_pairs(x1_superset: Tensor, generator: torch.Generator, solver: str = "exact") -> tuple[Tensor, Tensor]:
    """Draw a Gaussian superset and pair it with a data superset by OT (squared Euclidean cost).

    Args:
        x1_superset: ``[M, D]`` data points of one shape.
        generator: torch generator for the noise (its device is where the noise is drawn).
        solver: key of :data:`ASSIGNMENT_SOLVERS` ("exact": Hungarian; "sinkhorn": entropic + rounding).

    Returns:
        ``(x0_superset [M, D], x1_paired [M, D])`` with ``x1_paired = x1_superset[perm]`` so that
        ``x0_superset[i]`` is paired with ``x1_paired[i]``.
    """
    if x1_superset.ndim != 2:
        raise ValueError(f"x1_superset must be [M, D], got {tuple(x1_superset.shape)}")
    solve = _solver(solver)
    x0 = torch.randn(x1_superset.shape, generator=generator, device=generator.device, dtype=x1_superset.dtype).to(
        x1_superset.device
    )
    perm = solve(squared_distances(x0, x1_superset))
    return x0, x1_superset[perm]


def precompute_superset_ot(
    shapes: Tensor | Sequence[Tensor], seed: int, solver: str = "exact"
) -> tuple[Tensor, Tensor, dict[str, float]]:
    """Offline NSOT step over a dataset: one OT bijection per shape.

    Deterministic given ``seed`` (one CPU generator seeded once, consumed shape by shape).

    Args:
        shapes: ``[S, M, D]`` tensor or a list of S ``[M, D]`` tensors (data supersets).
        seed: seed of the Gaussian supersets.
        solver: key of :data:`ASSIGNMENT_SOLVERS`.

    Returns:
        ``(X0 [S, M, D], X1 [S, M, D], stats)``; ``X0[s, i]`` is paired with ``X1[s, i]``. ``stats``:
        ``mean_pair_cost`` (mean over shapes of :func:`pair_cost` of the OT pairs),
        ``mean_independent_cost`` (same for the noise paired with the data in its original order,
        i.e. a random pairing), ``n_shapes``, ``n_points``, and ``solve_seconds`` (wall time, the only
        non-deterministic entry).
    """
    x1_all = torch.stack(list(shapes)) if not isinstance(shapes, Tensor) else shapes
    if x1_all.ndim != 3:
        raise ValueError(f"shapes must be [S, M, D], got {tuple(x1_all.shape)}")
    _solver(solver)  # fail on an unknown name before any work
    gen = torch.Generator().manual_seed(seed)
    x1_cpu = x1_all.detach().cpu()
    x0_list, x1_list = [], []
    start = time.perf_counter()
    for x1 in x1_cpu:
        x0, x1_paired = superset_pairs(x1, gen, solver=solver)
        x0_list.append(x0)
        x1_list.append(x1_paired)
    seconds = time.perf_counter() - start
    big_x0, big_x1 = torch.stack(x0_list), torch.stack(x1_list)
    stats = {
        "mean_pair_cost": float(pair_cost(big_x0, big_x1).mean()),
        "mean_independent_cost": float(pair_cost(big_x0, x1_cpu).mean()),
        "n_shapes": float(x1_all.shape[0]),
        "n_points": float(x1_all.shape[1]),
        "solve_seconds": seconds,
    }
    return big_x0.to(x1_all.device), big_x1.to(x1_all.device), stats


def subsample_pairs(
    X0: Tensor, X1: Tensor, idx_shapes: Tensor, n_points: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """Online NSOT step: a random N-subset of each chosen shape's paired supersets.

    The same index set I_b is used on both sides, so ``x0[b, k]`` stays paired with ``x1[b, k]``.

    Args:
        X0: ``[S, M, D]`` paired noise supersets.
        X1: ``[S, M, D]`` paired data supersets.
        idx_shapes: LongTensor ``[B]`` of shape indices (repeats allowed).
        n_points: N <= M, points per sample.
        generator: torch generator for the subsets (must live on ``X0``'s device).

    Returns:
        ``(x0 [B, N, D], x1 [B, N, D])``, a fresh subset per batch element.
    """
    if X0.shape != X1.shape or X0.ndim != 3:
        raise ValueError(f"X0 and X1 must both be [S, M, D]; got {tuple(X0.shape)} and {tuple(X1.shape)}")
    m = X0.shape[1]
    if not 1 <= n_points <= m:
        raise ValueError(f"n_points must be in [1, {m}], got {n_points}")
    idx_shapes = idx_shapes.to(X0.device)
    # argsort of iid uniforms = one uniformly random permutation per row; keep its first N entries.
    keys = torch.rand(idx_shapes.shape[0], m, generator=generator, device=generator.device).to(X0.device)
    subset = keys.argsort(dim=1)[:, :n_points]
    gather = subset[..., None].expand(-1, -1, X0.shape[2])
    return X0[idx_shapes].gather(1, gather), X1[idx_shapes].gather(1, gather)


def hybrid_coupling(x0: Tensor, beta: float, generator: torch.Generator) -> Tensor:
    """Blend paired noise toward independent noise: ``sqrt(1 - beta) * x0 + sqrt(beta) * eps``.

    With ``x0 ~ N(0, I)`` the result is still ``N(0, I)`` marginally; beta = 0 keeps the OT pairing,
    beta = 1 is the independent coupling.

    Args:
        x0: any shape, noise paired with data.
        beta: blend weight in [0, 1].
        generator: torch generator for ``eps``.

    Returns:
        Tensor of ``x0``'s shape (``x0`` itself when beta = 0).
    """
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must be in [0, 1], got {beta}")
    if beta == 0.0:
        return x0
    noise = torch.randn(x0.shape, generator=generator, device=generator.device, dtype=x0.dtype).to(x0.device)
    return (1.0 - beta) ** 0.5 * x0 + beta**0.5 * noise
