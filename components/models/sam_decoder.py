"""SAM's mask decoder (Kirillov et al. 2023), reduced, as MTSAM uses it: one decoder per task whose output
channels come from the task's "no-mask" dense embeddings.

For a task with C output channels, an image embedding E [B, d, g, g] and the task's C no-mask embedding rows
e_c [d] (MTSAM's replacement of the prompt encoder), channel c of the prediction is one decoder pass over
E + e_c (broadcast over the grid):

    tokens = [iou token, mask token]                                   (no point or box prompts)
    hs, src = TwoWayTransformer(E + e_c, PE(g, g), tokens)             depth x [token self-attn,
                                                                        token->image attn, token MLP,
                                                                        image->token attn], final token->image
    up      = GELU(ConvT(GELU(LN2d(ConvT(src)))))                      [B, d/8, 4g, 4g]
    mask_c  = MLP(hs[mask token]) . up                                 hypernetwork dot product -> [B, 4g, 4g]

so the C channels are C passes batched as B * C rows. PE is SAM's random Fourier position encoding. The
reduction: one mask token instead of four (MTSAM keeps only the first mask, ``multimask_output=False``), no
IoU head (its output enters no loss), a small width, and a trainable ``neck`` (linear + LayerNorm) from the
encoder's token width to ``dim`` in place of SAM's frozen encoder neck; the decoder starts from random
weights (SAM's decoder weights are not available offline).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass(frozen=True)
class DecoderConfig:
    """Width and depth of one task decoder (SAM: dim 256, depth 2, 8 heads, MLP 2048)."""

    dim: int = 32
    depth: int = 1
    heads: int = 2
    mlp_dim: int = 64

    def __post_init__(self) -> None:
        if self.dim % 8 or self.dim % self.heads:
            raise ValueError(
                f"decoder dim must be a multiple of 8 and of heads, got dim={self.dim}, heads={self.heads}"
            )


class LayerNorm2d(nn.Module):
    """LayerNorm over the channels of [B, C, H, W]."""

    def __init__(self, channels: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight, self.bias, self.eps = nn.Parameter(torch.ones(channels)), nn.Parameter(torch.zeros(channels)), eps

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x.permute(0, 2, 3, 1), x.shape[1:2], self.weight, self.bias, self.eps).permute(0, 3, 1, 2)


class RandomPositionEncoding(nn.Module):
    """SAM's PositionEmbeddingRandom: [sin, cos](2 pi (2 xy - 1) M) with M ~ N(0, 1) [2, dim / 2] (a buffer)."""

    def __init__(self, dim: int, generator: torch.Generator) -> None:
        super().__init__()
        self.register_buffer("gaussian", torch.randn(2, dim // 2, generator=generator))

    def forward(self, grid: int) -> Tensor:
        """[dim, grid, grid] for a grid x grid image embedding (cell centres in [0, 1])."""
        centres = (torch.arange(grid, dtype=torch.float32, device=self.gaussian.device) + 0.5) / grid
        y, x = torch.meshgrid(centres, centres, indexing="ij")
        coords = 2 * math.pi * ((2 * torch.stack([x, y], dim=-1) - 1) @ self.gaussian)
        return torch.cat([coords.sin(), coords.cos()], dim=-1).permute(2, 0, 1)


class _Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.to_q, self.to_k, self.to_v, self.to_out = (nn.Linear(dim, dim) for _ in range(4))

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        def split(x: Tensor) -> Tensor:
            b, n, d = x.shape
            return x.view(b, n, self.heads, d // self.heads).transpose(1, 2)

        out = F.scaled_dot_product_attention(split(self.to_q(q)), split(self.to_k(k)), split(self.to_v(v)))
        return self.to_out(out.transpose(1, 2).flatten(2))


class _TwoWayBlock(nn.Module):
    def __init__(self, cfg: DecoderConfig, skip_first_pe: bool) -> None:
        super().__init__()
        d = cfg.dim
        self.self_attn, self.token_to_image, self.image_to_token = (_Attention(d, cfg.heads) for _ in range(3))
        self.mlp = nn.Sequential(nn.Linear(d, cfg.mlp_dim), nn.ReLU(), nn.Linear(cfg.mlp_dim, d))
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(4))
        self.skip_first_pe = skip_first_pe

    def forward(self, queries: Tensor, keys: Tensor, query_pe: Tensor, key_pe: Tensor) -> tuple[Tensor, Tensor]:
        if self.skip_first_pe:
            queries = self.self_attn(queries, queries, queries)
        else:
            q = queries + query_pe
            queries = queries + self.self_attn(q, q, queries)
        queries = self.norms[0](queries)
        queries = self.norms[1](queries + self.token_to_image(queries + query_pe, keys + key_pe, keys))
        queries = self.norms[2](queries + self.mlp(queries))
        keys = self.norms[3](keys + self.image_to_token(keys + key_pe, queries + query_pe, queries))
        return queries, keys


class MaskDecoder(nn.Module):
    """One task's decoder: encoder tokens [B, g*g, in_dim] + the task's no-mask rows [C, dim] -> [B, C, 4g, 4g]."""

    def __init__(self, in_dim: int, cfg: DecoderConfig, generator: torch.Generator) -> None:
        super().__init__()
        d = cfg.dim
        self.neck = nn.Sequential(nn.Linear(in_dim, d), nn.LayerNorm(d))
        self.pe = RandomPositionEncoding(d, generator)
        self.output_tokens = nn.Parameter(0.02 * torch.randn(2, d, generator=generator))  # iou token, mask token
        self.layers = nn.ModuleList(_TwoWayBlock(cfg, skip_first_pe=(i == 0)) for i in range(cfg.depth))
        self.final_attn, self.final_norm = _Attention(d, cfg.heads), nn.LayerNorm(d)
        self.upscale = nn.Sequential(
            nn.ConvTranspose2d(d, d // 4, 2, stride=2),
            LayerNorm2d(d // 4),
            nn.GELU(),
            nn.ConvTranspose2d(d // 4, d // 8, 2, stride=2),
            nn.GELU(),
        )
        self.hyper = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d // 8))

    def forward(self, tokens: Tensor, no_mask: Tensor) -> Tensor:
        b, n, _ = tokens.shape
        grid = math.isqrt(n)
        if grid * grid != n:
            raise ValueError(f"MaskDecoder expects a square grid of tokens, got {n}")
        channels, d = no_mask.shape
        image = self.neck(tokens)  # [B, g*g, d]
        keys = (image[:, None] + no_mask[None, :, None]).reshape(b * channels, n, d)  # one pass per channel
        key_pe = self.pe(grid).flatten(1).T[None].expand(b * channels, -1, -1)
        queries = self.output_tokens[None].expand(b * channels, -1, -1)
        query_pe = queries
        for layer in self.layers:
            queries, keys = layer(queries, keys, query_pe, key_pe)
        queries = self.final_norm(queries + self.final_attn(queries + query_pe, keys + key_pe, keys))
        up = self.upscale(keys.transpose(1, 2).reshape(b * channels, d, grid, grid))  # [B*C, d/8, 4g, 4g]
        weights = self.hyper(queries[:, 1])  # the mask token
        masks = torch.einsum("nc,nchw->nhw", weights, up)
        return masks.reshape(b, channels, 4 * grid, 4 * grid)
