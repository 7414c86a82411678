"""Seeds and torch thread counts: the two process-wide settings every stage fixes before it computes.

A leaf module (numpy and torch only), so that what seeds a stage does not make the stage depend on the
training loop.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run a block with ``n`` torch intra-op threads, restoring the previous count afterwards.

    Small models on small batches gain nothing from intra-op threads and, on a busy 2-core machine,
    can stall on them (a 3,000-step MLP run measured 7 s with one thread, 153 s with two).
    ``None`` leaves the setting alone.
    """
    if n is None:
        yield
        return
    if not _is_int(n) or n < 1:
        raise ValueError(f"thread count must be an int >= 1, got {n!r}")
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def seed_everything(seed: int) -> torch.Generator:
    """Seed python's ``random``, numpy's global RNG and torch (CPU and all CUDA devices).

    Args:
        seed: integer in ``[0, 2**32)`` (numpy's limit).

    Returns:
        A new CPU ``torch.Generator`` seeded with ``seed``, for drawing data explicitly.
    """
    if not _is_int(seed) or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be an int in [0, 2**32), got {seed!r}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)
