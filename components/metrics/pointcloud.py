"""Point-cloud generation metrics in the PointFlow / PVD conventions (Yang et al. 2019).

Distances between two clouds:
    CD(a, b)  = mean_i min_j ||a_i - b_j||^2 + mean_j min_i ||a_i - b_j||^2
                (squared distances; the SUM of the two directional means, as PointFlow's code)
    EMD(a, b) = min_perm mean_i ||a_i - b_perm(i)||   (Euclidean, equal sizes, exact assignment)

Set-level metrics from a matrix of cloud distances, generated set G vs reference set R:
    1-NNA = accuracy of the leave-one-out 1-NN classifier on G u R (0.5 ideal, 1.0 = separable)
    COV   = |{argmin_r d(g, r) : g in G}| / |R|
    MMD   = mean_r min_g d(g, r)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from torch import Tensor

from components.ot import exact_assignment, squared_distances

__all__ = [
    "chamfer_distance",
    "emd",
    "pairwise_chamfer",
    "pairwise_emd",
    "PAIRWISE_DISTANCES",
    "one_nna",
    "coverage",
    "mmd",
    "point_cloud_metrics",
]


def _check_clouds(a: Tensor, b: Tensor) -> None:
    if a.ndim != 3 or b.ndim != 3:
        raise ValueError(f"point clouds must be [B, N, D]; got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[2]:
        raise ValueError(f"batch or point dimension differ: {tuple(a.shape)} vs {tuple(b.shape)}")


def chamfer_distance(a: Tensor, b: Tensor) -> Tensor:
    """Chamfer distance between paired clouds (sum of the two mean nearest-neighbour squared distances).

    Args:
        a: ``[B, N, D]``.
        b: ``[B, M, D]``.

    Returns:
        ``[B]``: ``mean_i min_j |a_i - b_j|^2 + mean_j min_i |a_i - b_j|^2``.
    """
    _check_clouds(a, b)
    d = squared_distances(a, b)
    return d.min(dim=2).values.mean(dim=1) + d.min(dim=1).values.mean(dim=1)


def emd(a: Tensor, b: Tensor) -> Tensor:
    """Exact earth mover's distance between equal-size paired clouds.

    Args:
        a: ``[B, N, D]``.
        b: ``[B, N, D]``.

    Returns:
        ``[B]``: ``min_perm mean_i ||a_i - b_perm(i)||`` (Euclidean, not squared; PointFlow divides the
        matched cost by N the same way).
    """
    _check_clouds(a, b)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"EMD needs equal point counts, got {a.shape[1]} and {b.shape[1]}")
    dist = squared_distances(a, b).clamp_min(0).sqrt()
    out = torch.empty(a.shape[0], dtype=dist.dtype, device=dist.device)
    for k, c in enumerate(dist):
        perm = exact_assignment(c)
        out[k] = c.gather(1, perm[:, None]).mean()
    return out


def _chamfer_block(A: Tensor, B: Tensor) -> Tensor:
    """Chamfer distances ``[p, q]`` between all clouds of ``A [p, N, D]`` and ``B [q, M, D]`` at once.

    Uses ``|a|^2 + |b|^2 - 2 <a, b>`` (one batched matmul, clamped at 0), which is much faster than
    explicit differences for many pairs; its rounding error (~1e-7 relative to |a|^2) is harmless here.
    """
    aa = A.pow(2).sum(-1)  # [p, N]
    bb = B.pow(2).sum(-1)  # [q, M]
    ab = torch.einsum("pnd,qmd->pqnm", A, B)
    d = (aa[:, None, :, None] + bb[None, :, None, :] - 2 * ab).clamp_min(0)
    return d.min(dim=3).values.mean(dim=2) + d.min(dim=2).values.mean(dim=2)


def _pairwise(block: Callable[[Tensor, Tensor], Tensor], A: Tensor, B: Tensor, batch: int) -> Tensor:
    """Fill ``[P, Q]`` block by block, each block holding about ``batch`` cloud pairs."""
    if A.ndim != 3 or B.ndim != 3 or A.shape[2] != B.shape[2]:
        raise ValueError(f"sets of clouds must be [P, N, D] and [Q, M, D]; got {tuple(A.shape)}, {tuple(B.shape)}")
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    q_blk = min(B.shape[0], batch)
    p_blk = max(1, batch // q_blk)
    out = torch.empty(A.shape[0], B.shape[0], dtype=A.dtype, device=A.device)
    for i in range(0, A.shape[0], p_blk):
        for j in range(0, B.shape[0], q_blk):
            out[i : i + p_blk, j : j + q_blk] = block(A[i : i + p_blk], B[j : j + q_blk])
    return out


def pairwise_chamfer(A: Tensor, B: Tensor, batch: int = 256) -> Tensor:
    """Chamfer distance between every cloud of ``A [P, N, D]`` and every cloud of ``B [Q, M, D]``.

    ``batch`` is the number of cloud pairs per block (memory about ``batch * N * M`` floats).

    Returns:
        ``[P, Q]`` with entry ``(p, q) = chamfer_distance(A[p], B[q])`` (up to float rounding).
    """
    return _pairwise(_chamfer_block, A, B, batch)


def pairwise_emd(A: Tensor, B: Tensor, batch: int = 256) -> Tensor:
    """Exact EMD between every cloud of ``A [P, N, D]`` and every cloud of ``B [Q, N, D]``: ``[P, Q]``.

    One Hungarian solve per pair (O(N^3) each): fine for N of a few hundred. When ``B`` is ``A`` (the
    same tensor object) only the pairs ``p < q`` are solved and the matrix is mirrored, with a zero
    diagonal. ``batch`` bounds the clouds of ``B`` whose cost matrices are held at once.
    """
    if A.ndim != 3 or B.ndim != 3 or A.shape[2] != B.shape[2]:
        raise ValueError(f"sets of clouds must be [P, N, D] and [Q, N, D]; got {tuple(A.shape)}, {tuple(B.shape)}")
    if A.shape[1] != B.shape[1]:
        raise ValueError(f"EMD needs equal point counts, got {A.shape[1]} and {B.shape[1]}")
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    same = A is B
    a = A.detach().to("cpu", torch.float64).numpy()
    b = a if same else B.detach().to("cpu", torch.float64).numpy()
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("point clouds contain NaN or inf")
    n = a.shape[1]
    chunk = max(1, min(batch, 2**24 // (n * n)))  # at most ~128 MiB of cost matrices at once
    out = np.zeros((a.shape[0], b.shape[0]))
    for i in range(a.shape[0]):
        columns = np.arange(i + 1 if same else 0, b.shape[0])
        for start in range(0, len(columns), chunk):
            js = columns[start : start + chunk]
            # |a|^2 + |b|^2 - 2 <a, b> in float64 (one batched matmul), [len(js), N, N]
            sq = (
                (a[i] ** 2).sum(-1)[None, :, None]
                + (b[js] ** 2).sum(-1)[:, None, :]
                - 2 * a[i] @ b[js].transpose(0, 2, 1)
            )
            cost = np.sqrt(np.maximum(sq, 0.0))
            for c, j in zip(cost, js):
                rows, cols = linear_sum_assignment(c)
                out[i, j] = c[rows, cols].mean()
    if same:
        out = out + out.T
    return torch.from_numpy(out).to(A.dtype)


#: name -> ``(A [P, N, D], B [Q, M, D], batch) -> [P, Q]`` distance matrix.
PAIRWISE_DISTANCES: dict[str, Callable[[Tensor, Tensor, int], Tensor]] = {"cd": pairwise_chamfer, "emd": pairwise_emd}


def one_nna(d_xx: Tensor, d_yy: Tensor, d_xy: Tensor) -> float:
    """1-nearest-neighbour two-sample accuracy (Lopez-Paz & Oquab 2017; PointFlow's 1-NNA).

    Each cloud of X u Y is classified by the label of its nearest other cloud (leave-one-out);
    returns the fraction classified correctly. 0.5 means the sets are indistinguishable, 1.0 fully
    separated. Ties are broken towards the lower index of the concatenation [X, Y].

    Args:
        d_xx: ``[P, P]`` distances within X.
        d_yy: ``[Q, Q]`` distances within Y.
        d_xy: ``[P, Q]`` distances from X to Y.

    Returns:
        Accuracy in [0, 1].
    """
    p, q = d_xy.shape
    if d_xx.shape != (p, p) or d_yy.shape != (q, q):
        raise ValueError(
            f"inconsistent shapes: d_xx {tuple(d_xx.shape)}, d_yy {tuple(d_yy.shape)}, d_xy {tuple(d_xy.shape)}"
        )
    full = torch.cat([torch.cat([d_xx, d_xy], dim=1), torch.cat([d_xy.T, d_yy], dim=1)], dim=0).double()
    full.fill_diagonal_(float("inf"))
    labels = torch.cat([torch.ones(p, dtype=torch.bool), torch.zeros(q, dtype=torch.bool)]).to(full.device)
    nearest = full.argmin(dim=1)
    return float((labels[nearest] == labels).double().mean())


def coverage(d_gen_ref: Tensor) -> float:
    """COV: fraction of reference clouds that are the nearest reference of at least one generated cloud.

    Args:
        d_gen_ref: ``[G, R]`` distances, generated x reference.

    Returns:
        ``|unique(argmin_r d[g, r])| / R`` in [0, 1].
    """
    if d_gen_ref.ndim != 2:
        raise ValueError(f"d_gen_ref must be [G, R], got {tuple(d_gen_ref.shape)}")
    return float(d_gen_ref.argmin(dim=1).unique().numel() / d_gen_ref.shape[1])


def mmd(d_gen_ref: Tensor) -> float:
    """MMD (minimum matching distance): ``mean_r min_g d[g, r]`` for ``d_gen_ref [G, R]``."""
    if d_gen_ref.ndim != 2:
        raise ValueError(f"d_gen_ref must be [G, R], got {tuple(d_gen_ref.shape)}")
    return float(d_gen_ref.min(dim=0).values.mean())


def point_cloud_metrics(
    gen: Tensor, ref: Tensor, metric: str = "cd", batch: int = 256, d_ref_ref: Tensor | None = None
) -> dict[str, float]:
    """1-NNA, COV and MMD of generated clouds against reference clouds under one cloud distance.

    Args:
        gen: ``[G, N, D]`` generated clouds.
        ref: ``[R, M, D]`` reference clouds (M = N for "emd").
        metric: key of :data:`PAIRWISE_DISTANCES` ("cd" or "emd").
        batch: clouds compared at once.
        d_ref_ref: precomputed ``[R, R]`` distances among the reference clouds under ``metric`` (they
            do not depend on ``gen``, so an evaluation of many generators computes them once).

    Returns:
        ``{"1nna_<metric>", "cov_<metric>", "mmd_<metric>"}`` as floats (1-NNA and COV in [0, 1]).
    """
    try:
        dist = PAIRWISE_DISTANCES[metric]
    except KeyError:
        raise ValueError(f"unknown metric {metric!r}; expected one of {sorted(PAIRWISE_DISTANCES)}") from None
    d_gr = dist(gen, ref, batch)
    d_gg = dist(gen, gen, batch)  # the same object twice: a symmetric distance may solve each pair once
    d_rr = dist(ref, ref, batch) if d_ref_ref is None else d_ref_ref
    if d_rr.shape != (ref.shape[0], ref.shape[0]):
        raise ValueError(f"d_ref_ref must be [{ref.shape[0]}, {ref.shape[0]}], got {tuple(d_rr.shape)}")
    return {f"1nna_{metric}": one_nna(d_gg, d_rr, d_gr), f"cov_{metric}": coverage(d_gr), f"mmd_{metric}": mmd(d_gr)}
