"""Entropic optimal transport: batched log-domain Sinkhorn, and rounding a plan to a permutation.

Solves  min_P <P, C> - eps * H(P)  subject to  P 1 = a,  P^T 1 = b,  with the dual potentials (f, g):

    f_i <- eps * log a_i - eps * logsumexp_j ((g_j - C_ij) / eps)
    g_j <- eps * log b_j - eps * logsumexp_i ((f_i - C_ij) / eps)
    P_ij = exp((f_i + g_j - C_ij) / eps)

Working with potentials and logsumexp (never exp(-C/eps) on its own) keeps it finite for small eps,
where the scaling form of Sinkhorn underflows. ``eps`` is in the units of ``C``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

# The marginal error costs about one extra iteration, so it is checked only every few iterations.
_CHECK_EVERY = 10

__all__ = ["SinkhornResult", "sinkhorn_log", "round_plan_to_permutation", "entropic_assignment"]


@dataclass(frozen=True)
class SinkhornResult:
    """Output of :func:`sinkhorn_log`.

    Attributes:
        plan: ``[B, N, M]`` (or ``[N, M]`` for unbatched input) transport plan.
        n_iters: number of (f, g) update pairs performed (a multiple of 10 unless it hit ``n_iters``).
        marginal_error: largest over the batch of ``sum_i |P 1 - a|_i`` after the last iteration
            (the column marginals are exact after each g update, so this is the whole violation).
        cost: ``[B]`` (or scalar) transport cost ``<P, C>``.
    """

    plan: Tensor
    n_iters: int
    marginal_error: float
    cost: Tensor


def _uniform_log_weights(batch: int, n: int, like: Tensor) -> Tensor:
    return torch.full((batch, n), -float(np.log(n)), dtype=like.dtype, device=like.device)


def _log_weights(w: Tensor | None, batch: int, n: int, like: Tensor, name: str) -> Tensor:
    if w is None:
        return _uniform_log_weights(batch, n, like)
    w = w.to(like)
    if w.ndim == 1:
        w = w.expand(batch, -1)
    if w.shape != (batch, n):
        raise ValueError(f"{name} must be [{n}] or [{batch}, {n}], got {tuple(w.shape)}")
    if (w < 0).any():
        raise ValueError(f"{name} has negative entries")
    return w.log()


def sinkhorn_log(
    cost: Tensor,
    a: Tensor | None = None,
    b: Tensor | None = None,
    *,
    eps: float,
    n_iters: int = 1000,
    tol: float = 1e-6,
) -> SinkhornResult:
    """Batched log-domain Sinkhorn.

    Args:
        cost: ``[B, N, M]`` or ``[N, M]`` cost matrices.
        a: source weights ``[N]`` or ``[B, N]`` summing to 1 per batch element; uniform ``1/N`` if None.
        b: target weights ``[M]`` or ``[B, M]``; uniform ``1/M`` if None.
        eps: entropic regularisation, in cost units (> 0). Smaller is closer to exact OT but slower.
        n_iters: maximum number of iterations.
        tol: stop when the row-marginal L1 error of every batch element is below ``tol`` (checked
            every 10 iterations and after the last one).

    Returns:
        :class:`SinkhornResult` with the plan (same batch layout and dtype as ``cost``; computed in
        float64), the iterations used, the final marginal error and ``<P, C>``.

    Convergence slows as ``eps`` shrinks relative to the spread of ``C`` (the contraction rate
    degrades like ``exp(-max C / eps)``): check ``marginal_error`` rather than assuming ``tol`` was met.
    """
    if eps <= 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    if n_iters < 1:
        raise ValueError(f"n_iters must be >= 1, got {n_iters}")
    unbatched = cost.ndim == 2
    if unbatched:
        cost = cost.unsqueeze(0)
    if cost.ndim != 3:
        raise ValueError(f"cost must be [N, M] or [B, N, M], got {tuple(cost.shape)}")
    out_dtype = cost.dtype if cost.is_floating_point() else torch.float64
    # float64 inside: for small eps the exponents (f_i - C_ij) / eps are large and their float32
    # rounding alone would break the marginals by percent.
    cost = cost.double()
    bsz, n, m = cost.shape
    log_a = _log_weights(a, bsz, n, cost, "a")
    log_b = _log_weights(b, bsz, m, cost, "b")
    a_w = log_a.exp()

    f = torch.zeros(bsz, n, dtype=cost.dtype, device=cost.device)
    g = torch.zeros(bsz, m, dtype=cost.dtype, device=cost.device)
    err = float("inf")
    it = 0
    for it in range(1, n_iters + 1):
        f = eps * log_a - eps * torch.logsumexp((g[:, None, :] - cost) / eps, dim=2)
        g = eps * log_b - eps * torch.logsumexp((f[:, :, None] - cost) / eps, dim=1)
        if it % _CHECK_EVERY and it != n_iters:
            continue
        log_plan = (f[:, :, None] + g[:, None, :] - cost) / eps
        err = float((log_plan.logsumexp(dim=2).exp() - a_w).abs().sum(dim=1).max())
        if err < tol:
            break
    plan = log_plan.exp()
    total = (plan * cost).sum(dim=(1, 2)).to(out_dtype)
    plan = plan.to(out_dtype)
    if unbatched:
        plan, total = plan[0], total[0]
    return SinkhornResult(plan=plan, n_iters=it, marginal_error=err, cost=total)


def round_plan_to_permutation(plan: Tensor) -> Tensor:
    """Greedy rounding of a square transport plan to a permutation.

    Visits entries in decreasing order of mass and keeps an entry (i, j) when neither row i nor
    column j is taken yet. Cheap (one sort of N^2 values), exact when the plan is already a
    scaled permutation, and a heuristic otherwise.

    Args:
        plan: ``[N, N]`` non-negative plan.

    Returns:
        LongTensor ``[N]``: row ``i`` is paired with column ``perm[i]``.
    """
    if plan.ndim != 2 or plan.shape[0] != plan.shape[1]:
        raise ValueError(f"plan must be square [N, N], got {tuple(plan.shape)}")
    n = plan.shape[0]
    p = plan.detach().to("cpu", torch.float64).numpy()
    order = np.argsort(-p, axis=None, kind="stable")
    perm = np.full(n, -1, dtype=np.int64)
    col_taken = np.zeros(n, dtype=bool)
    assigned = 0
    for flat in order.tolist():
        i, j = divmod(flat, n)
        if perm[i] < 0 and not col_taken[j]:
            perm[i] = j
            col_taken[j] = True
            assigned += 1
            if assigned == n:
                break
    return torch.from_numpy(perm).to(plan.device)


def entropic_assignment(cost: Tensor, eps: float = 0.01, n_iters: int = 300) -> Tensor:
    """Approximate assignment: Sinkhorn on the mean-normalised cost, then greedy rounding.

    The cost is divided by its mean so that ``eps`` is relative to the typical cost
    (0.01 = 1% of it) whatever the scale of the data.

    Args:
        cost: ``[N, N]``.
        eps: relative entropic regularisation.
        n_iters: Sinkhorn iterations (no need to converge fully: only the ranking of entries is used).

    Solved by POT's log-stabilised Sinkhorn (``ot.sinkhorn(..., method="sinkhorn_stabilized")``).

    Returns:
        LongTensor ``[N]`` permutation, as :func:`components.ot.exact_assignment`.
    """
    import ot  # POT: its per-problem stabilised Sinkhorn is ~10x faster on CPU than the batched log-domain
    # form (benchmarks/entropic_ot.py), which stays as :func:`sinkhorn_log` for batched torch and autograd use

    c = cost.detach().to("cpu", torch.float64)
    if c.ndim != 2 or c.shape[0] != c.shape[1]:
        raise ValueError(f"cost must be square [N, N], got {tuple(c.shape)}")
    scale = float(c.mean().clamp_min(torch.finfo(c.dtype).tiny))
    n = c.shape[0]
    weights = np.full(n, 1.0 / n)
    plan = ot.sinkhorn(
        weights,
        weights,
        (c / scale).numpy(),
        eps,
        method="sinkhorn_stabilized",
        numItermax=n_iters,
        stopThr=1e-9,
        warn=False,
    )
    return round_plan_to_permutation(torch.from_numpy(np.asarray(plan))).to(cost.device)
