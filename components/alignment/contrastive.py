"""A CLIP-like baseline: two linear maps trained contrastively (InfoNCE) on the same pairs CSA sees.

    e_a = normalise(W_a a'),  e_b = normalise(W_b b'),   a' = (a - mu_A) / sd_A,  b' = (b - mu_B) / sd_B
    logits_ij = exp(t) * e_a_i . e_b_j
    loss = (CE(logits, diag) + CE(logits^T, diag)) / 2                  (symmetric InfoNCE, CLIP's loss)

W_a [k, d1], W_b [k, d2] and the log inverse temperature t (initial log(1/0.07), clamped to log 100) are
learned with the one training loop (:func:`components.training.fit`, AdamW) on batches of distinct pairs drawn
without replacement (duplicates in a batch would be false negatives). The similarity is e_a . e_b.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from components.training import TrainConfig, fit

LOG_MAX_SCALE = math.log(100.0)


@dataclass(frozen=True)
class LinearPairConfig:
    """Input sizes of the two views and the shared embedding size."""

    dim_a: int
    dim_b: int
    embed_dim: int = 16


class LinearPair(nn.Module):
    """Two bias-free linear maps into a shared space, the feature standardisation and a learned temperature."""

    def __init__(self, cfg: LinearPairConfig, seed: int = 0) -> None:
        super().__init__()
        self.cfg = cfg
        gen = torch.Generator().manual_seed(seed)
        self.w_a = nn.Parameter(torch.randn(cfg.embed_dim, cfg.dim_a, generator=gen) / math.sqrt(cfg.dim_a))
        self.w_b = nn.Parameter(torch.randn(cfg.embed_dim, cfg.dim_b, generator=gen) / math.sqrt(cfg.dim_b))
        self.log_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))
        for name, dim in (("mean_a", cfg.dim_a), ("sd_a", cfg.dim_a), ("mean_b", cfg.dim_b), ("sd_b", cfg.dim_b)):
            self.register_buffer(name, torch.zeros(dim) if name.startswith("mean") else torch.ones(dim))

    def embed_a(self, a: Tensor) -> Tensor:
        return nn.functional.normalize(((a - self.mean_a) / self.sd_a) @ self.w_a.T, dim=-1)

    def embed_b(self, b: Tensor) -> Tensor:
        return nn.functional.normalize(((b - self.mean_b) / self.sd_b) @ self.w_b.T, dim=-1)

    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        """Logits [n_a, n_b] = exp(t) e_a e_b^T."""
        return self.log_scale.clamp(max=LOG_MAX_SCALE).exp() * self.embed_a(a) @ self.embed_b(b).T


def info_nce_loss(model: LinearPair, batch: tuple[Tensor, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
    """Symmetric InfoNCE over a batch of aligned pairs, with the in-batch retrieval accuracy."""
    a, b = batch
    logits = model(a, b)
    target = torch.arange(len(a), device=logits.device)
    loss = (nn.functional.cross_entropy(logits, target) + nn.functional.cross_entropy(logits.T, target)) / 2
    return loss, {"acc": (logits.argmax(1) == target).float().mean()}


def distinct_batches(a: Tensor, b: Tensor, size: int):
    """``batches(step, generator)`` for `fit`: ``min(size, N)`` distinct aligned pairs per step."""
    n = len(a)

    def draw(step: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        idx = torch.randperm(n, generator=generator)[: min(size, n)]
        return a[idx], b[idx]

    return draw


def train_linear_pair(
    a: np.ndarray,
    b: np.ndarray,
    *,
    embed_dim: int = 16,
    steps: int = 300,
    lr: float = 1e-2,
    batch_size: int = 256,
    weight_decay: float = 0.0,
    seed: int = 0,
    device: str = "cpu",
) -> LinearPair:
    """Train a :class:`LinearPair` on pairs (a[i], b[i]) -> the trained model (CPU, eval mode)."""
    ta, tb = torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32)
    if ta.ndim != 2 or tb.ndim != 2 or len(ta) != len(tb) or len(ta) < 2:
        raise ValueError(f"need row-aligned [N, d1], [N, d2] with N >= 2, got {tuple(ta.shape)}, {tuple(tb.shape)}")
    model = LinearPair(LinearPairConfig(ta.shape[1], tb.shape[1], embed_dim), seed=seed)
    with torch.no_grad():
        model.mean_a.copy_(ta.mean(0)), model.sd_a.copy_(ta.std(0).clamp(min=1e-6))
        model.mean_b.copy_(tb.mean(0)), model.sd_b.copy_(tb.std(0).clamp(min=1e-6))
    cfg = TrainConfig(
        steps=steps,
        lr=lr,
        weight_decay=weight_decay,
        seed=seed,
        device=device,
        progress=False,
        log_every=max(1, steps),
        desc="contrastive",
    )
    fit(model, info_nce_loss, distinct_batches(ta, tb, batch_size), cfg)
    return model.eval()
