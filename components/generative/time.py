"""Flow-matching time: training-time samplers and the sinusoidal time embedding.

Convention for the whole generative core: t = 0 is the source (noise) x0, t = 1 is the data x1.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["TIME_SCHEDULES", "sample_time", "sinusoidal_time_embedding"]


def _uniform(batch: int, generator: torch.Generator) -> Tensor:
    """t ~ U[0, 1)."""
    return torch.rand(batch, generator=generator, device=generator.device)


def _logit_normal(batch: int, generator: torch.Generator) -> Tensor:
    """t = sigmoid(u), u ~ N(0, 1): more mass at mid times (SD3, Esser et al. 2024, with m=0, s=1)."""
    return torch.sigmoid(torch.randn(batch, generator=generator, device=generator.device))


#: name -> (batch, generator) -> t [batch] in [0, 1].
TIME_SCHEDULES: dict[str, Callable[[int, torch.Generator], Tensor]] = {
    "uniform": _uniform,
    "logit_normal": _logit_normal,
}


def sample_time(batch: int, generator: torch.Generator, schedule: str = "uniform") -> Tensor:
    """Draw training times.

    Args:
        batch: number of times B.
        generator: torch generator; times are drawn on its device.
        schedule: key of :data:`TIME_SCHEDULES` ("uniform" or "logit_normal").

    Returns:
        float32 ``[B]`` in [0, 1].
    """
    try:
        draw = TIME_SCHEDULES[schedule]
    except KeyError:
        raise ValueError(f"unknown time schedule {schedule!r}; expected one of {sorted(TIME_SCHEDULES)}") from None
    return draw(batch, generator)


def sinusoidal_time_embedding(t: Tensor, dim: int, max_period: float = 10_000.0) -> Tensor:
    """Transformer-style sinusoidal embedding of a scalar time per sample.

    ``emb = [cos(s * t * w_k), sin(s * t * w_k)]_k`` with ``w_k = max_period^(-k / (dim/2))`` and
    ``s = 1000``: times live in [0, 1], so they are scaled to the range where the frequencies differ.

    Args:
        t: ``[B]`` times.
        dim: even embedding size.
        max_period: lowest frequency is ``1 / max_period``.

    Returns:
        ``[B, dim]`` in ``t``'s dtype (float32 for integer input).
    """
    if dim % 2:
        raise ValueError(f"dim must be even, got {dim}")
    if t.ndim != 1:
        raise ValueError(f"t must be [B], got {tuple(t.shape)}")
    t = t if t.is_floating_point() else t.float()
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, device=t.device, dtype=t.dtype) / half)
    args = 1000.0 * t[:, None] * freqs[None, :]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=1)
