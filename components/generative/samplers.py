"""ODE samplers for a velocity field: integrate ``dx/dt = v(x, t)`` from t0 to t1 on a uniform grid.

Steps on the grid ``t_k = t0 + k * h``, ``h = (t1 - t0) / n_steps`` (h < 0 integrates backwards, e.g.
to invert data to noise):

    euler:  x_{k+1} = x_k + h * v(x_k, t_k)                                   (1 call per step)
    heun:   x~ = x_k + h * v(x_k, t_k)
            x_{k+1} = x_k + h/2 * (v(x_k, t_k) + v(x~, t_{k+1}))              (2 calls per step)

Heun here applies the corrector on every step, the last one included: flow-matching fields are
regular at t = 1, unlike diffusion at sigma = 0 where EDM skips it. So NFE = n_steps for Euler and
2 * n_steps for Heun; :class:`SampleResult.nfe` counts the model calls actually made.
Gradients flow through the rollout; wrap calls in ``torch.no_grad()`` for plain sampling.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["SampleResult", "SAMPLERS", "sample"]

# f(x [B, ...], t: float) -> v [B, ...]
_Field = Callable[[Tensor, float], Tensor]


@dataclass(frozen=True)
class SampleResult:
    """Output of :func:`sample`.

    Attributes:
        x: ``[B, ...]`` state at t1.
        nfe: number of model evaluations made.
        trajectory: ``[n_steps + 1, B, ...]`` states on the time grid (x0 first), or None.
    """

    x: Tensor
    nfe: int
    trajectory: Tensor | None


def _euler_step(field: _Field, x: Tensor, t: float, h: float) -> Tensor:
    return x + h * field(x, t)


def _heun_step(field: _Field, x: Tensor, t: float, h: float) -> Tensor:
    v0 = field(x, t)
    x_pred = x + h * v0
    v1 = field(x_pred, t + h)
    return x + 0.5 * h * (v0 + v1)


#: name -> one step ``(field, x, t, h) -> x_next``.
SAMPLERS: dict[str, Callable[[_Field, Tensor, float, float], Tensor]] = {"euler": _euler_step, "heun": _heun_step}


def sample(
    model: Callable[[Tensor, Tensor], Tensor],
    x0: Tensor,
    n_steps: int,
    method: str = "euler",
    t0: float = 0.0,
    t1: float = 1.0,
    return_trajectory: bool = False,
) -> SampleResult:
    """Integrate the velocity field from ``x0`` at ``t0`` to ``t1`` in ``n_steps`` uniform steps.

    Args:
        model: ``model(x [B, ...], t [B]) -> v [B, ...]``; ``t`` is filled with the current time in
            ``x``'s dtype and device. Extra conditioning: close over it (``lambda x, t: net(x, t, c)``).
        x0: ``[B, ...]`` initial state.
        n_steps: number of steps (>= 1).
        method: key of :data:`SAMPLERS` ("euler" or "heun").
        t0: start time.
        t1: end time.
        return_trajectory: keep the state at every grid time.

    Returns:
        :class:`SampleResult` ``(x, nfe, trajectory)``.
    """
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1, got {n_steps}")
    try:
        step = SAMPLERS[method]
    except KeyError:
        raise ValueError(f"unknown sampler {method!r}; expected one of {sorted(SAMPLERS)}") from None

    calls = 0

    def field(x: Tensor, t: float) -> Tensor:
        nonlocal calls
        calls += 1
        return model(x, torch.full((x.shape[0],), t, dtype=x.dtype, device=x.device))

    h = (t1 - t0) / n_steps
    x = x0
    states = [x0] if return_trajectory else None
    for k in range(n_steps):
        x = step(field, x, t0 + k * h, h)
        if states is not None:
            states.append(x)
    trajectory = torch.stack(states) if states is not None else None
    return SampleResult(x=x, nfe=calls, trajectory=trajectory)
