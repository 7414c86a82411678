"""Rehearsal methods as plug-ins with one signature: ``loss(model, step, weights) -> StepLoss``.

Each method reads the stream minibatch of the step and ``draws`` independent minibatches of the reservoir
buffer (drawn before the step by the training driver; none while the buffer is empty), and returns its loss,
the stream logits (stored in the buffer beside the inputs: DER++ replays them) and metrics. The methods, in
mammoth's formulation (``models/er.py``, ``derpp.py``, ``er_ace.py``):

* **SGD** (fine-tuning, mammoth's ``sgd``): cross-entropy on the stream batch only, the no-replay lower bound;
* **ER** (experience replay): cross-entropy over the stream batch concatenated with one buffer draw
  (one mean over the joint batch, as mammoth concatenates the inputs);
* **DER++** (dark experience replay++): ``CE(stream) + alpha * MSE(f(x_1), z_1) + beta * CE(f(x_2), y_2)``
  with two independent draws: logits ``z_1`` stored when ``x_1`` was seen, labels ``y_2``;
* **ER-ACE** (asymmetric cross-entropy): on tasks after the first, the stream cross-entropy leaves out the
  logits of earlier tasks' classes that are absent from the batch (so new data does not push old classes
  down), plus the plain cross-entropy of one buffer draw. Mammoth keeps the classes from the largest label
  seen so far onwards unmasked; we keep every class of the current and later tasks unmasked, which differs
  only in batches that lack the current task's largest class.

:func:`components.continual.star.with_star` wraps any of them, adding STAR's perturbation term.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from components.continual.buffer import BufferBatch

__all__ = ["REHEARSAL", "Rehearsal", "ReplayWeights", "Step", "StepLoss", "derpp", "er", "er_ace", "sgd"]


@dataclass(frozen=True)
class Step:
    """One training step: the stream minibatch (inputs [B, ...], labels [B]) of task ``task``, whose classes
    start at ``first_class``, and this method's buffer draws (empty while the buffer is empty). ``side`` holds
    the draws of a wrapper's own term (STAR's): they come from a generator of their own, so that adding the
    wrapper leaves the base method's ``replays`` exactly those of the unwrapped run."""

    x: Tensor
    y: Tensor
    task: int
    first_class: int
    replays: tuple[BufferBatch, ...] = ()
    side: tuple[BufferBatch, ...] = ()


@dataclass(frozen=True)
class ReplayWeights:
    """DER++'s weights: ``alpha`` on the logit-matching MSE, ``beta`` on the replayed labels' CE."""

    alpha: float = 0.2
    beta: float = 1.0


@dataclass
class StepLoss:
    """A method's output: the scalar loss, the stream logits [B, K] (detached when stored), and metrics."""

    loss: Tensor
    stream_logits: Tensor
    metrics: dict[str, Tensor | float] = field(default_factory=dict)


LossFn = Callable[[nn.Module, Step, ReplayWeights], StepLoss]


@dataclass(frozen=True)
class Rehearsal:
    """A plug-in: its name, how many buffer draws a step reads (``draws`` for the base method, from the
    loop's generator; ``side_draws`` for a wrapper's term, from a generator of their own), and its loss."""

    name: str
    draws: int
    loss: LossFn
    side_draws: int = 0


def sgd(model: nn.Module, step: Step, weights: ReplayWeights) -> StepLoss:
    """Fine-tuning: CE on the stream batch, no replay."""
    logits = model(step.x)
    return StepLoss(F.cross_entropy(logits, step.y), logits)


def er(model: nn.Module, step: Step, weights: ReplayWeights) -> StepLoss:
    """Experience replay: CE over [stream batch; buffer draw] as one batch."""
    n = step.x.shape[0]
    if not step.replays:
        logits = model(step.x)
        return StepLoss(F.cross_entropy(logits, step.y), logits)
    replay = step.replays[0]
    logits = model(torch.cat([step.x, replay.x]))
    loss = F.cross_entropy(logits, torch.cat([step.y, replay.y]))
    return StepLoss(loss, logits[:n], {"replay_ce": F.cross_entropy(logits[n:].detach(), replay.y)})


def derpp(model: nn.Module, step: Step, weights: ReplayWeights) -> StepLoss:
    """DER++: CE(stream) + alpha MSE(logits of draw 1, their stored logits) + beta CE(draw 2)."""
    logits = model(step.x)
    loss = F.cross_entropy(logits, step.y)
    if not step.replays:
        return StepLoss(loss, logits)
    first, second = step.replays
    logit_mse = F.mse_loss(model(first.x), first.logits)
    replay_ce = F.cross_entropy(model(second.x), second.y)
    return StepLoss(
        loss + weights.alpha * logit_mse + weights.beta * replay_ce,
        logits,
        {"logit_mse": logit_mse.detach(), "replay_ce": replay_ce.detach()},
    )


def er_ace(model: nn.Module, step: Step, weights: ReplayWeights) -> StepLoss:
    """ER-ACE: asymmetric stream CE (earlier tasks' absent classes masked) + CE of one buffer draw."""
    logits = model(step.x)
    stream_logits = logits
    if step.task > 0:
        keep = torch.zeros(logits.shape[1], dtype=torch.bool, device=logits.device)
        keep[step.first_class :] = True
        keep[step.y] = True
        logits = logits.masked_fill(~keep, torch.finfo(logits.dtype).min)
    loss = F.cross_entropy(logits, step.y)
    if step.task == 0 or not step.replays:
        return StepLoss(loss, stream_logits)
    replay = step.replays[0]
    replay_ce = F.cross_entropy(model(replay.x), replay.y)
    return StepLoss(loss + replay_ce, stream_logits, {"replay_ce": replay_ce.detach()})


REHEARSAL: dict[str, Rehearsal] = {
    "sgd": Rehearsal("sgd", 0, sgd),
    "er": Rehearsal("er", 1, er),
    "derpp": Rehearsal("derpp", 2, derpp),
    "er_ace": Rehearsal("er_ace", 1, er_ace),
}
