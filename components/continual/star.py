"""STAR: stability-inducing weight perturbation, a term added to any rehearsal method's loss.

The objective is ``L_CL(theta) + lambda * max_delta KL(f(x; theta) || f(x; theta + delta))`` over
``||delta_l|| <= gamma ||theta_l||`` per layer ``l`` and buffer samples ``x``; the inner maximum is approximated
by normalised ascent steps, and the outer gradient is taken at ``theta + delta`` (as in SAM/AWP). One call, on a
buffer minibatch ``(x_b, y_b)``:

1. ``p0 = softmax(f(x_b; theta))``, no gradient; mask ``m_i = 1[argmax p0_i = y_i]`` (only samples the model
   still classifies correctly count). With fewer than 2 such samples the term is skipped.
2. Start point: ``theta + r``. ``init="official"``: ``r_l = 1e-20 ||theta_l|| z`` with ``z ~ N(0, I)``, the
   official code's noise, which is below float32 resolution (the KL has zero gradient at ``delta = 0``, so the
   ascent direction then comes from rounding residue). ``init="random"``: ``r_l`` a random direction of norm
   ``gamma ||theta_l||`` (the official code's commented-out alternative), so the first gradient is a real one.
3. ``K = steps`` ascent steps: ``g_l = grad_l of KL_m`` at the current point, rescaled to the norm of the
   *original* weight, ``g_l <- g_l ||theta_l|| / (||g_l|| + 1e-20)``, and ``delta_l += (gamma / K) g_l``.
   Only parameters whose name contains "weight" and that have more than one dimension are perturbed
   (biases and normalisation parameters are not). For ``K = 1``: ``||delta_l|| = gamma ||theta_l||``.
   ``delta`` is the ascent itself, without the start offset ``r``: the commented-out official variant keeps
   ``r`` in the difference of weights, which can leave the ball ``||delta_l|| <= gamma ||theta_l||``.
4. ``L_STAR = lambda * sum_i m_i KL(p0_i || softmax(f(x_i; theta + delta))) / sum_i m_i``, evaluated with
   ``theta + delta`` as the network's parameters through ``torch.func.functional_call`` (``delta``
   detached), so its gradient with respect to ``theta`` is the gradient at ``theta + delta`` and the module's
   weights are never edited: nothing has to be restored, and no ``backward``/optimiser-step ordering can
   leave them perturbed (the official code adds ``delta`` in place and subtracts it again, which is not
   bit-exact in floating point).
5. The base method's loss is computed at ``theta`` as usual; the optimiser steps on the sum.

Defaults are the official argparse ones (``--p-steps 1 --p-lam 0.01 --p-gamma 0.05``). In train mode the
extra forward passes update batch-norm running statistics, as in the official code (the MLP has none).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import Tensor, nn
from torch.func import functional_call
from torch.nn import functional as F

from components.continual.rehearsal import Rehearsal, ReplayWeights, Step, StepLoss

__all__ = [
    "EPS",
    "INITS",
    "StarConfig",
    "StarTerm",
    "masked_kl",
    "perturbed_names",
    "star_perturbation",
    "star_term",
    "with_star",
]

EPS = 1e-20
INITS = ("official", "random")


@dataclass(frozen=True)
class StarConfig:
    """STAR's settings, under mammoth's flag names ``--p-gamma``, ``--p-lam``, ``--p-steps``."""

    gamma: float = 0.05
    lam: float = 0.01
    steps: int = 1
    init: Literal["official", "random"] = "official"

    def __post_init__(self) -> None:
        if not (self.gamma > 0 and self.lam >= 0 and isinstance(self.steps, int) and self.steps >= 1):
            raise ValueError(f"STAR needs gamma > 0, lam >= 0 and steps >= 1, got {self}")
        if self.init not in INITS:
            raise ValueError(f"STAR init must be one of {INITS}, got {self.init!r}")


@dataclass
class StarTerm:
    """One STAR evaluation: the weighted loss (``None`` when skipped), the perturbation, the mask."""

    loss: Tensor | None
    delta: dict[str, Tensor] = field(default_factory=dict)
    mask: Tensor | None = None
    kl: float = 0.0


def perturbed_names(model: nn.Module) -> list[str]:
    """The parameters STAR perturbs: name contains "weight" and more than one dimension."""
    return [name for name, p in model.named_parameters() if p.dim() > 1 and "weight" in name]


def masked_kl(log_q: Tensor, p0: Tensor, mask: Tensor) -> Tensor:
    """``sum_i m_i KL(p0_i || q_i) / sum_i m_i`` from log-probabilities ``log_q`` [N, K] and ``p0`` [N, K]."""
    rows = F.kl_div(log_q, p0, reduction="none").sum(dim=1)
    return (rows * mask).sum() / mask.sum()


def _start_offset(weight: Tensor, cfg: StarConfig, generator: torch.Generator) -> Tensor:
    z = torch.randn(weight.shape, generator=generator).to(weight.device, weight.dtype)
    if cfg.init == "official":
        return z * weight.norm() * EPS
    return z / z.norm() * weight.norm() * cfg.gamma


def star_perturbation(
    model: nn.Module, x: Tensor, p0: Tensor, mask: Tensor, cfg: StarConfig, generator: torch.Generator
) -> dict[str, Tensor]:
    """``delta`` per perturbed parameter (steps 2-3 of the module docstring), detached."""
    params = {name: p.detach() for name, p in model.named_parameters()}
    names = perturbed_names(model)
    start = {name: params[name] + _start_offset(params[name], cfg, generator) for name in names}
    delta = {name: torch.zeros_like(params[name]) for name in names}
    for _ in range(cfg.steps):
        point = {**params, **{name: (start[name] + delta[name]).requires_grad_(True) for name in names}}
        kl = masked_kl(F.log_softmax(functional_call(model, point, (x,)), dim=1), p0, mask)
        grads = torch.autograd.grad(kl, [point[name] for name in names])
        for name, g in zip(names, grads):
            delta[name] = delta[name] + (cfg.gamma / cfg.steps) * g * (params[name].norm() / (g.norm() + EPS))
    return delta


def star_term(model: nn.Module, x: Tensor, y: Tensor, cfg: StarConfig, generator: torch.Generator) -> StarTerm:
    """STAR's loss on a buffer minibatch ``(x, y)`` (module docstring, steps 1-4); its gradient reaches the
    model's parameters when the caller backpropagates it."""
    with torch.no_grad():
        p0 = F.softmax(model(x), dim=1)
    mask = (p0.argmax(dim=1) == y).to(p0.dtype)
    if mask.sum() < 2:
        return StarTerm(None, mask=mask)
    delta = star_perturbation(model, x, p0, mask, cfg, generator)
    shifted = {name: p + delta[name] if name in delta else p for name, p in model.named_parameters()}
    kl = masked_kl(F.log_softmax(functional_call(model, shifted, (x,)), dim=1), p0, mask)
    return StarTerm(cfg.lam * kl, delta, mask, float(kl.detach()))


def with_star(base: Rehearsal, cfg: StarConfig, seed: int = 0) -> Rehearsal:
    """``base`` plus STAR: one more buffer draw per step, a side draw (``Step.side[0]``, read by STAR, drawn
    from a generator of its own so that the base method's draws are those of the run without STAR), the base
    method unchanged on its own draws, and ``lambda * KL`` added to its loss. ``seed`` seeds the start
    offsets. (The official code draws STAR's batch from the same sampler, just before the base method's.)"""
    generator = torch.Generator().manual_seed(seed)

    def loss(model: nn.Module, step: Step, weights: ReplayWeights) -> StepLoss:
        if not step.side:
            return base.loss(model, step, weights)
        first, *rest = step.side
        term = star_term(model, first.x, first.y, cfg, generator)
        out = base.loss(model, Step(step.x, step.y, step.task, step.first_class, step.replays, tuple(rest)), weights)
        metrics = {**out.metrics, "star_mask": float(term.mask.sum()), "star_applied": float(term.loss is not None)}
        if term.loss is None:
            return StepLoss(out.loss, out.stream_logits, metrics)
        return StepLoss(out.loss + term.loss, out.stream_logits, {**metrics, "star_kl": term.kl})

    return Rehearsal(f"{base.name}+star", base.draws, loss, base.side_draws + 1)
