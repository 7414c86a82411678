"""Layers the transformers share: patches, the seeded weight initialisation, the sinusoidal time embedding.

* :func:`patchify` / :func:`unpatchify`: ``[B, C, H, W] <-> [B, (H/p)(W/p), C p^2]``, patches in row-major
  order and, inside a patch, channel-major then row-major pixels (the layout of a strided conv's kernel);
* :func:`init_transformer_weights`: the ViT/DiT convention, drawn from one generator so that a model's
  weights depend on its seed alone: zero biases, unit 1-D weights (LayerNorm scales), and every other
  parameter truncated normal with std 0.02 cut at +-2 std, drawn in ``named_parameters`` order;
* :func:`sinusoidal_time_embedding`: ``[cos(1000 t w_k), sin(1000 t w_k)]`` of a scalar time per sample;
* :func:`fourier_features` / :class:`FourierInputEmbedding`: the Fourier features of *every* input number
  (coordinates and times alike, unscaled: frequencies from 1 down to ``1 / max_period``), then a linear
  map shared by the entries and one over all of them, the input layer of the low-dimensional HRF networks.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = [
    "FourierInputEmbedding",
    "fourier_features",
    "init_transformer_weights",
    "patchify",
    "sinusoidal_time_embedding",
    "unpatchify",
]


def patchify(x: Tensor, patch: int) -> Tensor:
    """``[B, C, H, W]`` -> ``[B, (H/p)(W/p), C p^2]`` (``H`` and ``W`` multiples of ``p``)."""
    b, c, h, w = x.shape
    if h % patch or w % patch:
        raise ValueError(f"image {(h, w)} is not a multiple of the patch size {patch}")
    patches = x.reshape(b, c, h // patch, patch, w // patch, patch).permute(0, 2, 4, 1, 3, 5)
    return patches.reshape(b, (h // patch) * (w // patch), c * patch * patch)


def unpatchify(tokens: Tensor, patch: int, channels: int, h: int, w: int) -> Tensor:
    """Inverse of :func:`patchify`: ``[B, (h/p)(w/p), C p^2]`` -> ``[B, C, h, w]``."""
    b = tokens.shape[0]
    grid = tokens.reshape(b, h // patch, w // patch, channels, patch, patch)
    return grid.permute(0, 3, 1, 4, 2, 5).reshape(b, channels, h, w)


def init_transformer_weights(module: nn.Module, generator: torch.Generator) -> None:
    """Initialise every parameter of ``module`` in place from ``generator`` (see the module docstring)."""
    with torch.no_grad():
        for name, param in module.named_parameters():
            if name.endswith("bias"):
                param.zero_()
            elif param.dim() == 1:
                param.fill_(1.0)
            else:
                nn.init.trunc_normal_(param, std=0.02, a=-0.04, b=0.04, generator=generator)


def sinusoidal_time_embedding(t: Tensor, dim: int, max_period: float = 10_000.0) -> Tensor:
    """Transformer-style sinusoidal embedding of a scalar time per sample.

    ``emb = [cos(s * t * w_k), sin(s * t * w_k)]_k`` with ``w_k = max_period^(-k / (dim/2))`` and
    ``s = 1000``: times live in [0, 1], so they are scaled to the range where the frequencies differ.

    Args:
        t: ``[B]`` times.
        dim: even embedding size.
        max_period: lowest frequency is ``1 / max_period``.

    Returns:
        ``[B, dim]`` in ``t``'s dtype (float32 for integer input).
    """
    if dim % 2:
        raise ValueError(f"dim must be even, got {dim}")
    if t.ndim != 1:
        raise ValueError(f"t must be [B], got {tuple(t.shape)}")
    t = t if t.is_floating_point() else t.float()
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, device=t.device, dtype=t.dtype) / half)
    args = 1000.0 * t[:, None] * freqs[None, :]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=1)


def fourier_features(x: Tensor, dim: int, max_period: float = 10_000.0) -> Tensor:
    """Sinusoidal features of every entry of ``x``, unscaled (the low-dimensional HRF networks' embedding).

    ``out[..., :dim/2] = sin(x w_k)``, ``out[..., dim/2:] = cos(x w_k)`` with ``w_k = max_period^(-k / (dim/2 - 1))``,
    ``k = 0..dim/2 - 1``: the top frequency is 1 and the lowest ``1 / max_period``, so for inputs of order one
    the features vary smoothly (unlike :func:`sinusoidal_time_embedding`, whose times are scaled by 1000).

    Args:
        x: any shape ``[...]``.
        dim: even number of features per entry, >= 4.
        max_period: inverse of the lowest frequency.

    Returns:
        ``[..., dim]`` in ``x``'s dtype (float32 for integer input).
    """
    if dim % 2 or dim < 4:
        raise ValueError(f"dim must be even and >= 4, got {dim}")
    x = x if x.is_floating_point() else x.float()
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, device=x.device, dtype=x.dtype) / (half - 1))
    args = x[..., None] * freqs
    return torch.cat([torch.sin(args), torch.cos(args)], dim=-1)


class FourierInputEmbedding(nn.Module):
    """Embed ``n_inputs`` numbers per sample: Fourier features of each, a linear map shared by the entries,
    GELU over the concatenation, then a linear map to ``out_dim``::

        x [B, n_inputs]  ->  fourier_features [B, n, dim]  ->  Linear(dim, dim)  ->  flatten [B, n dim]
                         ->  GELU  ->  Linear(n dim, out_dim)  ->  [B, out_dim]
    """

    def __init__(self, n_inputs: int, dim: int, out_dim: int, max_period: float = 10_000.0) -> None:
        super().__init__()
        if min(n_inputs, out_dim) < 1:
            raise ValueError(f"n_inputs and out_dim must be >= 1, got {n_inputs}, {out_dim}")
        fourier_features(torch.zeros(1), dim)  # validates dim
        self.n_inputs, self.dim, self.max_period = n_inputs, dim, max_period
        self.entry = nn.Linear(dim, dim)
        self.mix = nn.Linear(n_inputs * dim, out_dim)

    @staticmethod
    def n_parameters(n_inputs: int, dim: int, out_dim: int) -> int:
        """Parameter count of an instance (weights and biases), without building it."""
        return (dim + 1) * dim + (n_inputs * dim + 1) * out_dim

    def forward(self, x: Tensor) -> Tensor:
        flat = x.reshape(x.shape[0], -1)
        if flat.shape[1] != self.n_inputs:
            raise ValueError(f"expected {self.n_inputs} numbers per sample, got {tuple(x.shape)}")
        h = self.entry(fourier_features(flat, self.dim, self.max_period)).flatten(1)
        return self.mix(nn.functional.gelu(h))
