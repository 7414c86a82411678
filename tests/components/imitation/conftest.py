"""Shared data of the trajectory-file tests."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest


def make_demos(n_traj: int = 4, length: int = 5) -> dict[str, np.ndarray]:
    """``n_traj`` trajectories of ``length`` steps: 3 observation floats, 2 actions in [-1, 1], styles 0 and 1
    alternating (the arrays :func:`components.imitation.trajectories.read_trajectories` returns)."""
    rng = np.random.default_rng(0)
    n = n_traj * length
    return {
        "obs": rng.normal(size=(n, 3)),
        "action": rng.uniform(-1, 1, (n, 2)),
        "style": np.repeat(np.arange(n_traj) % 2, length),
        "episode": np.repeat(np.arange(n_traj), length),
        "t": np.tile(np.arange(length), n_traj),
    }


@pytest.fixture
def demos() -> Callable[..., dict[str, np.ndarray]]:
    return make_demos
