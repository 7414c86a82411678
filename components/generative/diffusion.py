"""Discrete-time Gaussian diffusion with an x0-predicting model: the linear beta schedule, forward noising,
classifier-free guidance and the deterministic DDIM sampler.

Schedule (Ho et al. 2020): ``beta_n`` linear from ``beta_start`` to ``beta_end`` for ``n = 0..T-1``,
``alpha_bar_n = prod_{m <= n} (1 - beta_m)``. Forward noising of a clean ``x0``:

    x_n = sqrt(alpha_bar_n) x0 + sqrt(1 - alpha_bar_n) eps,       eps ~ N(0, I)

DDIM (Song et al. 2021, eta = 0) with a model ``f(x_n, n) -> x0_hat`` on the descending grid
``n_0 = T-1 > n_1 > ... > 0`` (``T-1``, then every multiple of ``stride`` below it, 0 included):

    eps_hat  = (x_n - sqrt(alpha_bar_n) x0_hat) / sqrt(1 - alpha_bar_n)
    x_prev   = sqrt(alpha_bar_prev) x0_hat + sqrt(1 - alpha_bar_prev) eps_hat        (alpha_bar after 0 is 1,
                                                                                      so the last step is x0_hat)

Classifier-free guidance of an x0 model (PreferDiff's convention): ``x0_hat = (1 + w) f(x, n | c) - w f(x, n | none)``.

Like :mod:`components.generative.samplers`, models are called as ``model(x [B, ...], n [B])`` (conditioning
closed over) and :func:`ddim_sample` returns a :class:`~components.generative.samplers.SampleResult`; ``n`` is an
integer step index here, not a time in [0, 1].
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from components.generative.samplers import SampleResult

__all__ = ["DiffusionSchedule", "cfg_x0", "ddim_grid", "ddim_sample", "linear_beta_schedule", "q_sample"]

#: ``model(x [B, ...], n [B] long) -> x0_hat [B, ...]``
X0Model = Callable[[Tensor, Tensor], Tensor]


@dataclass(frozen=True)
class DiffusionSchedule:
    """``betas`` and ``alpha_bar`` [T] (float64 on the CPU; indexed by integer steps)."""

    betas: Tensor
    alpha_bar: Tensor

    @property
    def steps(self) -> int:
        return int(self.betas.shape[0])

    def coefficients(self, n: Tensor, like: Tensor) -> tuple[Tensor, Tensor]:
        """``(sqrt(alpha_bar_n), sqrt(1 - alpha_bar_n))`` per row, shaped to broadcast against ``like``."""
        ab = self.alpha_bar.to(like.device)[n.to(like.device)].to(like.dtype)
        shape = (-1,) + (1,) * (like.ndim - 1)
        return ab.sqrt().view(shape), (1 - ab).sqrt().view(shape)


def linear_beta_schedule(steps: int, beta_start: float = 1e-4, beta_end: float = 0.02) -> DiffusionSchedule:
    """The linear schedule of DDPM (PreferDiff: 1e-4 to 0.02)."""
    if steps < 1 or not 0 < beta_start <= beta_end < 1:
        raise ValueError(f"need steps >= 1 and 0 < beta_start <= beta_end < 1, got {steps}, {beta_start}, {beta_end}")
    betas = torch.linspace(beta_start, beta_end, steps, dtype=torch.float64)
    return DiffusionSchedule(betas=betas, alpha_bar=torch.cumprod(1 - betas, 0))


def q_sample(schedule: DiffusionSchedule, x0: Tensor, n: Tensor, noise: Tensor) -> Tensor:
    """``x_n = sqrt(alpha_bar_n) x0 + sqrt(1 - alpha_bar_n) noise`` (``n`` [B] integer steps)."""
    a, s = schedule.coefficients(n, x0)
    return a * x0 + s * noise


def cfg_x0(cond: X0Model, uncond: X0Model, w: float) -> X0Model:
    """Classifier-free guided x0 model ``(1 + w) cond - w uncond`` (w = 0: the conditional model alone)."""
    if w == 0:
        return cond
    return lambda x, n: (1 + w) * cond(x, n) - w * uncond(x, n)


def ddim_grid(steps: int, stride: int) -> list[int]:
    """The descending step indices DDIM visits: ``T-1``, then the multiples of ``stride`` below it, down to 0."""
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    below = [n for n in range(((steps - 2) // stride) * stride, -1, -stride)] if steps > 1 else []
    return [steps - 1] + [n for n in below if n < steps - 1]


def ddim_sample(
    model: X0Model, x_start: Tensor, schedule: DiffusionSchedule, stride: int, return_trajectory: bool = False
) -> SampleResult:
    """Deterministic DDIM from pure noise ``x_start`` (at step T-1) to x0 (see the module docstring)."""
    grid = ddim_grid(schedule.steps, stride)
    x, calls = x_start, 0
    states = [x_start] if return_trajectory else None
    for k, n in enumerate(grid):
        n_vec = torch.full((x.shape[0],), n, dtype=torch.long, device=x.device)
        x0_hat = model(x, n_vec)
        calls += 1
        a, s = schedule.coefficients(n_vec, x)
        if k + 1 < len(grid):
            eps = (x - a * x0_hat) / s
            a_prev, s_prev = schedule.coefficients(torch.full_like(n_vec, grid[k + 1]), x)
            x = a_prev * x0_hat + s_prev * eps
        else:
            x = x0_hat
        if states is not None:
            states.append(x)
    return SampleResult(x=x, nfe=calls, trajectory=torch.stack(states) if states is not None else None)
