"""SASRec (Kang & McAuley 2018): a causal transformer over a user's recent items; the hidden state at the last
real item summarises the history.

``history`` is ``[B, L]`` item ids, right-padded with 0 (id 0 is padding; every row holds at least one item).
Tokens are ``item_emb(id) + pos_emb(position)``, then dropout, ``n_layers`` pre-norm blocks with *causal*
self-attention (position i sees positions <= i, so the right padding never reaches a real item), a final
LayerNorm; the output is the row at position ``(#items - 1)``.

:class:`SASRecNextItem` is the cross-entropy baseline: logits ``h . item_emb(j)`` over every item j >= 1 (the
embedding table is shared with the input, as in SASRec).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from components.models.layers import init_transformer_weights
from components.models.vit import MLP, SelfAttention

__all__ = ["SASRecConfig", "SASRecEncoder", "SASRecNextItem"]


@dataclass(frozen=True)
class SASRecConfig:
    """n_items: largest item id (ids 1..n_items, 0 = padding); item_init_std: std of the N(0, std^2) item table
    (PreferDiff's learnable ``iids``: 1.0); freeze_items: the item table is given (``item_table``, e.g. whitened
    text embeddings, :mod:`components.recsys.items`) and never trained."""

    n_items: int
    hidden: int = 64
    max_len: int = 10
    n_layers: int = 1
    n_heads: int = 2
    dropout: float = 0.1
    item_init_std: float = 1.0
    freeze_items: bool = False

    def __post_init__(self) -> None:
        if self.n_items < 1 or self.hidden < 2 or self.max_len < 1 or self.n_layers < 1:
            raise ValueError(f"SASRecConfig needs n_items, max_len, n_layers >= 1 and hidden >= 2, got {self}")
        if self.hidden % self.n_heads:
            raise ValueError(f"hidden {self.hidden} is not divisible by n_heads {self.n_heads}")
        if not 0 <= self.dropout < 1 or not self.item_init_std > 0:
            raise ValueError(f"SASRecConfig needs 0 <= dropout < 1 and item_init_std > 0, got {self}")


class _CausalBlock(nn.Module):
    def __init__(self, cfg: SASRecConfig) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.hidden)
        self.attn = SelfAttention(cfg.hidden, cfg.n_heads)
        self.norm2 = nn.LayerNorm(cfg.hidden)
        self.mlp = MLP(cfg.hidden, cfg.hidden)  # SASRec's point-wise feed-forward keeps the width
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, h: Tensor) -> Tensor:
        h = h + self.drop(self.attn(self.norm1(h), is_causal=True))
        return h + self.drop(self.mlp(self.norm2(h)))


class SASRecEncoder(nn.Module):
    """``history [B, L] -> h [B, hidden]`` (see the module docstring); weights from ``seed`` alone, the item table
    from ``item_table [n_items + 1, hidden]`` when given (frozen when ``cfg.freeze_items``)."""

    def __init__(self, cfg: SASRecConfig, seed: int = 0, item_table: Tensor | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.item_emb = nn.Embedding(cfg.n_items + 1, cfg.hidden)
        self.pos_emb = nn.Parameter(torch.zeros(cfg.max_len, cfg.hidden))
        self.blocks = nn.ModuleList([_CausalBlock(cfg) for _ in range(cfg.n_layers)])
        self.norm = nn.LayerNorm(cfg.hidden)
        self.drop = nn.Dropout(cfg.dropout)
        generator = torch.Generator().manual_seed(seed)
        init_transformer_weights(self, generator)
        with torch.no_grad():
            self.item_emb.weight.normal_(0.0, cfg.item_init_std, generator=generator)
            self.item_emb.weight[0].zero_()
            if item_table is not None:
                if tuple(item_table.shape) != tuple(self.item_emb.weight.shape):
                    raise ValueError(
                        f"item_table has shape {tuple(item_table.shape)}, expected {tuple(self.item_emb.weight.shape)}"
                    )
                self.item_emb.weight.copy_(item_table)
        if cfg.freeze_items:
            if item_table is None:
                raise ValueError("freeze_items needs the item_table to freeze")
            self.item_emb.weight.requires_grad_(False)

    @property
    def items(self) -> Tensor:
        """The item table ``[n_items + 1, hidden]`` (row 0 the padding)."""
        return self.item_emb.weight

    def forward(self, history: Tensor) -> Tensor:
        b, length = history.shape
        if length > self.cfg.max_len:
            raise ValueError(f"history length {length} exceeds max_len {self.cfg.max_len}")
        lengths = (history > 0).sum(1)
        if bool((lengths == 0).any()):
            raise ValueError("every history needs at least one item (id > 0)")
        h = self.drop(self.item_emb(history) + self.pos_emb[:length])
        for block in self.blocks:
            h = block(h)
        h = self.norm(h)
        return h[torch.arange(b, device=h.device), lengths - 1]


class SASRecNextItem(nn.Module):
    """SASRec trained with full softmax cross-entropy over the items (the baseline)."""

    def __init__(self, cfg: SASRecConfig, seed: int = 0, item_table: Tensor | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = SASRecEncoder(cfg, seed, item_table)

    def logits(self, history: Tensor) -> Tensor:
        """``[B, n_items]`` logits of items 1..n_items (column j is item j + 1)."""
        return self.encoder(history) @ self.encoder.items[1:].T

    def loss(self, history: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(self.logits(history), target - 1)

    @torch.no_grad()
    def scores(self, history: Tensor) -> Tensor:
        """``[B, n_items + 1]`` ranking scores, column 0 (padding) at -inf."""
        logits = self.logits(history)
        return torch.cat([torch.full_like(logits[:, :1], -torch.inf), logits], 1)
