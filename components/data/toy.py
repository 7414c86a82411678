"""Low-dimensional toy targets shared by the flow papers (HRF's 1-D mixture and 2-D moons, OC-Flow's moons)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor


def two_moons(n: int, noise: float, seed: int) -> tuple[Tensor, Tensor]:
    """``(points [n, 2] float32, moon label [n] int64)`` from sklearn's ``make_moons`` (label 0: upper moon).

    The moons span x in [-1, 2], y in [-0.5, 1]; their centre is (0.5, 0.25).
    """
    from sklearn.datasets import make_moons

    x, y = make_moons(n_samples=n, noise=noise, random_state=seed)
    return torch.from_numpy(np.asarray(x)).float(), torch.from_numpy(np.asarray(y)).long()


MOONS_CENTRE = (0.5, 0.25)


def gaussian_mixture_1d(means: Sequence[float], variance: float, n: int, generator: torch.Generator) -> Tensor:
    """``[n, 1]`` samples of an equal-weight 1-D Gaussian mixture with the given means and one variance."""
    centres = torch.tensor(list(means), dtype=torch.float32)
    component = torch.randint(0, len(centres), (n,), generator=generator)
    return (centres[component] + math.sqrt(variance) * torch.randn(n, generator=generator))[:, None]


def eight_gaussians(n: int, generator: torch.Generator, radius: float = 5.0, variance: float = 0.1) -> Tensor:
    """``[n, 2]`` samples of 8 equal-weight Gaussians ``N(c_k, variance I)`` with centres ``c_k`` evenly spaced on
    the circle of ``radius`` (at angles k pi / 4): the source of the official HRF ``moon`` experiment
    (``riccizz/HRF`` ``lowdim/utils.py``: radius 5, variance 0.1)."""
    angles = torch.arange(8, dtype=torch.float64) * (math.pi / 4)
    centres = radius * torch.stack([angles.cos(), angles.sin()], dim=1).float()
    component = torch.randint(0, 8, (n,), generator=generator)
    return centres[component] + math.sqrt(variance) * torch.randn(n, 2, generator=generator)
