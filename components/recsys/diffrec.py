"""A diffusion recommender over item embeddings (DreamRec / PreferDiff): the next item's embedding is generated
from noise, conditioned on the SASRec summary of the history, and every item is scored against it.

Training pair, for a history with summary ``h`` (replaced by a learned "none" vector with probability
``p_uncond``, for classifier-free guidance) and the target item's embedding ``e+``:

    n ~ U{0..T-1},   x_n+ = sqrt(ab_n) e+ + sqrt(1 - ab_n) eps+,   x0_hat+ = f(x_n+, h, n)
    f(x, h, n) = Linear_{3D -> D}( [x, h, MLP(sinusoid(n / T))] )                (a single linear denoiser)

and, for PreferDiff, the negative ``e-`` = the centroid of the other targets of the batch
(:func:`in_batch_centroids`), noised at the same step ``n`` with its own noise (``negative_noise="independent"``,
the official code) or with ``eps+`` (``"shared"``), denoised with the same ``h``.

Per-row errors (:meth:`DiffusionRecommender.errors`): ``"cosine"`` ``(cos(x0_hat, e) - 1)^2``;
``"mse"`` ``mean_d (x0_hat - e)^2``. :func:`error_scores` wraps them as the negated-error
``SequenceScores`` of the shared preference objectives (``denoise``, ``preferdiff``).

Ranking: guided DDIM (``x0_hat = (1 + w) f(x, h, n) - w f(x, none, n)``) from N(0, I) gives one embedding per
history; item j scores ``<x0_hat, e_j>``; the padding column is -inf.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from components.generative.diffusion import cfg_x0, ddim_sample, linear_beta_schedule, q_sample
from components.models.layers import sinusoidal_time_embedding
from components.preference.objectives import SequenceScores
from components.recsys.sasrec import SASRecConfig, SASRecEncoder

__all__ = [
    "DiffRecConfig",
    "DiffusionRecommender",
    "ErrorKind",
    "NegativeNoise",
    "error_scores",
    "in_batch_centroids",
    "row_errors",
]

ErrorKind = Literal["cosine", "mse"]
NegativeNoise = Literal["independent", "shared"]


@dataclass(frozen=True)
class DiffRecConfig:
    """encoder: the SASRec condition; steps: T; p_uncond: probability of the "none" condition in training."""

    encoder: SASRecConfig
    steps: int = 200
    beta_start: float = 1e-4
    beta_end: float = 0.02
    p_uncond: float = 0.1

    def __post_init__(self) -> None:
        if self.steps < 2 or not 0 <= self.p_uncond < 1:
            raise ValueError(f"DiffRecConfig needs steps >= 2 and 0 <= p_uncond < 1, got {self}")


def in_batch_centroids(targets: Tensor) -> Tensor:
    """Row i: the mean of the other B-1 rows of ``targets [B, D]`` (PreferDiff's centroid negative)."""
    b = targets.shape[0]
    if b < 2:
        raise ValueError("the in-batch centroid needs a batch of at least 2 rows")
    return (targets.sum(0, keepdim=True) - targets) / (b - 1)


def row_errors(x0_hat: Tensor, target: Tensor, kind: ErrorKind) -> Tensor:
    """Per-row reconstruction error ``[B]`` (see the module docstring)."""
    if kind == "cosine":
        return (F.cosine_similarity(x0_hat, target, dim=-1) - 1.0).pow(2)
    if kind == "mse":
        return (x0_hat - target).pow(2).mean(-1)
    raise ValueError(f"unknown error kind {kind!r}; expected 'cosine' or 'mse'")


def error_scores(errors: Tensor) -> SequenceScores:
    """Per-row errors as the shared objectives' "higher is better" scores (one token per row)."""
    return SequenceScores(logp=-errors, n_tokens=torch.ones_like(errors), prob_sum=torch.zeros_like(errors))


class DiffusionRecommender(nn.Module):
    """SASRec condition + single-linear x0 denoiser over the item table: learned (``--ab=iids``), or given and
    frozen (``item_table`` with ``cfg.encoder.freeze_items``: PreferDiff's text-embedding mode)."""

    def __init__(self, cfg: DiffRecConfig, seed: int = 0, item_table: Tensor | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.encoder.hidden
        self.encoder = SASRecEncoder(cfg.encoder, seed, item_table)
        generator = torch.Generator().manual_seed(seed + 1)
        self.none = nn.Parameter(torch.randn(d, generator=generator) * 0.02)
        self.time_mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.denoiser = nn.Linear(3 * d, d)
        self.schedule = linear_beta_schedule(cfg.steps, cfg.beta_start, cfg.beta_end)

    def condition(self, history: Tensor, drop: bool = False) -> Tensor:
        """SASRec summary ``[B, D]``; with ``drop``, each row replaced by "none" with probability p_uncond."""
        h = self.encoder(history)
        if drop and self.cfg.p_uncond > 0:
            mask = torch.rand(h.shape[0], 1, device=h.device) < self.cfg.p_uncond
            h = torch.where(mask, self.none.expand_as(h), h)
        return h

    def denoise(self, x: Tensor, n: Tensor, h: Tensor) -> Tensor:
        """``x0_hat = Linear([x, h, MLP(sinusoid(n / T))])``."""
        t = self.time_mlp(sinusoidal_time_embedding(n.to(x.dtype) / self.cfg.steps, x.shape[-1]))
        return self.denoiser(torch.cat([x, h, t], -1))

    def errors(
        self,
        history: Tensor,
        target: Tensor,
        kind: ErrorKind = "cosine",
        negatives: bool = False,
        negative_noise: NegativeNoise = "independent",
    ) -> tuple[Tensor, Tensor | None]:
        """Per-row errors of the positive and (with ``negatives``) of the in-batch centroid negative."""
        h = self.condition(history, drop=True)
        e_pos = self.encoder.item_emb(target)
        n = torch.randint(0, self.cfg.steps, (target.shape[0],), device=target.device)
        noise = torch.randn_like(e_pos)
        pos = row_errors(self.denoise(q_sample(self.schedule, e_pos, n, noise), n, h), e_pos, kind)
        if not negatives:
            return pos, None
        e_neg = in_batch_centroids(e_pos)
        neg_noise = torch.randn_like(e_neg) if negative_noise == "independent" else noise
        neg = row_errors(self.denoise(q_sample(self.schedule, e_neg, n, neg_noise), n, h), e_neg, kind)
        return pos, neg

    @torch.no_grad()
    def sample(self, history: Tensor, w: float, stride: int, generator: torch.Generator | None = None) -> Tensor:
        """Guided DDIM from N(0, I): one generated embedding ``[B, D]`` per history."""
        h = self.condition(history)
        none = self.none.expand_as(h)
        x = torch.randn(h.shape, generator=generator).to(h.device)
        model = cfg_x0(lambda x_, n_: self.denoise(x_, n_, h), lambda x_, n_: self.denoise(x_, n_, none), w)
        return ddim_sample(model, x, self.schedule, stride).x

    @torch.no_grad()
    def scores(self, history: Tensor, w: float, stride: int, generator: torch.Generator | None = None) -> Tensor:
        """``[B, n_items + 1]``: ``<x0_hat, e_j>`` for every item, padding column at -inf."""
        s = self.sample(history, w, stride, generator) @ self.encoder.items.T
        s[:, 0] = -torch.inf
        return s
