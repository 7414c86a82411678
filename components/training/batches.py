"""The small pieces every training call repeats: random mini-batches and the classification loss."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn


def random_batches(*tensors: Tensor, size: int) -> Callable[[int, torch.Generator], tuple[Tensor, ...]]:
    """A ``batches(step, generator)`` for :func:`components.training.fit`: ``size`` rows drawn with
    replacement (the same indices from every tensor), ``min(size, N)`` when the data is smaller."""
    if not tensors:
        raise ValueError("random_batches needs at least one tensor")
    n = tensors[0].shape[0]
    if any(t.shape[0] != n for t in tensors):
        raise ValueError(f"random_batches: tensors disagree on the number of rows: {[t.shape[0] for t in tensors]}")
    if size < 1:
        raise ValueError(f"random_batches: size must be >= 1, got {size}")

    def draw(step: int, generator: torch.Generator) -> tuple[Tensor, ...]:
        idx = torch.randint(0, n, (min(size, n),), generator=generator)
        return tuple(t[idx] for t in tensors)

    return draw


def cross_entropy_loss(model: nn.Module, batch: tuple[Tensor, ...]) -> tuple[Tensor, dict[str, Tensor]]:
    """``(mean cross-entropy, {"acc": batch accuracy})`` of ``model(*inputs)`` logits against labels ``y``, the
    batch being ``(*inputs, y)`` (one input ``x`` for most models)."""
    *inputs, y = batch
    logits = model(*inputs)
    return nn.functional.cross_entropy(logits, y), {"acc": (logits.argmax(1) == y).float().mean()}
