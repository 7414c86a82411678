"""A time-conditioned MLP velocity network for flat (low-dimensional or flattened image) states.

One network serves plain flow matching and hierarchical (multi-level) flows. With ``levels = L`` it reads
L states and L times, e.g. HRF2's ``(x_t, t)`` and ``(v_tau, tau)``::

    x [B, *shape] (L = 1)  or  [B, L, *shape]           t [B] (L = 1)  or  [B, L]
    h_0 = [flatten(x_1), ..., flatten(x_L), emb(t_1), ..., emb(t_L)]      emb: sinusoidal, time_dim each
    h_k = GELU(W_k h_{k-1} + b_k),  k = 1..n_layers                        (width ``hidden``)
    out = W_out h_n + b_out  ->  [B, *shape]

so an ``L = 1`` instance is a :data:`components.generative.flow_matching.VelocityModel`
(``model(x_t, t) -> v``) usable with ``flow_matching_loss`` and ``sample``.

Comparisons between depths are made at a matched parameter count: :func:`width_for_params` solves
for the hidden width that brings a configuration closest to a target count (a deeper hierarchy reads
more inputs, so at the same width it would have more parameters).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from components.generative.time import sinusoidal_time_embedding

__all__ = ["MLPVelocity", "MLPVelocityConfig", "count_parameters", "width_for_params"]


@dataclass(frozen=True)
class MLPVelocityConfig:
    """Shape of :class:`MLPVelocity`.

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


class MLPVelocity(nn.Module):
    """``forward(x, t)``: see the module docstring for shapes. Seeded initialisation via ``seed``."""

    def __init__(self, cfg: MLPVelocityConfig, seed: int | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        if seed is not None:
            state = torch.random.get_rng_state()
            torch.manual_seed(seed)
        dims = [cfg.in_features] + [cfg.hidden] * cfg.n_layers
        layers: list[nn.Module] = []
        for a, b in itertools.pairwise(dims):
            layers += [nn.Linear(a, b), nn.GELU()]
        layers.append(nn.Linear(cfg.hidden, cfg.data_dim))
        self.net = nn.Sequential(*layers)
        if seed is not None:
            torch.random.set_rng_state(state)

    def forward(self, x: Tensor, t: Tensor) -> Tensor:
        cfg = self.cfg
        if cfg.levels == 1:
            if t.ndim != 1 or t.shape[0] != x.shape[0]:
                raise ValueError(f"t must be [B] with B={x.shape[0]}, got {tuple(t.shape)}")
            x, t = x.unsqueeze(1), t.unsqueeze(1)
        if t.shape != (x.shape[0], cfg.levels) or x.shape[1] != cfg.levels:
            raise ValueError(f"expected x [B, {cfg.levels}, ...] and t [B, {cfg.levels}], got "
                             f"{tuple(x.shape)} and {tuple(t.shape)}")
        shape = x.shape[2:]
        if math.prod(shape) != cfg.data_dim:
            raise ValueError(f"a state has {math.prod(shape)} features, config says data_dim={cfg.data_dim}")
        batch = x.shape[0]
        emb = sinusoidal_time_embedding(t.reshape(-1).to(x.dtype), cfg.time_dim).reshape(batch, -1)
        h = torch.cat([x.reshape(batch, -1), emb], dim=1)
        return self.net(h).reshape(batch, *shape)


def count_parameters(model: nn.Module) -> int:
    """Number of scalar parameters of ``model``."""
    return sum(p.numel() for p in model.parameters())


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
