"""MINE: a neural Donsker-Varadhan estimate of mutual information, and pointwise MI read from it.

For random variables X, Y the Donsker-Varadhan representation gives, for any function T,

    I(X; Y) >= E_{p(x,y)}[T(x, y)] - log E_{p(x)p(y)}[exp T(x, y)]                      (DV bound)

with equality at ``T* = log p(x,y) / (p(x)p(y)) + c``. A statistics network ``T_phi`` maximises the bound
on mini-batches; samples of the product of marginals come from pairing each x with the y of another row
of the same batch (a random permutation). The gradient of the log term, ``grad E[e^T] / E[e^T]``, is biased
on mini-batches; MINE replaces the denominator by an exponential moving average of ``E[e^T]`` over batches
(kept in log space as the network's buffer ``log_ema``, so checkpoints carry it).

For a discrete Y with prior ``p(y_k)``, the optimum gives the pointwise MI

    PMI(x; y_k) = log p(y_k | x) - log p(y_k) ~= T(x, y_k) - log sum_j p(y_j) exp T(x, y_j)

(the unknown constant c cancels). :func:`count_pmi` is the exact value for tabular data, from counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn


@dataclass(frozen=True)
class StatisticsConfig:
    """Shape of :class:`StatisticsNetwork`: ``T(x, y) = w2 . relu(W1 [x; y] + b1) + b2``, and the EMA rate."""

    x_dim: int
    y_dim: int
    hidden: int = 64
    ema_rate: float = 0.01

    def __post_init__(self) -> None:
        for name in ("x_dim", "y_dim", "hidden"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"StatisticsConfig.{name} must be an int >= 1, got {getattr(self, name)!r}")
        if not 0.0 < self.ema_rate <= 1.0:
            raise ValueError(f"StatisticsConfig.ema_rate must be in (0, 1], got {self.ema_rate!r}")


class StatisticsNetwork(nn.Module):
    """``forward(x [B, x_dim], y [B, y_dim]) -> T [B]``; buffer ``log_ema`` = log of the EMA of E[e^T]."""

    def __init__(self, cfg: StatisticsConfig, seed: int | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        generator_state = torch.random.get_rng_state()
        if seed is not None:
            torch.manual_seed(seed)
        self.net = nn.Sequential(nn.Linear(cfg.x_dim + cfg.y_dim, cfg.hidden), nn.ReLU(), nn.Linear(cfg.hidden, 1))
        torch.random.set_rng_state(generator_state)
        self.register_buffer("log_ema", torch.tensor(float("nan")))

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return self.net(torch.cat([x, y], dim=-1)).squeeze(-1)


def log_mean_exp(t: Tensor) -> Tensor:
    """``log mean_i exp t_i``, computed stably."""
    return torch.logsumexp(t, dim=0) - math.log(t.shape[0])


def dv_bound(t_joint: Tensor, t_marginal: Tensor) -> Tensor:
    """The Donsker-Varadhan bound ``mean(T_joint) - log mean(exp T_marginal)`` (nats)."""
    return t_joint.mean() - log_mean_exp(t_marginal)


def mine_loss(model: StatisticsNetwork, batch: tuple[Tensor, Tensor, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
    """Loss for :func:`components.training.fit`: its value is ``-DV``, its gradient MINE's bias-corrected one.

    ``batch = (x, y, y_shuffled)``. Updates ``model.log_ema`` (no gradient) with this batch's
    ``log E[e^T_marginal]``, then uses ``grad E[e^T] / EMA`` in place of ``grad log E[e^T]``.
    """
    x, y, y_shuffled = batch
    t_joint, t_marginal = model(x, y), model(x, y_shuffled)
    lme = log_mean_exp(t_marginal)
    with torch.no_grad():
        rate = model.cfg.ema_rate
        current = lme.detach().float()
        if torch.isnan(model.log_ema) or rate == 1.0:
            model.log_ema.copy_(current)
        else:  # EMA <- (1 - rate) EMA + rate E[e^T], in log space
            model.log_ema.copy_(torch.logaddexp(model.log_ema + math.log1p(-rate), current + math.log(rate)))
    ratio = torch.exp(t_marginal - model.log_ema).mean()  # E[e^T] / EMA, gradient divided by the EMA
    surrogate = t_joint.mean() - (lme.detach() + ratio - ratio.detach())
    return -surrogate, {"dv": (t_joint.mean() - lme).detach()}


def shuffled_batches(
    x: Tensor, y: Tensor, size: int
) -> Callable[[int, torch.Generator], tuple[Tensor, Tensor, Tensor]]:
    """A ``batches(step, generator)`` for ``fit``: ``size`` rows with replacement, ``(x, y, y[perm])``, the last
    pairing each x with the y of another row of the same batch (samples of p(x) p(y))."""
    n = x.shape[0]
    if y.shape[0] != n or size < 2:
        raise ValueError(f"shuffled_batches: x and y rows ({n}, {y.shape[0]}) must agree and size >= 2, got {size}")

    def draw(step: int, generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
        idx = torch.randint(0, n, (min(size, n),), generator=generator)
        perm = torch.randperm(len(idx), generator=generator)
        return x[idx], y[idx], y[idx][perm]

    return draw


@torch.no_grad()
def pmi_from_statistics(
    model: StatisticsNetwork, x: Tensor, candidates: Tensor, log_prior: Tensor, chunk: int = 8192
) -> Tensor:
    """``PMI(x_i; y_k) = T(x_i, y_k) - logsumexp_j(log p(y_j) + T(x_i, y_j))`` for all rows and candidates.

    Args:
        x: ``[N, x_dim]``; candidates: ``[K, y_dim]`` (e.g. the one-hot styles); log_prior: ``[K]``, log p(y_k).
    Returns:
        ``[N, K]`` float tensor.
    """
    model = model.eval()
    out = []
    k = candidates.shape[0]
    for part in torch.split(x, chunk):
        xs = part.repeat_interleave(k, dim=0)
        ys = candidates.repeat(part.shape[0], 1)
        t = model(xs, ys).reshape(part.shape[0], k)
        out.append(t - torch.logsumexp(t + log_prior, dim=1, keepdim=True))
    return torch.cat(out) if out else torch.zeros(0, k)


def count_pmi(keys: np.ndarray, labels: np.ndarray, n_labels: int) -> np.ndarray:
    """Exact PMI of tabular data from counts: ``log c(key, label) / c(key) - log c(label) / N`` per row.

    ``keys [N]`` are integer ids of the discrete x (e.g. a (state, action) cell id), ``labels [N]`` in
    ``0..n_labels-1``. Returns ``[N]`` float64.
    """
    keys, labels = np.asarray(keys), np.asarray(labels)
    _, key_idx = np.unique(keys, return_inverse=True)
    joint = np.zeros((key_idx.max() + 1 if len(keys) else 0, n_labels))
    np.add.at(joint, (key_idx, labels), 1.0)
    prior = np.bincount(labels, minlength=n_labels) / len(labels)
    conditional = joint[key_idx, labels] / joint[key_idx].sum(1)
    return np.log(conditional) - np.log(prior[labels])
