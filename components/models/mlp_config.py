"""The shape of :class:`components.models.mlp.MLPVelocity` and its exact parameter count, without torch.

:func:`width_for_params` solves for the hidden width that brings a configuration closest to a target
count, so that hierarchies of different depths are compared at a matched parameter count (a deeper one
reads more inputs, so at the same width it would have more parameters). Parameter models build these
configurations while validating; the network itself lives in :mod:`components.models.mlp`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

__all__ = ["MLPVelocityConfig", "width_for_params"]


@dataclass(frozen=True)
class MLPVelocityConfig:
    """Shape of :class:`components.models.mlp.MLPVelocity`.

    Attributes:
        data_dim: number of features of one state (e.g. 1, 2, or 784 for a flattened 28x28 image).
        levels: number of (state, time) pairs read: 1 for plain flow matching, D for depth-D HRF.
        hidden: width of every hidden layer.
        n_layers: number of hidden layers (>= 1).
        time_dim: size of each sinusoidal time embedding (even).
    """

    data_dim: int
    levels: int = 1
    hidden: int = 128
    n_layers: int = 2
    time_dim: int = 32

    def __post_init__(self) -> None:
        for name, low in (("data_dim", 1), ("levels", 1), ("hidden", 1), ("n_layers", 1), ("time_dim", 2)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < low:
                raise ValueError(f"MLPVelocityConfig.{name} must be an int >= {low}, got {value!r}")
        if self.time_dim % 2:
            raise ValueError(f"MLPVelocityConfig.time_dim must be even, got {self.time_dim}")

    @property
    def in_features(self) -> int:
        return self.levels * (self.data_dim + self.time_dim)

    @property
    def n_parameters(self) -> int:
        """Exact parameter count of the network this config builds (weights and biases)."""
        h, n = self.hidden, self.n_layers
        return (self.in_features + 1) * h + (n - 1) * (h + 1) * h + (h + 1) * self.data_dim


def width_for_params(cfg: MLPVelocityConfig, target: int) -> MLPVelocityConfig:
    """``cfg`` with the hidden width whose parameter count is closest to ``target`` (ties: narrower).

    The count is increasing in the width, so the solution of the quadratic
    ``(n-1) h^2 + (in + n + d) h + d = target`` is rounded to the better of its two integer neighbours.
    """
    if target < 1:
        raise ValueError(f"target parameter count must be >= 1, got {target}")
    n, d, inp = cfg.n_layers, cfg.data_dim, cfg.in_features
    a, b, c = n - 1, inp + n + d, d - target
    root = -c / b if a == 0 else (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)
    candidates = {max(1, math.floor(root)), max(1, math.ceil(root))}
    best = min(candidates, key=lambda h: (abs(replace(cfg, hidden=h).n_parameters - target), h))
    return replace(cfg, hidden=best)
