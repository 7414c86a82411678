"""Canonical correlation analysis of two row-aligned feature sets, and the CSA similarity built on it.

Given N pairs A [N, d1], B [N, d2] (rows aligned):

1. centre: A0 = A - mu_A, B0 = B - mu_B;
2. S11 = A0^T A0 / N + r1 I, S22 = B0^T B0 / N + r2 I, S12 = A0^T B0 / N, with the ridge
   r = ridge * tr(S) / d + eps (``ridge`` relative to the mean variance; ``eps`` = 1e-5 keeps a rank-deficient
   covariance invertible, as CSA adds 1e-5 I);
3. M = S11^{-1/2} S12 S22^{-1/2} = U S V^T (SVD); the singular values are the canonical correlations rho_k
   (in [0, 1], sorted decreasing);
4. W_A = U^T S11^{-1/2} [k, d1], W_B = V^T S22^{-1/2} [k, d2], z_A = W_A (a - mu_A), z_B = W_B (b - mu_B).

Any whitening W with W S W^T = I gives the same rho and the same canonical variables (two whitenings differ
by a rotation, which the SVD absorbs), so `fit_cca` whitens with the Cholesky factors S = L L^T (L^{-1} in
place of S^{-1/2}: a fraction of an eigendecomposition's cost) and forms the covariances from centred row
blocks (no centred copy of the data).

Then W_A S11 W_A^T = I, W_B S22 W_B^T = I and W_A S12 W_B^T = diag(rho): the canonical variables are
white within each view and correlated pairwise by rho_k (exactly so at ridge 0).
Note: U^T, not U, multiplies S11^{-1/2}; the latter does not whiten view A.

CSA similarity (canonical similarity analysis) of a and b in s dimensions:
    sim(a, b) = sum_{k <= s} rho_k * ah_k * bh_k,  ah = z_A[:s] / ||z_A[:s]||, bh = z_B[:s] / ||z_B[:s]||;
with ``equal_weights`` rho_k = 1 and sim is the plain cosine of the truncated canonical vectors.
numpy and scipy.linalg.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular
from scipy.linalg.blas import dsyrk

EPS = 1e-5


@dataclass(frozen=True)
class CCAModel:
    """A fitted CCA: means [d1], [d2]; projections W_a [k, d1], W_b [k, d2]; correlations rho [k] (decreasing)."""

    mean_a: np.ndarray
    mean_b: np.ndarray
    w_a: np.ndarray
    w_b: np.ndarray
    rho: np.ndarray

    def transform_a(self, a: np.ndarray) -> np.ndarray:
        """Canonical variables of view A: (a - mu_A) W_A^T -> [n, k]."""
        return (np.asarray(a, dtype=np.float64) - self.mean_a) @ self.w_a.T

    def transform_b(self, b: np.ndarray) -> np.ndarray:
        """Canonical variables of view B: (b - mu_B) W_B^T -> [n, k]."""
        return (np.asarray(b, dtype=np.float64) - self.mean_b) @ self.w_b.T


def _check_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or len(a) != len(b):
        raise ValueError(f"CCA needs row-aligned [N, d1] and [N, d2] arrays, got {a.shape} and {b.shape}")
    if len(a) < 2:
        raise ValueError(f"CCA needs at least 2 pairs, got {len(a)}")
    return a, b


def _covariances(
    a: np.ndarray, b: np.ndarray, block: int = 8192
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Means and S11, S22, S12 (divided by N), accumulated over centred blocks of rows. A NaN or infinite
    input makes its column's mean non-finite, which is refused here."""
    n = len(a)
    mean_a, mean_b = a.mean(0), b.mean(0)
    if not (np.isfinite(mean_a).all() and np.isfinite(mean_b).all()):
        raise ValueError("CCA inputs hold NaN or infinite values")
    # the symmetric products by BLAS syrk (one triangle: half a general product's work), Fortran-ordered
    s11, s22 = np.zeros((a.shape[1],) * 2, order="F"), np.zeros((b.shape[1],) * 2, order="F")
    s12 = np.zeros((a.shape[1], b.shape[1]))
    for start in range(0, n, block):
        ca, cb = a[start : start + block] - mean_a, b[start : start + block] - mean_b
        s11 = dsyrk(1.0, ca.T, beta=1.0, c=s11, overwrite_c=1)  # ca.T is Fortran-ordered: no copy
        s22 = dsyrk(1.0, cb.T, beta=1.0, c=s22, overwrite_c=1)
        s12 += ca.T @ cb
    return mean_a, mean_b, _symmetric(s11) / n, _symmetric(s22) / n, s12 / n


def _symmetric(upper: np.ndarray) -> np.ndarray:
    """The full symmetric matrix from its upper triangle (what syrk fills)."""
    return np.triu(upper) + np.triu(upper, 1).T


def _cholesky(cov: np.ndarray, view: str) -> np.ndarray:
    try:
        return np.linalg.cholesky((cov + cov.T) / 2)
    except np.linalg.LinAlgError:
        raise ValueError(f"the covariance of view {view} is not positive definite; raise the ridge (or eps)") from None


def inverse_sqrt(cov: np.ndarray) -> np.ndarray:
    """S^{-1/2} of a symmetric positive definite matrix by its eigendecomposition."""
    values, vectors = np.linalg.eigh((cov + cov.T) / 2)
    if values.min() <= 0:
        raise ValueError(
            f"covariance is not positive definite (smallest eigenvalue {values.min():.3g}); raise the ridge"
        )
    return (vectors / np.sqrt(values)) @ vectors.T


def _ridged(cov: np.ndarray, ridge: float, eps: float = EPS) -> np.ndarray:
    d = cov.shape[0]
    return cov + (ridge * np.trace(cov) / d + eps) * np.eye(d)


def fit_cca(a: np.ndarray, b: np.ndarray, *, ridge: float = 0.0, dims: int | None = None, eps: float = EPS) -> CCAModel:
    """Fit CCA on pairs (a[i], b[i]); keep the first ``dims`` canonical pairs (default: min(d1, d2)).

    ``ridge`` >= 0 is relative to each view's mean variance (see the module docstring); ``eps`` = 0 gives the
    unregularised CCA (full-rank covariances only)."""
    a, b = _check_pairs(a, b)
    if ridge < 0:
        raise ValueError(f"ridge must be >= 0, got {ridge}")
    mean_a, mean_b, s11, s22, s12 = _covariances(a, b)
    l11, l22 = _cholesky(_ridged(s11, ridge, eps), "A"), _cholesky(_ridged(s22, ridge, eps), "B")
    m = solve_triangular(l22, solve_triangular(l11, s12, lower=True).T, lower=True).T  # L11^-1 S12 L22^-T
    u, s, vt = np.linalg.svd(m, full_matrices=False)
    k = min(u.shape[1], vt.shape[0]) if dims is None else min(dims, u.shape[1], vt.shape[0])
    w_a = solve_triangular(l11, u[:, :k], lower=True, trans="T").T  # U^T L11^-1
    w_b = solve_triangular(l22, vt[:k].T, lower=True, trans="T").T  # V^T L22^-1
    if not (np.isfinite(w_a).all() and np.isfinite(w_b).all()):
        raise ValueError("CCA inputs hold values too large to fit")
    return CCAModel(mean_a=mean_a, mean_b=mean_b, w_a=w_a, w_b=w_b, rho=np.clip(s[:k], 0.0, 1.0))


def _unit(z: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(z, axis=1, keepdims=True)
    return z / np.where(norms > 0, norms, 1.0)


def csa_embed(model: CCAModel, a: np.ndarray | None = None, b: np.ndarray | None = None, *, sim_dim: int) -> np.ndarray:
    """The unit-normalised first ``sim_dim`` canonical variables of view A rows ``a`` or view B rows ``b``."""
    if (a is None) == (b is None):
        raise ValueError("give exactly one of a and b")
    if not 1 <= sim_dim:
        raise ValueError(f"sim_dim must be >= 1, got {sim_dim}")
    z = model.transform_a(a) if a is not None else model.transform_b(b)
    return _unit(z[:, :sim_dim])


def csa_weights(model: CCAModel, sim_dim: int, equal_weights: bool = False) -> np.ndarray:
    """The per-dimension weights of the CSA similarity: rho[:s], or ones with ``equal_weights``."""
    s = min(sim_dim, len(model.rho))
    return np.ones(s) if equal_weights else model.rho[:s].copy()


def csa_similarity(
    model: CCAModel, a: np.ndarray, b: np.ndarray, *, sim_dim: int, equal_weights: bool = False
) -> np.ndarray:
    """sim(a_i, b_j) = sum_{k<=s} rho_k ah_ik bh_jk for every pair -> [n_a, n_b] (see the module docstring)."""
    w = csa_weights(model, sim_dim, equal_weights)
    return (csa_embed(model, a=a, sim_dim=sim_dim) * w) @ csa_embed(model, b=b, sim_dim=sim_dim).T
