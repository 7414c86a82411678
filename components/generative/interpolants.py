"""Interpolants between source x0 (t = 0) and data x1 (t = 1) and their velocity targets.

An interpolant is ``x_t = alpha(t) * x1 + sigma(t) * x0`` with ``alpha(0) = 0, alpha(1) = 1,
sigma(0) = 1, sigma(1) = 0``; the flow-matching target is its time derivative
``dx_t/dt = alpha'(t) * x1 + sigma'(t) * x0``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["Interpolant", "INTERPOLANTS", "interpolate", "broadcast_time"]


@dataclass(frozen=True)
class Interpolant:
    """Coefficients of ``x_t = alpha(t) x1 + sigma(t) x0`` and their derivatives (elementwise in t)."""

    alpha: Callable[[Tensor], Tensor]
    sigma: Callable[[Tensor], Tensor]
    d_alpha: Callable[[Tensor], Tensor]
    d_sigma: Callable[[Tensor], Tensor]


_HALF_PI = math.pi / 2

INTERPOLANTS: dict[str, Interpolant] = {
    # Rectified flow / conditional OT path (Liu et al. 2023; Lipman et al. 2023, sigma_min = 0):
    # x_t = (1 - t) x0 + t x1, target x1 - x0.
    "linear": Interpolant(
        alpha=lambda t: t, sigma=lambda t: 1 - t, d_alpha=torch.ones_like, d_sigma=lambda t: -torch.ones_like(t)
    ),
    # Trigonometric / variance-preserving path (Albergo & Vanden-Eijnden 2023, "GVP"):
    # x_t = cos(pi t / 2) x0 + sin(pi t / 2) x1, so alpha^2 + sigma^2 = 1.
    "trig": Interpolant(
        alpha=lambda t: torch.sin(_HALF_PI * t),
        sigma=lambda t: torch.cos(_HALF_PI * t),
        d_alpha=lambda t: _HALF_PI * torch.cos(_HALF_PI * t),
        d_sigma=lambda t: -_HALF_PI * torch.sin(_HALF_PI * t),
    ),
}


def broadcast_time(t: Tensor, like: Tensor) -> Tensor:
    """Reshape per-sample times ``[B]`` to ``[B, 1, ..., 1]`` so they broadcast against ``like [B, ...]``."""
    if t.ndim != 1 or t.shape[0] != like.shape[0]:
        raise ValueError(f"t must be [B] with B={like.shape[0]}, got {tuple(t.shape)}")
    return t.to(like.dtype).view(-1, *([1] * (like.ndim - 1)))


def interpolate(x0: Tensor, x1: Tensor, t: Tensor, interpolant: str = "linear") -> tuple[Tensor, Tensor]:
    """Point on the path and its velocity target.

    Args:
        x0: ``[B, ...]`` source (noise) samples.
        x1: ``[B, ...]`` data samples, paired with ``x0``.
        t: ``[B]`` times in [0, 1].
        interpolant: key of :data:`INTERPOLANTS` ("linear" or "trig").

    Returns:
        ``(x_t, target)``, both ``[B, ...]``: ``x_t = alpha(t) x1 + sigma(t) x0`` and
        ``target = alpha'(t) x1 + sigma'(t) x0`` (for "linear": ``(1 - t) x0 + t x1`` and ``x1 - x0``).
    """
    if x0.shape != x1.shape:
        raise ValueError(f"x0 and x1 shapes differ: {tuple(x0.shape)} vs {tuple(x1.shape)}")
    try:
        path = INTERPOLANTS[interpolant]
    except KeyError:
        raise ValueError(f"unknown interpolant {interpolant!r}; expected one of {sorted(INTERPOLANTS)}") from None
    tb = broadcast_time(t, x0)
    x_t = path.alpha(tb) * x1 + path.sigma(tb) * x0
    target = path.d_alpha(tb) * x1 + path.d_sigma(tb) * x0
    return x_t, target
