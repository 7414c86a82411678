"""Flow-matching regression loss (Lipman et al. 2023; Liu et al. 2023).

    L(theta) = E_{t, (x0, x1)} || v_theta(x_t, t) - target(x0, x1, t) ||^2,

with ``x_t`` and ``target`` from :func:`components.generative.interpolate` (linear: ``x1 - x0``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from torch import Tensor

from components.generative.interpolants import interpolate

__all__ = ["VelocityModel", "flow_matching_loss"]

#: ``model(x_t [B, ...], t [B], **kwargs) -> velocity [B, ...]``.
VelocityModel = Callable[..., Tensor]


def flow_matching_loss(
    model: VelocityModel,
    x0: Tensor,
    x1: Tensor,
    t: Tensor,
    interpolant: str = "linear",
    model_kwargs: Mapping[str, Any] | None = None,
) -> Tensor:
    """Mean squared error between the model velocity and the interpolant's target velocity.

    Args:
        model: ``model(x_t, t, **model_kwargs) -> v`` with ``x_t [B, ...]``, ``t [B]``, ``v [B, ...]``.
        x0: ``[B, ...]`` source samples (already coupled with ``x1``).
        x1: ``[B, ...]`` data samples.
        t: ``[B]`` times in [0, 1].
        interpolant: key of :data:`components.generative.INTERPOLANTS`.
        model_kwargs: extra conditioning passed to the model (e.g. a partial cloud, a class label).

    Returns:
        Scalar: the mean over all elements of ``(v - target)^2``.
    """
    x_t, target = interpolate(x0, x1, t, interpolant)
    pred = model(x_t, t, **(model_kwargs or {}))
    if pred.shape != target.shape:
        raise ValueError(f"model returned shape {tuple(pred.shape)}, expected {tuple(target.shape)}")
    return (pred - target).pow(2).mean()


def pair_loss(model: VelocityModel, batch: tuple[Tensor, Tensor, Tensor]) -> Tensor:
    """:func:`flow_matching_loss` on a ``(x0, x1, t)`` batch: the loss function to hand to ``fit``."""
    x0, x1, t = batch
    return flow_matching_loss(model, x0, x1, t)
