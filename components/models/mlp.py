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
more inputs, so at the same width it would have more parameters). The configuration and that count live
in :mod:`components.models.mlp_config` (no torch; re-exported here).
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import Tensor, nn

from components.generative.time import sinusoidal_time_embedding
from components.models.mlp_config import MLPVelocityConfig, width_for_params

__all__ = ["MLPVelocity", "MLPVelocityConfig", "count_parameters", "width_for_params"]


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
            raise ValueError(
                f"expected x [B, {cfg.levels}, ...] and t [B, {cfg.levels}], got {tuple(x.shape)} and {tuple(t.shape)}"
            )
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
