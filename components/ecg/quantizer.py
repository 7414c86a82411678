"""NormEMA vector quantiser (BEiT-v2 style, as in HeartLang's ``norm_ema_quantizer``).

Inputs z (…, D) are l2-normalised, the codebook E (K, D) has unit rows, and the code of z is its nearest row by
cosine, argmax_k <z, e_k>. The codebook is learned without gradients:

* k-means initialisation (spherical, ``kmeans_iters`` iterations) on the first training batch;
* an EMA update per training batch: with n_k the number of vectors assigned to code k and m_k their mean
  (re-normalised), ``e_k <- normalise(decay * e_k + (1 - decay) * m_k)`` for every used code (unused codes are
  kept), and the usage EMA ``cluster_size <- decay * cluster_size + (1 - decay) * n_k``;
* the loss is the commitment term ``beta * mean((z - sg(e_code))^2)``, a mean over vectors *and* dimensions as
  the official ``F.mse_loss(quantize.detach(), z)`` takes it (summed over the D dimensions it weighs D times as
  much, and at small scale pulls every vector onto one or two codes); the output passes gradients straight
  through to z.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def l2norm(x: torch.Tensor) -> torch.Tensor:
    return F.normalize(x, p=2, dim=-1)


def spherical_kmeans(z: torch.Tensor, k: int, iters: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """K unit centroids of the unit vectors ``z`` (M, D); initial centroids drawn from z (with replacement if M < K)."""
    m = len(z)
    pick = torch.randperm(m, generator=generator)[:k] if m >= k else torch.randint(m, (k,), generator=generator)
    centroids = z[pick].clone()
    for _ in range(iters):
        codes = (z @ centroids.T).argmax(-1)
        sums = torch.zeros_like(centroids).index_add_(0, codes, z)
        counts = torch.bincount(codes, minlength=k)
        centroids = torch.where(counts[:, None] > 0, l2norm(sums), centroids)
    return centroids


class NormEMAQuantizer(nn.Module):
    def __init__(
        self, num_codes: int, dim: int, decay: float = 0.99, beta: float = 1.0, kmeans_iters: int = 10
    ) -> None:
        super().__init__()
        self.num_codes, self.dim, self.decay, self.beta, self.kmeans_iters = num_codes, dim, decay, beta, kmeans_iters
        self.register_buffer("embedding", l2norm(torch.randn(num_codes, dim)))
        self.register_buffer("cluster_size", torch.zeros(num_codes))
        self.register_buffer("initted", torch.zeros((), dtype=torch.bool))

    def codes(self, z: torch.Tensor) -> torch.Tensor:
        """Index of the nearest code (by cosine) of every vector of ``z`` (…, D)."""
        return (l2norm(z) @ self.embedding.T).argmax(-1)

    @torch.no_grad()
    def ema_update(self, z: torch.Tensor, codes: torch.Tensor) -> None:
        """One EMA step from the unit vectors ``z`` (M, D) and their ``codes`` (M,)."""
        counts = torch.bincount(codes, minlength=self.num_codes).to(z.dtype)
        sums = torch.zeros_like(self.embedding).index_add_(0, codes, z.to(self.embedding.dtype))
        self.cluster_size.mul_(self.decay).add_(counts, alpha=1 - self.decay)
        means = l2norm(sums / counts.clamp(min=1)[:, None])
        moved = l2norm(self.decay * self.embedding + (1 - self.decay) * means)
        self.embedding.copy_(torch.where(counts[:, None] > 0, moved, self.embedding))

    def forward(
        self, z: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(z_q, loss, codes)`` for ``z`` (…, D); ``mask`` (…) selects the vectors that count (padding excluded)."""
        z = l2norm(z.float())
        flat = z.reshape(-1, self.dim)
        keep = torch.ones(len(flat), dtype=torch.bool, device=z.device) if mask is None else mask.reshape(-1)
        if self.training and not bool(self.initted) and keep.any():  # a batch of padding only waits
            with torch.no_grad():
                self.embedding.copy_(spherical_kmeans(flat[keep].detach(), self.num_codes, self.kmeans_iters))
                self.initted.fill_(True)
        codes = (flat @ self.embedding.T).argmax(-1)
        quant = self.embedding[codes]
        if self.training:
            self.ema_update(flat[keep].detach(), codes[keep])
        diff = ((quant.detach() - flat) ** 2).mean(-1)
        loss = self.beta * (diff[keep].mean() if keep.any() else diff.sum() * 0)
        z_q = flat + (quant - flat).detach()
        return z_q.reshape(z.shape), loss, codes.reshape(z.shape[:-1])
