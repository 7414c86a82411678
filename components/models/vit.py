"""A tiny pre-norm Vision Transformer for small grey-scale images (8x8 digits, 28x28 MNIST).

    x [B, C, H, W] -> patches [B, N, C p^2] (N = (H/p)(W/p)) -> patch_embed -> (+ CLS) + pos_embed
    -> n_layers x [h = h + Attn(LN(h)); h = h + MLP(LN(h))] -> LN -> pool (CLS or mean) -> features [B, d]
    -> head -> logits [B, n_classes]

Attention is written out with separate ``q_proj``/``k_proj``/``v_proj``/``out_proj`` linears (the names
peft's ``target_modules`` and the KnOTS code target); Attn(h) = out_proj(softmax(QK^T/sqrt(d_h)) V) per head.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from components.models.layers import init_transformer_weights, patchify

POOLS = ("cls", "mean")


@dataclass(frozen=True)
class TinyViTConfig:
    """Shape of the model. The defaults are test-sized (8x8 digits, 16 patches of 2x2, d = 32); a pipeline sets
    its own sizes."""

    image_size: int = 8
    patch_size: int = 2
    channels: int = 1
    d_model: int = 32
    n_heads: int = 2
    n_layers: int = 2
    mlp_ratio: int = 2
    n_classes: int = 10
    pool: str = "cls"  # "cls": the CLS token's output; "mean": mean over patch tokens

    def __post_init__(self) -> None:
        if self.image_size % self.patch_size:
            raise ValueError(f"image_size {self.image_size} is not a multiple of patch_size {self.patch_size}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if self.pool not in POOLS:
            raise ValueError(f"pool must be one of {POOLS}, got {self.pool!r}")

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2


class SelfAttention(nn.Module):
    """Multi-head self-attention with separate q/k/v/out projections. [B, T, d] -> [B, T, d]."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, h: Tensor, is_causal: bool = False) -> Tensor:
        """``is_causal``: position i attends to positions <= i only (a sequence model's mask)."""
        b, t, d = h.shape

        def heads(x: Tensor) -> Tensor:  # [B, T, d] -> [B, n_heads, T, d / n_heads]
            return x.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2)

        out = F.scaled_dot_product_attention(
            heads(self.q_proj(h)), heads(self.k_proj(h)), heads(self.v_proj(h)), is_causal=is_causal
        )
        return self.out_proj(out.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    """fc2(GELU(fc1(h))), hidden width mlp_ratio * d."""

    def __init__(self, d_model: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_model, hidden)
        self.fc2 = nn.Linear(hidden, d_model)

    def forward(self, h: Tensor) -> Tensor:
        return self.fc2(F.gelu(self.fc1(h)))


class Block(nn.Module):
    """Pre-norm transformer block: h + Attn(LN(h)), then h + MLP(LN(h))."""

    def __init__(self, cfg: TinyViTConfig) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.d_model)
        self.attn = SelfAttention(cfg.d_model, cfg.n_heads)
        self.norm2 = nn.LayerNorm(cfg.d_model)
        self.mlp = MLP(cfg.d_model, cfg.mlp_ratio * cfg.d_model)

    def forward(self, h: Tensor) -> Tensor:
        h = h + self.attn(self.norm1(h))
        return h + self.mlp(self.norm2(h))


class TinyViT(nn.Module):
    """Tiny ViT classifier: ``features(x)`` -> [B, d_model], ``forward(x)`` = ``head(features(x))`` ->
    [B, n_classes].

    x: [B, C, H, W], or [B, H, W] when channels == 1. Weights are initialised from ``seed`` alone
    (:func:`~components.models.layers.init_transformer_weights`: truncated normal std 0.02 for linears and
    embeddings, zero biases, unit LayerNorms), so two models
    built with the same config and seed are identical, whatever the global RNG state.
    """

    def __init__(self, cfg: TinyViTConfig, seed: int = 0) -> None:
        super().__init__()
        self.cfg = cfg
        n_tokens = cfg.n_patches + (1 if cfg.pool == "cls" else 0)
        self.patch_embed = nn.Linear(cfg.channels * cfg.patch_size**2, cfg.d_model)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.d_model)) if cfg.pool == "cls" else None
        self.pos_embed = nn.Parameter(torch.zeros(1, n_tokens, cfg.d_model))
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layers)])
        self.norm = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.n_classes)
        self._init_weights(torch.Generator().manual_seed(seed))

    def _init_weights(self, generator: torch.Generator) -> None:
        init_transformer_weights(self, generator)

    def patchify(self, x: Tensor) -> Tensor:
        """[B, C, H, W] (or [B, H, W]) -> [B, N, C p^2], patches in row-major order."""
        cfg = self.cfg
        if x.dim() == 3 and cfg.channels == 1:
            x = x.unsqueeze(1)
        expected = (cfg.channels, cfg.image_size, cfg.image_size)
        if x.dim() != 4 or tuple(x.shape[1:]) != expected:
            raise ValueError(
                f"TinyViT expects [B, {cfg.channels}, {cfg.image_size}, {cfg.image_size}] images, got {tuple(x.shape)}"
            )
        return patchify(x, cfg.patch_size)

    def features(self, x: Tensor) -> Tensor:
        """Pooled, normalised representation [B, d_model] (the input of ``head``)."""
        h = self.patch_embed(self.patchify(x))
        if self.cls_token is not None:
            h = torch.cat([self.cls_token.expand(h.shape[0], -1, -1), h], dim=1)
        h = h + self.pos_embed
        for block in self.blocks:
            h = block(h)
        h = self.norm(h)
        return h[:, 0] if self.cls_token is not None else h.mean(dim=1)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))
