"""A point-cloud transformer whose attention is topologically masked on each cloud's kNN graph.

    points [B, n, 3], neighbours [B, n, k] -> embed (a linear map of the coordinates; no position embedding: the
    points are the tokens) -> n_layers x [h = h + Attn(LN(h), graphs); h = h + MLP(LN(h))] -> LN -> mean over
    points -> head -> logits [B, n_classes]

The blocks are the tiny ViT's (:class:`components.models.vit.Block`) with their attention swapped for
:class:`~components.attention.vit.GraphSelfAttention`, copying the q/k/v/out projections, so every attention
variant built from the same seed starts from the same weights. The masked variants see the graphs
(``GraphBatch.from_neighbours``): the exact mask one dense block per cloud, the GRF mask walks on the batch's
disjoint union; the unmasked linear and softmax variants attend over all points of a cloud and ignore them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from components.attention.graphs import GraphBatch
from components.attention.vit import GraphSelfAttention, MaskedAttentionConfig
from components.models.layers import init_transformer_weights
from components.models.vit import Block, TinyViTConfig

__all__ = ["TopoPointConfig", "TopoPointNet"]


@dataclass(frozen=True)
class TopoPointConfig(MaskedAttentionConfig):
    in_dim: int = 3  # coordinates per point

    @property
    def masked(self) -> bool:
        return self.attention in ("exact_mask", "grf_mask")


class TopoPointNet(nn.Module):
    """``forward(points [B, n, 3], neighbours [B, n, k]) -> logits [B, n_classes]``; weights from ``seed`` alone."""

    def __init__(self, cfg: TopoPointConfig, seed: int = 0) -> None:
        super().__init__()
        self.cfg = cfg
        block_cfg = TinyViTConfig(
            d_model=cfg.d_model,
            n_heads=cfg.n_heads,
            n_layers=cfg.n_layers,
            mlp_ratio=cfg.mlp_ratio,
            n_classes=cfg.n_classes,
        )
        self.embed = nn.Linear(cfg.in_dim, cfg.d_model)
        self.blocks = nn.ModuleList([Block(block_cfg) for _ in range(cfg.n_layers)])
        self.norm = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.n_classes)
        init_transformer_weights(self, torch.Generator().manual_seed(seed))
        for i, block in enumerate(self.blocks):
            attn = GraphSelfAttention(cfg, None, seed=seed * 1000 + i)
            attn.load_state_dict(block.attn.state_dict(), strict=False)
            block.attn = attn

    def masks(self) -> list[Tensor]:
        """Each layer's modulation ``f`` (detached)."""
        return [block.attn.modulation().detach() for block in self.blocks]

    def forward(self, points: Tensor, neighbours: Tensor) -> Tensor:
        if points.dim() != 3 or points.shape[-1] != self.cfg.in_dim or neighbours.shape[:2] != points.shape[:2]:
            raise ValueError(
                f"TopoPointNet expects points [B, n, {self.cfg.in_dim}] and neighbours [B, n, k], got "
                f"{tuple(points.shape)} and {tuple(neighbours.shape)}"
            )
        graphs = GraphBatch.from_neighbours(neighbours.cpu()) if self.cfg.masked else None
        h = self.embed(points)
        for block in self.blocks:
            h = h + block.attn(block.norm1(h), graphs)
            h = h + block.mlp(block.norm2(h))
        return self.head(self.norm(h).mean(dim=1))
