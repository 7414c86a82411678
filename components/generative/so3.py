"""Flow matching on the rotation group SO(3): Lie-algebra maps, geodesic interpolant, Riemannian Euler.

Conventions (rotation vectors ``w`` in R^3 are coordinates of so(3) through :func:`hat`):

    hat(w) = [[0, -w3, w2], [w3, 0, -w1], [-w2, w1, 0]],   vee(hat(w)) = w
    exp(w) = I + sin(a)/a K + (1 - cos a)/a^2 K^2,  K = hat(w), a = |w|      (Rodrigues)
    log(R) = a / (2 sin a) * vee(R - R^T),  a = atan2(|vee(R - R^T)| / 2, (tr R - 1) / 2)

Geodesic interpolant (FoldFlow / FrameFlow; OC-Flow's SO(3) toy): ``R_t = R0 exp(t v)`` with
``v = log(R0^T R1)``, so ``dR_t/dt = R_t hat(v)``: the target velocity is the constant body-frame
rotation vector ``v``. The Riemannian Euler step ``R <- R exp(h w)`` moves along the group, so every
state stays a rotation to float precision, unlike the Euclidean step ``R <- R + h R hat(w)``.

A velocity model on SO(3) is ``model(R [B, 3, 3], t [B]) -> w [B, 3]`` (body-frame angular velocity),
trained by :func:`velocity_loss` on ``(R_t, t, v)`` from the interpolant. The manifold errors
``||R^T R - I||_F`` and ``|det R - 1|`` are both 0 exactly on SO(3).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from components.generative.samplers import SampleResult

__all__ = [
    "determinant_error",
    "euler_step",
    "exp_map",
    "geodesic_distance",
    "geodesic_interpolant",
    "hat",
    "log_map",
    "nearest_geodesic_distance",
    "orthogonality_error",
    "perturb_rotations",
    "random_rotations",
    "sample_so3",
    "vee",
    "velocity_loss",
]

# below this angle the Rodrigues / log coefficients switch to their Taylor series (no 0/0)
_SMALL = 1e-4
# within this of pi, log's axis is read from the symmetric part (vee(R - R^T) ~ 2 sin(a) n vanishes)
_NEAR_PI = 1e-2


def hat(w: Tensor) -> Tensor:
    """``[..., 3]`` rotation vectors -> ``[..., 3, 3]`` skew-symmetric matrices ``hat(w) x = w x x``."""
    if w.shape[-1] != 3:
        raise ValueError(f"hat expects [..., 3], got {tuple(w.shape)}")
    zero = torch.zeros_like(w[..., 0])
    w1, w2, w3 = w.unbind(-1)
    rows = [torch.stack([zero, -w3, w2], -1), torch.stack([w3, zero, -w1], -1), torch.stack([-w2, w1, zero], -1)]
    return torch.stack(rows, -2)


def vee(m: Tensor) -> Tensor:
    """``[..., 3, 3]`` -> ``[..., 3]``: the rotation vector of the skew part ``(m - m^T) / 2``."""
    if m.shape[-2:] != (3, 3):
        raise ValueError(f"vee expects [..., 3, 3], got {tuple(m.shape)}")
    return 0.5 * torch.stack(
        [m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]], -1
    )


def _safe_norm(v: Tensor) -> Tensor:
    # sqrt(|v|^2 + tiny): finite gradient at v = 0 (the exact norm's gradient is 0/0 there)
    return torch.sqrt(v.pow(2).sum(-1) + torch.finfo(v.dtype).tiny)


def exp_map(w: Tensor) -> Tensor:
    """Exponential map so(3) -> SO(3) (Rodrigues). ``w [..., 3]`` -> ``R [..., 3, 3]``."""
    a2 = w.pow(2).sum(-1)
    small = a2 < _SMALL**2
    a = torch.sqrt(torch.where(small, torch.ones_like(a2), a2))  # safe: never sqrt(0) in the used branch
    c1 = torch.where(small, 1 - a2 / 6 + a2**2 / 120, torch.sin(a) / a)  # sin(a) / a
    c2 = torch.where(small, 0.5 - a2 / 24 + a2**2 / 720, (1 - torch.cos(a)) / a**2)  # (1 - cos a) / a^2
    k = hat(w)
    eye = torch.eye(3, dtype=w.dtype, device=w.device).expand(k.shape)
    return eye + c1[..., None, None] * k + c2[..., None, None] * (k @ k)


def _angle(r: Tensor) -> tuple[Tensor, Tensor]:
    """``(a, vee(R - R^T))``: the angle in [0, pi] by atan2 (accurate at both ends) and ``2 sin(a) n``."""
    axis2 = 2 * vee(r)  # 2 sin(a) n for a rotation
    cos_a = 0.5 * (r.diagonal(dim1=-2, dim2=-1).sum(-1) - 1)
    return torch.atan2(0.5 * _safe_norm(axis2), cos_a), axis2


def log_map(r: Tensor) -> Tensor:
    """Logarithm SO(3) -> so(3) with angle in [0, pi]. ``R [..., 3, 3]`` -> ``w [..., 3]``, ``|w| <= pi``."""
    a, axis2 = _angle(r)
    small = a < _SMALL
    sin_a = torch.sin(a)
    scale = torch.where(small, 0.5 + a**2 / 12, a / (2 * torch.where(small, torch.ones_like(sin_a), sin_a)))
    w = scale[..., None] * axis2
    near_pi = a > math.pi - _NEAR_PI
    if bool(near_pi.any()):
        # R + R^T = 2 cos(a) I + 2 (1 - cos a) n n^T: take the largest column of n n^T as the axis
        sym = 0.5 * (r + r.transpose(-1, -2)) - torch.cos(a)[..., None, None] * torch.eye(
            3, dtype=r.dtype, device=r.device
        )
        col = sym.diagonal(dim1=-2, dim2=-1).argmax(-1)
        n = torch.gather(sym, -1, col[..., None, None].expand(*sym.shape[:-1], 1)).squeeze(-1)
        n = n / _safe_norm(n)[..., None]
        sign = torch.where((n * axis2).sum(-1) < 0, -1.0, 1.0).to(r.dtype)  # sin(a) n fixes the sign
        w = torch.where(near_pi[..., None], (sign * a)[..., None] * n, w)
    return w


def geodesic_distance(r1: Tensor, r2: Tensor) -> Tensor:
    """Angle of ``R1^T R2`` in [0, pi] (radians): the bi-invariant geodesic distance. ``[..., 3, 3]`` -> ``[...]``.

    Defined (and differentiable) for any 3x3 matrices, so it also scores states that left SO(3).
    """
    return _angle(r1.transpose(-1, -2) @ r2)[0]


def geodesic_interpolant(r0: Tensor, r1: Tensor, t: Tensor) -> tuple[Tensor, Tensor]:
    """``R_t = R0 exp(t v)``, ``v = log(R0^T R1)``; returns ``(R_t [B, 3, 3], v [B, 3])``.

    ``v`` is the body-frame velocity: ``dR_t/dt = R_t hat(v)``, the flow-matching target on SO(3).
    """
    if r0.shape != r1.shape or r0.shape[-2:] != (3, 3):
        raise ValueError(f"r0 and r1 must both be [B, 3, 3], got {tuple(r0.shape)} and {tuple(r1.shape)}")
    if t.shape != r0.shape[:1]:
        raise ValueError(f"t must be [B] with B={r0.shape[0]}, got {tuple(t.shape)}")
    v = log_map(r0.transpose(-1, -2) @ r1)
    return r0 @ exp_map(t.to(v.dtype)[:, None] * v), v


def euler_step(r: Tensor, w: Tensor, h: float) -> Tensor:
    """Riemannian Euler step along the group: ``R <- R exp(h w)`` (``R [B, 3, 3]``, ``w [B, 3]``)."""
    return r @ exp_map(h * w)


def sample_so3(
    model: Callable[[Tensor, Tensor], Tensor],
    r0: Tensor,
    n_steps: int,
    t0: float = 0.0,
    t1: float = 1.0,
    return_trajectory: bool = False,
) -> SampleResult:
    """Integrate ``dR/dt = R hat(model(R, t))`` with :func:`euler_step` on the uniform grid of ``n_steps``.

    The SO(3) counterpart of :func:`components.generative.sample` (same result type and NFE count).

    Args:
        model: ``model(R [B, 3, 3], t [B]) -> w [B, 3]``.
        r0: ``[B, 3, 3]`` initial rotations.
        n_steps: steps (>= 1); NFE = n_steps.
    """
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1, got {n_steps}")
    h = (t1 - t0) / n_steps
    r, states = r0, ([r0] if return_trajectory else None)
    for k in range(n_steps):
        r = euler_step(r, model(r, torch.full((r.shape[0],), t0 + k * h, dtype=r.dtype, device=r.device)), h)
        if states is not None:
            states.append(r)
    return SampleResult(x=r, nfe=n_steps, trajectory=torch.stack(states) if states is not None else None)


def random_rotations(n: int, generator: torch.Generator, dtype: torch.dtype = torch.float64) -> Tensor:
    """``n`` Haar-uniform rotations ``[n, 3, 3]`` (normalised Gaussian quaternions)."""
    q = torch.randn(n, 4, generator=generator, dtype=dtype)
    q = q / q.norm(dim=-1, keepdim=True)
    w, x, y, z = q.unbind(-1)
    rows = [
        torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
        torch.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
        torch.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
    ]
    return torch.stack(rows, -2)


def perturb_rotations(centers: Tensor, spread: float, generator: torch.Generator) -> Tensor:
    """``C exp(spread * xi)``, ``xi ~ N(0, I_3)``: an isotropic cluster around each ``C [n, 3, 3]``."""
    xi = torch.randn(centers.shape[0], 3, generator=generator, dtype=centers.dtype)
    return centers @ exp_map(spread * xi)


def orthogonality_error(r: Tensor) -> Tensor:
    """``||R^T R - I||_F`` per matrix: 0 exactly on O(3). ``[..., 3, 3]`` -> ``[...]``."""
    eye = torch.eye(3, dtype=r.dtype, device=r.device)
    return (r.transpose(-1, -2) @ r - eye).flatten(-2).norm(dim=-1)


def determinant_error(r: Tensor) -> Tensor:
    """``|det R - 1|`` per matrix: 0 on SO(3), with :func:`orthogonality_error`. ``[..., 3, 3]`` -> ``[...]``."""
    return (torch.linalg.det(r) - 1).abs()


def nearest_geodesic_distance(r: Tensor, data: Tensor) -> Tensor:
    """Geodesic distance (radians) of each ``R [B, 3, 3]`` to its nearest rotation in ``data [M, 3, 3]``: ``[B]``.

    Uses ``cos a = (tr(R^T D) - 1) / 2`` with ``tr(R^T D) = sum_ij R_ij D_ij`` (one matrix product for all pairs).
    """
    cos = 0.5 * (torch.einsum("bij,mij->bm", r, data) - 1)
    return torch.arccos(cos.clamp(-1, 1)).min(1).values


def velocity_loss(model: Callable[[Tensor, Tensor], Tensor], batch: tuple[Tensor, Tensor, Tensor]) -> Tensor:
    """Flow matching on SO(3): ``mean ||model(R_t, t) - v||^2`` on a ``(R_t, t, v)`` batch (the loss for ``fit``)."""
    r_t, t, v = batch
    return (model(r_t, t) - v).pow(2).mean()
