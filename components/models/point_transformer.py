"""Permutation-equivariant transformer velocity field for point clouds (NSOT CPU backbone).

    h_i   = W_in x_i + MLP(emb(t))          (no positional encoding: points are a set)
    h     = TransformerEncoder(h)           (self-attention over the N points of each cloud)
    v_i   = W_out LayerNorm(h_i)

Every operation is either per point or symmetric attention, so permuting the input points permutes
the output velocities the same way: ``f(x[:, pi], t) = f(x, t)[:, pi]``.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from components.generative.time import sinusoidal_time_embedding

__all__ = ["PointTransformerConfig", "PointTransformer"]


@dataclass(frozen=True)
class PointTransformerConfig:
    """Size of :class:`PointTransformer`.

    Attributes:
        d_model: token width (NSOT CPU reduction: 64).
        n_layers: encoder blocks (2).
        n_heads: attention heads; must divide ``d_model``.
        point_dim: coordinates per point (3).
        ff_mult: feed-forward width = ``ff_mult * d_model``.
    """

    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    point_dim: int = 3
    ff_mult: int = 4


class PointTransformer(nn.Module):
    """Velocity field ``v_theta(x, t)`` for point clouds.

    Args:
        config: :class:`PointTransformerConfig`.

    Forward:
        x: ``[B, N, point_dim]`` points at time t.
        t: ``[B]`` times in [0, 1].
        returns ``[B, N, point_dim]`` velocities.
    """

    def __init__(self, config: PointTransformerConfig) -> None:
        super().__init__()
        if config.d_model % config.n_heads:
            raise ValueError(f"n_heads={config.n_heads} must divide d_model={config.d_model}")
        if config.d_model % 2:
            raise ValueError(f"d_model must be even for the sinusoidal embedding, got {config.d_model}")
        self.config = config
        d = config.d_model
        self.point_in = nn.Linear(config.point_dim, d)
        self.time_mlp = nn.Sequential(nn.Linear(d, d), nn.SiLU(), nn.Linear(d, d))
        layer = nn.TransformerEncoderLayer(
            d_model=d,
            nhead=config.n_heads,
            dim_feedforward=config.ff_mult * d,
            dropout=0.0,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers=config.n_layers, enable_nested_tensor=False)
        self.norm_out = nn.LayerNorm(d)
        self.point_out = nn.Linear(d, config.point_dim)

    def forward(self, x: Tensor, t: Tensor) -> Tensor:
        if x.ndim != 3 or x.shape[-1] != self.config.point_dim:
            raise ValueError(f"x must be [B, N, {self.config.point_dim}], got {tuple(x.shape)}")
        if t.shape != (x.shape[0],):
            raise ValueError(f"t must be [B] with B={x.shape[0]}, got {tuple(t.shape)}")
        time_token = self.time_mlp(sinusoidal_time_embedding(t.to(x.dtype), self.config.d_model))
        h = self.point_in(x) + time_token[:, None, :]
        h = self.encoder(h)
        return self.point_out(self.norm_out(h))
