"""Time-conditioned MLP velocity field for low-dimensional flows (OC-Flow's 2-D and SO(3) toys).

    h = [flatten(x), emb(t)]                      emb: sinusoidal time embedding
    h = SiLU(W_i h + b_i)      i = 1..depth
    v = W_out h                                   [B, out_dim]

For SO(3) the input is the flattened rotation matrix (9 numbers) and the output a body-frame
rotation vector (3 numbers); for a Euclidean flow ``out_dim = in_dim`` and the output has x's shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from components.generative.time import sinusoidal_time_embedding

__all__ = ["VelocityMLP", "VelocityMLPConfig"]


@dataclass(frozen=True)
class VelocityMLPConfig:
    """Size of :class:`VelocityMLP`.

    Attributes:
        in_dim: numbers per state after flattening (2 for the plane, 9 for a rotation matrix).
        out_dim: velocity size; ``None``: ``in_dim`` (and the output takes the input's shape).
        hidden: width of each hidden layer (OC-Flow CPU reduction: 128).
        depth: hidden layers (3).
        time_dim: size of the sinusoidal time embedding (even).
    """

    in_dim: int = 2
    out_dim: int | None = None
    hidden: int = 128
    depth: int = 3
    time_dim: int = 32

    def __post_init__(self) -> None:
        if min(self.in_dim, self.hidden, self.depth) < 1 or (self.out_dim is not None and self.out_dim < 1):
            raise ValueError(f"VelocityMLPConfig sizes must be >= 1, got {self}")
        if self.time_dim < 2 or self.time_dim % 2:
            raise ValueError(f"VelocityMLPConfig.time_dim must be even and >= 2, got {self.time_dim}")


class VelocityMLP(nn.Module):
    """``v = MLP([flatten(x), emb(t)])``; ``forward(x [B, ...], t [B]) -> [B, out_dim]`` (or x's shape)."""

    def __init__(self, cfg: VelocityMLPConfig) -> None:
        super().__init__()
        self.cfg = cfg
        layers: list[nn.Module] = []
        width = cfg.in_dim + cfg.time_dim
        for _ in range(cfg.depth):
            layers += [nn.Linear(width, cfg.hidden), nn.SiLU()]
            width = cfg.hidden
        layers.append(nn.Linear(width, cfg.out_dim or cfg.in_dim))
        self.net = nn.Sequential(*layers)

    def forward(self, x: Tensor, t: Tensor) -> Tensor:
        flat = x.flatten(1)
        if flat.shape[1] != self.cfg.in_dim:
            raise ValueError(f"VelocityMLP expects {self.cfg.in_dim} numbers per sample, got {tuple(x.shape)}")
        emb = sinusoidal_time_embedding(t.to(flat.dtype), self.cfg.time_dim)
        v = self.net(torch.cat([flat, emb], dim=1))
        return v.view_as(x) if self.cfg.out_dim is None else v
