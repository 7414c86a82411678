"""Distances between sample sets, and what a transport map does to the order of its samples.

* ``wasserstein_1d``: exact p-Wasserstein distance between two 1-D empirical distributions (any sizes),
  from their quantile functions::

      W_p(a, b)^p = int_0^1 |F_a^{-1}(u) - F_b^{-1}(u)|^p du

  Both quantile functions are step functions, constant between the levels ``i/n`` and ``j/m``, so the
  integral is a finite sum over the merged levels (W1 equals scipy's ``wasserstein_distance``).
* ``sliced_wasserstein``: ``SW_p(a, b) = (mean_k W_p(<a, theta_k>, <b, theta_k>)^p)^(1/p)`` over random
  unit directions ``theta_k`` (Bonneel et al. 2015; POT's ``sliced_wasserstein_distance`` convention).
* ``frechet_distance``: ``||mu_a - mu_b||^2 + Tr(S_a + S_b - 2 (S_a S_b)^(1/2))`` between Gaussians fitted to
  two feature sets (FID, Heusel et al. 2017, when the features come from a trained classifier).
* ``inception_score``: ``exp(E_x KL(p(y|x) || p(y)))`` from class probabilities (Salimans et al. 2016).
* ``order_flip_fraction``: for a map of 1-D points ``x_start -> x_end``, the fraction of pairs whose order
  is reversed. Paths of a 1-D ODE flow cannot cross, so a deterministic flow gives 0 (up to Euler error);
  an independent coupling gives 1/2.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "frechet_distance",
    "frechet_distance_from_stats",
    "inception_score",
    "order_flip_fraction",
    "sliced_wasserstein",
    "wasserstein_1d",
]


def _as_1d(x: Tensor, name: str) -> Tensor:
    x = torch.as_tensor(x)
    if x.ndim == 2 and x.shape[1] == 1:
        x = x[:, 0]
    if x.ndim != 1 or x.numel() == 0:
        raise ValueError(f"{name} must be a non-empty [N] (or [N, 1]) tensor, got {tuple(x.shape)}")
    return x.double()


def _quantile_grid(n: int, m: int) -> tuple[Tensor, Tensor, Tensor]:
    """Merged quantile levels of two empirical distributions of sizes n and m.

    Returns ``(widths [L], ia [L], ib [L])``: on the k-th interval of the merged levels ``{i/n} u {j/m}``
    the quantile functions are the ``ia[k]``-th and ``ib[k]``-th order statistics; the widths sum to 1.
    """
    levels = torch.unique(
        torch.cat([torch.arange(1, n + 1, dtype=torch.float64) / n, torch.arange(1, m + 1, dtype=torch.float64) / m])
    )
    levels[-1] = 1.0
    lower = torch.cat([levels.new_zeros(1), levels[:-1]])
    mid = 0.5 * (lower + levels)
    ia = torch.clamp((mid * n).floor().long(), max=n - 1)
    ib = torch.clamp((mid * m).floor().long(), max=m - 1)
    return levels - lower, ia, ib


def _wasserstein_pp(sorted_a: Tensor, sorted_b: Tensor, p: float) -> Tensor:
    """``W_p^p`` for sorted samples along dim 0 (``[N, K]`` and ``[M, K]``: K problems at once) -> ``[K]``."""
    widths, ia, ib = _quantile_grid(sorted_a.shape[0], sorted_b.shape[0])
    return (widths[:, None] * (sorted_a[ia] - sorted_b[ib]).abs().pow(p)).sum(0)


def wasserstein_1d(a: Tensor, b: Tensor, p: float = 1.0) -> float:
    """Exact ``W_p`` between the empirical distributions of ``a [N]`` and ``b [M]`` (``[N, 1]`` accepted).

    Two point masses at 0 and c are at distance |c| for every p; equal sets are at distance 0.
    """
    if p < 1:
        raise ValueError(f"p must be >= 1, got {p}")
    qa, qb = torch.sort(_as_1d(a, "a")).values, torch.sort(_as_1d(b, "b")).values
    return float(_wasserstein_pp(qa[:, None], qb[:, None], p)[0] ** (1.0 / p))


def sliced_wasserstein(
    a: Tensor, b: Tensor, n_projections: int = 200, p: float = 2.0, generator: torch.Generator | None = None
) -> float:
    """Sliced ``SW_p`` between point sets ``a [N, D]`` and ``b [M, D]`` over ``n_projections`` random
    directions drawn uniformly on the unit sphere (from ``generator``)."""
    a, b = torch.as_tensor(a).double(), torch.as_tensor(b).double()
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or min(a.shape[0], b.shape[0]) == 0:
        raise ValueError(
            f"point sets must be non-empty [N, D] and [M, D] with one D, got {tuple(a.shape)} and {tuple(b.shape)}"
        )
    if n_projections < 1 or p < 1:
        raise ValueError(f"need n_projections >= 1 and p >= 1, got {n_projections} and {p}")
    theta = torch.randn(n_projections, a.shape[1], generator=generator, dtype=torch.float64)
    theta = theta / theta.norm(dim=1, keepdim=True)
    pa, pb = torch.sort(a @ theta.T, dim=0).values, torch.sort(b @ theta.T, dim=0).values
    return float(_wasserstein_pp(pa, pb, p).mean() ** (1.0 / p))


def _sqrtm_psd(mat: Tensor) -> Tensor:
    vals, vecs = torch.linalg.eigh(mat)
    return (vecs * vals.clamp_min(0).sqrt()) @ vecs.T


def frechet_distance_from_stats(mu_a: Tensor, cov_a: Tensor, mu_b: Tensor, cov_b: Tensor) -> float:
    """Fréchet (2-Wasserstein squared) distance between N(mu_a, cov_a) and N(mu_b, cov_b).

    ``Tr (S_a S_b)^(1/2)`` is computed as ``Tr (S_a^(1/2) S_b S_a^(1/2))^(1/2)`` (a symmetric PSD matrix, so an
    eigen-decomposition suffices), in float64.
    """
    mu_a, mu_b, cov_a, cov_b = (torch.as_tensor(x).double() for x in (mu_a, mu_b, cov_a, cov_b))
    root_a = _sqrtm_psd(cov_a)
    middle = root_a @ cov_b @ root_a
    trace_sqrt = torch.linalg.eigvalsh(0.5 * (middle + middle.T)).clamp_min(0).sqrt().sum()
    value = (mu_a - mu_b).pow(2).sum() + torch.trace(cov_a) + torch.trace(cov_b) - 2 * trace_sqrt
    return float(value.clamp_min(0))


def frechet_distance(feats_a: Tensor, feats_b: Tensor) -> float:
    """FID-style distance between feature sets ``[N, F]`` and ``[M, F]`` (Gaussian fits, unbiased covariances)."""
    feats_a, feats_b = torch.as_tensor(feats_a).double(), torch.as_tensor(feats_b).double()
    if feats_a.ndim != 2 or feats_b.ndim != 2 or feats_a.shape[1] != feats_b.shape[1]:
        raise ValueError(f"features must be [N, F] and [M, F], got {tuple(feats_a.shape)} and {tuple(feats_b.shape)}")
    if min(feats_a.shape[0], feats_b.shape[0]) < 2:
        raise ValueError("need at least two samples per set to estimate a covariance")
    return frechet_distance_from_stats(
        feats_a.mean(0),
        torch.cov(feats_a.T).reshape(feats_a.shape[1], -1),
        feats_b.mean(0),
        torch.cov(feats_b.T).reshape(feats_b.shape[1], -1),
    )


def inception_score(probs: Tensor, eps: float = 1e-12) -> float:
    """``exp(mean_i KL(p_i || mean_j p_j))`` for class probabilities ``probs [N, C]`` (rows sum to 1).

    1 when every sample gets the same prediction; C when predictions are confident and classes balanced.
    """
    probs = torch.as_tensor(probs).double()
    if probs.ndim != 2 or probs.shape[0] == 0:
        raise ValueError(f"probs must be [N, C], got {tuple(probs.shape)}")
    marginal = probs.mean(0, keepdim=True)
    kl = (probs * (torch.log(probs + eps) - torch.log(marginal + eps))).sum(1)
    return float(torch.exp(kl.mean()))


def order_flip_fraction(x_start: Tensor, x_end: Tensor, chunk: int = 1024) -> float:
    """Fraction of pairs ``i < j`` whose order differs between ``x_start`` and ``x_end`` (both ``[N]`` or
    ``[N, 1]``): ``(x_start_i - x_start_j) (x_end_i - x_end_j) < 0``. Ties count as not flipped."""
    a, b = _as_1d(x_start, "x_start"), _as_1d(x_end, "x_end")
    if a.shape != b.shape or a.numel() < 2:
        raise ValueError(f"x_start and x_end must hold the same N >= 2 points, got {a.numel()} and {b.numel()}")
    n = a.numel()
    flips = 0
    for lo in range(0, n, chunk):
        sign = (a[lo : lo + chunk, None] - a[None, :]) * (b[lo : lo + chunk, None] - b[None, :])
        flips += int((sign < 0).sum())
    return flips / (n * (n - 1))  # every unordered pair was counted twice
