"""Flow-matching time: training-time samplers (and, re-exported, the sinusoidal time embedding of
:mod:`components.models.layers`).

Convention for the whole generative core: t = 0 is the source (noise) x0, t = 1 is the data x1.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from components.models.layers import sinusoidal_time_embedding

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
