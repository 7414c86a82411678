"""A CLIP-like baseline: two linear maps trained contrastively (InfoNCE) on the same pairs CSA sees.

    e_a = normalise(W_a a'),  e_b = normalise(W_b b'),   a' = (a - mu_A) / sd_A,  b' = (b - mu_B) / sd_B
    logits_ij = exp(t) * e_a_i . e_b_j
    loss = (CE(logits, diag) + CE(logits^T, diag)) / 2                  (symmetric InfoNCE, CLIP's loss)

W_a [k, d1], W_b [k, d2] and the log inverse temperature t (initial log(1/0.07), clamped to log 100) are
learned with the one training loop (:func:`components.training.fit`, AdamW) on batches of distinct pairs drawn
without replacement (duplicates in a batch would be false negatives). The similarity is e_a . e_b.

:func:`select_linear_pair` tunes the model fairly on the N training pairs alone: for every setting of a small
grid (learning rate, weight decay, embedding size) it trains on K - 1 folds of the pairs and scores the symmetric
InfoNCE of the held-out fold (all its pairs as one batch) after each of the ``checkpoints`` steps (so the number
of steps is chosen too: early stopping); the setting and step count with the lowest mean held-out loss win, and
:func:`train_linear_pair` then trains them on all N pairs. No test item is seen.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
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
    return _train(ta, tb, embed_dim, steps, lr, batch_size, weight_decay, seed, device)


def _train(
    ta: Tensor,
    tb: Tensor,
    embed_dim: int,
    steps: int,
    lr: float,
    batch_size: int,
    weight_decay: float,
    seed: int,
    device: str,
    watch: Callable[[LinearPair, int], None] | None = None,
    log_every: int | None = None,
) -> LinearPair:
    """Train a fresh :class:`LinearPair`; ``watch(model, step)`` runs every ``log_every`` steps and at the last."""
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
        log_every=log_every or max(1, steps),
        desc="contrastive",
    )
    callback = None if watch is None else (lambda step, _metrics: watch(model, step))
    fit(model, info_nce_loss, distinct_batches(ta, tb, batch_size), cfg, callback=callback)
    return model.eval()


@dataclass(frozen=True)
class PairSetting:
    """One setting of the contrastive model: AdamW learning rate and weight decay, embedding size, steps."""

    lr: float
    weight_decay: float
    embed_dim: int
    steps: int


def heldout_info_nce(model: LinearPair, a: Tensor, b: Tensor) -> float:
    """The symmetric InfoNCE of the pairs (a[i], b[i]) taken as one batch, without gradients."""
    with torch.no_grad():
        return float(info_nce_loss(model, (a, b))[0])


def select_linear_pair(
    a: np.ndarray,
    b: np.ndarray,
    grid: Sequence[tuple[float, float, int]],
    checkpoints: Sequence[int],
    *,
    folds: int = 3,
    batch_size: int = 256,
    seed: int = 0,
) -> tuple[PairSetting, dict[PairSetting, float]]:
    """The (lr, weight decay, embed_dim) of ``grid`` and the step count of ``checkpoints`` with the lowest mean
    held-out InfoNCE over ``folds`` folds of the pairs (module docstring), and every candidate's mean loss. Ties
    go to the earlier candidate (grid order, then fewer steps)."""
    ta, tb = torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32)
    n, steps = len(ta), sorted(set(int(c) for c in checkpoints))
    if not grid or not steps or steps[0] < 1:
        raise ValueError(f"select_linear_pair needs a grid and step counts >= 1, got {list(grid)}, {steps}")
    if not 2 <= folds <= n // 2:
        raise ValueError(f"select_linear_pair: {folds} folds of {n} pairs (need 2 <= folds <= N / 2)")
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    parts = [order[k::folds] for k in range(folds)]
    losses: dict[PairSetting, list[float]] = {}
    for lr, weight_decay, embed_dim in grid:
        for k, held in enumerate(parts):
            train = torch.cat([part for j, part in enumerate(parts) if j != k])
            seen: dict[int, float] = {}

            def score(model: LinearPair, step: int, held: Tensor = held, seen: dict[int, float] = seen) -> None:
                if step in steps:
                    seen[step] = heldout_info_nce(model, ta[held], tb[held])

            gap = math.gcd(*steps)
            _train(
                ta[train], tb[train], embed_dim, steps[-1], lr, batch_size, weight_decay, seed + k, "cpu", score, gap
            )
            for step in steps:
                losses.setdefault(PairSetting(lr, weight_decay, embed_dim, step), []).append(seen[step])
    means = {setting: float(np.mean(values)) for setting, values in losses.items()}
    best = min(means, key=lambda s: means[s])  # the first of equal minima, in insertion order
    return best, means
