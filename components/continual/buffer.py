"""The rehearsal buffer: reservoir sampling over the stream, storing inputs, labels, logits and task ids.

Reservoir sampling (Vitter's algorithm R, mammoth's ``Buffer`` with ``reservoir``) keeps a uniform sample
of everything the stream has shown so far in a fixed ``capacity``: the ``n``-th example (0-based count
``n`` of examples seen before it) goes to slot ``n`` while the buffer is not full, and otherwise to slot
``r`` with ``r`` uniform in ``0..n``, if ``r < capacity`` (else it is dropped). After ``N`` examples every
one of them is in the buffer with probability ``capacity / N``.

Stored per slot: the (non-augmented) input, the label, the logits the network gave the input when it was
seen (DER/DER++ replay them) and the task id. :meth:`ReservoirBuffer.sample` draws a minibatch without
replacement from the filled slots, from a generator the caller owns (the training loop's, so that draws
are reproducible).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

__all__ = ["BufferBatch", "ReservoirBuffer", "reservoir_slot"]


class BufferBatch(NamedTuple):
    """A minibatch drawn from the buffer: inputs [B, ...], labels [B], logits [B, K], task ids [B]."""

    x: Tensor
    y: Tensor
    logits: Tensor
    task: Tensor


def reservoir_slot(seen: int, capacity: int, u: float) -> int:
    """The slot of the example that arrives after ``seen`` others, or -1 when it is not kept; ``u`` is
    uniform in [0, 1) and gives ``r = floor(u * (seen + 1))``, uniform in ``0..seen``."""
    if seen < capacity:
        return seen
    r = int(u * (seen + 1))
    return r if r < capacity else -1


class ReservoirBuffer:
    """A fixed-capacity reservoir of (input, label, logits, task id), on the CPU.

    Args:
        capacity: number of slots (mammoth's ``buffer_size``).
        input_shape: shape of one input, e.g. ``(784,)`` or ``(28, 28)``.
        n_logits: width of the stored logits.
        seed: seed of the reservoir's own generator (which example replaces which slot).
    """

    def __init__(self, capacity: int, input_shape: tuple[int, ...], n_logits: int, seed: int = 0) -> None:
        if capacity < 1:
            raise ValueError(f"buffer capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.x = torch.zeros((capacity, *input_shape))
        self.y = torch.zeros(capacity, dtype=torch.long)
        self.logits = torch.zeros(capacity, n_logits)
        self.task = torch.zeros(capacity, dtype=torch.long)
        self.seen = 0
        self._generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return min(self.seen, self.capacity)

    def add(self, x: Tensor, y: Tensor, logits: Tensor | None = None, task: int | Tensor = 0) -> None:
        """Offer a batch to the reservoir, example by example in order (detached copies are stored; when two
        examples of one batch land in the same slot, the later one stays, as in sequential insertion)."""
        n = x.shape[0]
        draws = torch.rand(n, dtype=torch.float64, generator=self._generator).tolist()
        last: dict[int, int] = {}
        for i, u in enumerate(draws):
            slot = reservoir_slot(self.seen + i, self.capacity, u)
            if slot >= 0:
                last[slot] = i
        self.seen += n
        if not last:
            return
        slots, rows = torch.tensor(list(last)), torch.tensor(list(last.values()))
        self.x[slots] = x.detach()[rows].to(self.x.device, self.x.dtype)
        self.y[slots] = y.detach()[rows].to(self.y.device)
        self.logits[slots] = 0.0 if logits is None else logits.detach()[rows].to(self.logits.device, torch.float32)
        tasks = torch.as_tensor(task, dtype=torch.long).cpu()
        self.task[slots] = tasks if tasks.ndim == 0 else tasks[rows]

    def sample(self, size: int, generator: torch.Generator) -> BufferBatch:
        """``min(size, len(self))`` distinct filled slots, uniformly at random."""
        if len(self) == 0:
            raise ValueError("cannot sample from an empty buffer")
        index = torch.randperm(len(self), generator=generator)[:size]
        return BufferBatch(self.x[index], self.y[index], self.logits[index], self.task[index])
