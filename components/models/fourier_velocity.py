"""The velocity network of the official low-dimensional HRF code (``lowdim/utils.py: VNetD``), with a free
hidden width so that depths can be compared at one parameter count.

It reads D (state, time) pairs, e.g. HRF2's ``(x_t, t)`` and ``(v_tau, tau)``::

    t [B, D]        -> FourierInputEmbedding(D, emb_dim, D emb_dim)              (times, unscaled)
    x [B, D, ...]   -> FourierInputEmbedding(D data_dim, emb_dim, D emb_dim)     ("fourier": every coordinate)
                       or flatten                                                ("raw": images)
    h = GELU(Linear(concat -> 2 hidden));  h = GELU(Linear(h -> hidden)) ...;  out = Linear(h -> data_dim)

Fourier features of the coordinates (frequencies <= 1) let a small MLP fit the steep fields of a narrow
mixture. With ``levels = 1`` the network is a plain velocity model ``model(x [B, ...], t [B]) -> v``
(:data:`components.generative.flow_matching.VelocityModel`); with ``levels = D`` it is the
:data:`components.generative.hierarchical.HierarchicalModel` ``u(s [B, D, ...], t [B, D])``. The shape and its
parameter count are in :mod:`components.models.fourier_velocity_config` (no torch).
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import Tensor, nn

from components.models.fourier_velocity_config import FourierVelocityConfig, match_width
from components.models.layers import FourierInputEmbedding

__all__ = ["FourierVelocityConfig", "FourierVelocityNet", "match_width"]


class FourierVelocityNet(nn.Module):
    """``forward(x, t)``, shapes in the module docstring; ``seed`` fixes the initial weights."""

    def __init__(self, cfg: FourierVelocityConfig, seed: int | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        state = torch.random.get_rng_state()
        if seed is not None:
            torch.manual_seed(seed)
        d, e = cfg.levels, cfg.emb_dim
        self.time_embedding = FourierInputEmbedding(d, e, d * e)
        self.data_embedding = (
            FourierInputEmbedding(d * cfg.data_dim, e, d * e) if cfg.data_features == "fourier" else None
        )
        layers: list[nn.Module] = []
        for a, b in itertools.pairwise(cfg.widths[:-1]):
            layers += [nn.Linear(a, b), nn.GELU()]
        layers.append(nn.Linear(cfg.widths[-2], cfg.data_dim))
        self.net = nn.Sequential(*layers)
        if seed is not None:
            torch.random.set_rng_state(state)

    def forward(self, x: Tensor, t: Tensor) -> Tensor:
        cfg = self.cfg
        if cfg.levels == 1:
            if t.ndim != 1 or t.shape[0] != x.shape[0]:
                raise ValueError(f"t must be [B] with B={x.shape[0]}, got {tuple(t.shape)}")
            x, t = x.unsqueeze(1), t.unsqueeze(1)
        if t.shape != (x.shape[0], cfg.levels) or x.ndim < 3 or x.shape[1] != cfg.levels:
            raise ValueError(
                f"expected x [B, {cfg.levels}, ...] and t [B, {cfg.levels}], got {tuple(x.shape)} and {tuple(t.shape)}"
            )
        shape = x.shape[2:]
        if math.prod(shape) != cfg.data_dim:
            raise ValueError(f"a state has {math.prod(shape)} numbers, config says data_dim={cfg.data_dim}")
        flat = x.reshape(x.shape[0], -1)
        data = self.data_embedding(flat) if self.data_embedding is not None else flat
        h = torch.cat([data, self.time_embedding(t.to(flat.dtype))], dim=1)
        return self.net(h).reshape(x.shape[0], *shape)
