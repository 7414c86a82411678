"""A tiny DiT (Peebles & Xie 2023) for pyramidal, autoregressive video flow matching.

One model serves every pyramid stage and every frame position (Pyramid Flow's unified model): the input
is a sequence of frames, the history (oldest first, each at its own resolution) followed by the frame
being generated::

    frame i [B, C, h_i, w_i] -> patches [B, N_i, C p^2] -> patch_embed + pos(h_i / p) + frame_embed[i]
    tokens = concat_i (...)                                        [B, L, d],  L = sum_i N_i
    c = MLP(sinusoidal(tau)) + stage_embed[stage] + label_embed[label]        [B, d]
    n_layers x adaLN-Zero block:  h += g1 * Attn(mod(LN(h), s1, b1), mask);  h += g2 * MLP(mod(LN(h), s2, b2))
    out = Linear(mod(LN(h_current), s, b)) -> unpatchify -> [B, C, h, w] velocity of the last frame

with ``mod(x, s, b) = x (1 + s) + b`` and ``(s, b, g)`` regressed from ``c`` (zero-initialised, so an untrained
model outputs 0). Positions: one learned 2-D embedding on the full-resolution patch grid, bilinearly
resized to a coarser frame's grid, so a coarse frame's tokens sit where the full frame's would. The
temporal mask is block-causal: a token of frame i attends to the tokens of frames <= i, so history
tokens never see the frame being generated (their states could be cached across steps).

:func:`forward_flops` counts the multiply-adds (x2) of one forward pass; training costs
``TRAIN_FLOP_FACTOR = 3`` forwards (backward ~ 2 forwards, the usual convention). Both, and the model's
shape :class:`DiTConfig`, live in :mod:`components.models.dit_config` (no torch; re-exported here).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from components.models.dit_config import TRAIN_FLOP_FACTOR, DiTConfig, forward_flops
from components.models.layers import init_transformer_weights, patchify, sinusoidal_time_embedding, unpatchify

__all__ = ["TRAIN_FLOP_FACTOR", "DiTConfig", "TinyDiT", "forward_flops"]


def _modulate(x: Tensor, shift: Tensor, scale: Tensor) -> Tensor:
    return x * (1 + scale[:, None]) + shift[:, None]


class DiTBlock(nn.Module):
    """Pre-norm transformer block with adaLN-Zero conditioning."""

    def __init__(self, d: int, n_heads: int, mlp_ratio: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.norm1 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.norm2 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.fc1 = nn.Linear(d, mlp_ratio * d)
        self.fc2 = nn.Linear(mlp_ratio * d, d)
        self.ada = nn.Linear(d, 6 * d)

    def forward(self, h: Tensor, c: Tensor, mask: Tensor | None) -> Tensor:
        b, n, d = h.shape
        s1, sc1, g1, s2, sc2, g2 = self.ada(F.silu(c)).chunk(6, dim=1)
        q, k, v = (
            self.qkv(_modulate(self.norm1(h), s1, sc1))
            .view(b, n, 3, self.n_heads, d // self.n_heads)
            .permute(2, 0, 3, 1, 4)
        )
        attn = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(b, n, d)
        h = h + g1[:, None] * self.proj(attn)
        return h + g2[:, None] * self.fc2(F.gelu(self.fc1(_modulate(self.norm2(h), s2, sc2))))


class TinyDiT(nn.Module):
    """``model(x, tau, *, history=(), stage=0, labels=None) -> velocity`` of the last frame.

    Args (forward):
        x: ``[B, C, h, w]`` the frame being generated, at any pyramid level (``h`` divisible by the patch).
        tau: ``[B]`` global time in [0, 1] (0 = noise, 1 = data).
        history: earlier frames ``[B, C, h_i, w_i]``, oldest first; frame i gets temporal embedding i.
        stage: pyramid stage (int or ``[B]``), embedded and added to the conditioning.
        labels: ``[B]`` class labels; ``None`` or the value ``n_classes`` means unconditional.

    Weights come from ``seed`` alone (:func:`~components.models.layers.init_transformer_weights`; adaLN
    and output layers zero).
    """

    def __init__(self, cfg: DiTConfig, seed: int = 0) -> None:
        super().__init__()
        self.cfg = cfg
        d, p = cfg.d_model, cfg.patch_size
        self.patch_embed = nn.Linear(cfg.channels * p * p, d)
        self.pos_embed = nn.Parameter(torch.zeros(1, d, cfg.grid, cfg.grid))
        self.frame_embed = nn.Parameter(torch.zeros(cfg.max_frames, d))
        self.time_mlp = nn.Sequential(nn.Linear(d, d), nn.SiLU(), nn.Linear(d, d))
        self.stage_embed = nn.Embedding(cfg.n_stages, d)
        self.label_embed = nn.Embedding(cfg.n_classes + 1, d) if cfg.n_classes else None
        self.blocks = nn.ModuleList([DiTBlock(d, cfg.n_heads, cfg.mlp_ratio) for _ in range(cfg.n_layers)])
        self.final_norm = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.final_ada = nn.Linear(d, 2 * d)
        self.out = nn.Linear(d, cfg.channels * p * p)
        self._init_weights(torch.Generator().manual_seed(seed))

    def _init_weights(self, generator: torch.Generator) -> None:
        init_transformer_weights(self, generator)
        with torch.no_grad():
            for layer in [*(blk.ada for blk in self.blocks), self.final_ada, self.out]:
                layer.weight.zero_()
                layer.bias.zero_()

    # ---- tokens ------------------------------------------------------------------------------------
    def patchify(self, x: Tensor) -> Tensor:
        """``[B, C, h, w]`` -> ``[B, (h/p)(w/p), C p^2]`` in row-major patch order."""
        p = self.cfg.patch_size
        _, c, h, w = x.shape
        if c != self.cfg.channels or h % p or w % p or h > self.cfg.frame_size or w > self.cfg.frame_size:
            raise ValueError(
                f"frame {tuple(x.shape)} does not fit channels={self.cfg.channels}, patch={p}, "
                f"frame_size={self.cfg.frame_size}"
            )
        return patchify(x, p)

    def unpatchify(self, tokens: Tensor, h: int, w: int) -> Tensor:
        return unpatchify(tokens, self.cfg.patch_size, self.cfg.channels, h, w)

    def positions(self, gh: int, gw: int) -> Tensor:
        """``[gh * gw, d]`` positional embedding of a ``gh x gw`` patch grid (resized from the full grid)."""
        pos = self.pos_embed
        if (gh, gw) != (self.cfg.grid, self.cfg.grid):
            pos = F.interpolate(pos, size=(gh, gw), mode="bilinear", align_corners=False, antialias=True)
        return pos.flatten(2).transpose(1, 2)[0]

    def conditioning(self, tau: Tensor, stage: int | Tensor, labels: Tensor | None) -> Tensor:
        b = tau.shape[0]
        c = self.time_mlp(sinusoidal_time_embedding(tau, self.cfg.d_model))
        if isinstance(stage, Tensor) and stage.ndim == 1:
            stage_ids = stage.long()
        else:
            stage_ids = torch.full((b,), int(stage), dtype=torch.long, device=tau.device)
        c = c + self.stage_embed(stage_ids)
        if self.label_embed is not None:
            if labels is None:
                labels = torch.full((b,), self.cfg.n_classes, dtype=torch.long, device=tau.device)
            c = c + self.label_embed(labels.long())
        return c

    def encode(
        self,
        x: Tensor,
        tau: Tensor,
        history: Sequence[Tensor] = (),
        stage: int | Tensor = 0,
        labels: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Hidden states ``[B, L, d]`` after the blocks, the frame id of each token ``[L]``, and ``c [B, d]``."""
        frames = [*history, x]
        if len(frames) > self.cfg.max_frames:
            raise ValueError(f"{len(frames)} frames exceed max_frames={self.cfg.max_frames}")
        parts, ids = [], []
        for i, frame in enumerate(frames):
            tok = self.patch_embed(self.patchify(frame))
            p = self.cfg.patch_size
            tok = tok + self.positions(frame.shape[-2] // p, frame.shape[-1] // p) + self.frame_embed[i]
            parts.append(tok)
            ids.append(torch.full((tok.shape[1],), i, dtype=torch.long, device=x.device))
        h = torch.cat(parts, dim=1)
        frame_ids = torch.cat(ids)
        mask = None
        if self.cfg.causal and len(frames) > 1:
            mask = frame_ids[None, :] <= frame_ids[:, None]  # [L_query, L_key]: key frame <= query frame
        c = self.conditioning(tau, stage, labels)
        for block in self.blocks:
            h = block(h, c, mask)
        return h, frame_ids, c

    def forward(
        self,
        x: Tensor,
        tau: Tensor,
        *,
        history: Sequence[Tensor] = (),
        stage: int | Tensor = 0,
        labels: Tensor | None = None,
    ) -> Tensor:
        h, frame_ids, c = self.encode(x, tau, history, stage, labels)
        current = h[:, frame_ids == len(history)]
        shift, scale = self.final_ada(F.silu(c)).chunk(2, dim=1)
        out = self.out(_modulate(self.final_norm(current), shift, scale))
        return self.unpatchify(out, x.shape[-2], x.shape[-1])
