"""MINE against closed forms: the DV bound on correlated Gaussians, the EMA denominator, PMI from T."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from components.imitation.mine import (
    StatisticsConfig,
    StatisticsNetwork,
    count_pmi,
    dv_bound,
    log_mean_exp,
    mine_loss,
    pmi_from_statistics,
    shuffled_batches,
)
from components.training import TrainConfig, fit


def _gaussians(rho: float, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 1, generator=g)
    y = rho * x + math.sqrt(1 - rho**2) * torch.randn(n, 1, generator=g)
    return x, y


@pytest.mark.parametrize("rho", [0.0, 0.8])
def test_dv_bound_approaches_gaussian_mutual_information(rho: float) -> None:
    exact = -0.5 * math.log(1 - rho**2)  # I(X; Y) of a bivariate normal, nats
    x, y = _gaussians(rho, 20_000, seed=0)
    model = StatisticsNetwork(StatisticsConfig(1, 1, hidden=64, ema_rate=0.01), seed=0)
    fit(
        model,
        mine_loss,
        shuffled_batches(x, y, 512),
        TrainConfig(steps=600, lr=5e-3, seed=0, device="cpu", progress=False, log_every=100),
    )
    xt, yt = _gaussians(rho, 50_000, seed=1)
    with torch.no_grad():
        estimate = float(dv_bound(model(xt, yt), model(xt, yt[torch.randperm(len(yt))])))
    assert estimate == pytest.approx(exact, abs=0.07), estimate
    assert torch.isfinite(model.log_ema)


def test_loss_value_is_minus_dv_and_gradient_uses_the_ema() -> None:
    model = StatisticsNetwork(StatisticsConfig(1, 1, hidden=8, ema_rate=0.5), seed=0)
    x, y = _gaussians(0.5, 64, seed=2)
    ys = y[torch.randperm(64, generator=torch.Generator().manual_seed(0))]
    loss, extras = mine_loss(model, (x, y, ys))  # first call: EMA = this batch's E[e^T]
    with torch.no_grad():
        t_j, t_m = model(x, y), model(x, ys)
    assert float(loss.detach()) == pytest.approx(-float(dv_bound(t_j, t_m)), rel=1e-5)
    assert float(model.log_ema) == pytest.approx(float(log_mean_exp(t_m)), rel=1e-6)
    # second call with the EMA pinned far from the batch: the log-term gradient is scaled by E[e^T] / EMA
    model.zero_grad()
    model.log_ema.fill_(float(log_mean_exp(t_m)) + 10.0)
    with torch.no_grad():
        pinned = float(model.log_ema)
    loss, _ = mine_loss(model, (x, y, ys))
    ema = 0.5 * math.exp(pinned) + 0.5 * math.exp(float(log_mean_exp(t_m)))
    assert float(model.log_ema) == pytest.approx(math.log(ema), rel=1e-5)
    loss.backward()
    got = model.net[2].bias.grad.item()
    # d/db of -(mean T_j - mean(e^T_m) / EMA) with dT/db = 1
    assert got == pytest.approx(-(1.0 - math.exp(float(log_mean_exp(t_m))) / ema), rel=1e-4)


class _TableCritic(StatisticsNetwork):
    """T(x, y) = x^T table y for one-hot x and y: a critic set by hand."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__(StatisticsConfig(table.shape[0], table.shape[1], hidden=1))
        self.table = table

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (x @ self.table * y).sum(1)


def test_pmi_from_the_optimal_critic_is_the_exact_pmi() -> None:
    # the DV optimum T = log p(y|x) / p(y) + c must give PMI = log p(y|x) - log p(y), whatever c
    conditional = torch.tensor([[0.7, 0.2, 0.1], [0.5, 0.3, 0.2]])
    prior = torch.tensor([0.5, 0.3, 0.2])
    critic = _TableCritic(torch.log(conditional / prior) + 4.0)
    pmi = pmi_from_statistics(critic, torch.eye(2), torch.eye(3), torch.log(prior))
    assert torch.allclose(pmi, torch.log(conditional) - torch.log(prior), atol=1e-5)
    assert torch.allclose(pmi[1], torch.zeros(3), atol=1e-5)  # x uninformative (p(y|x) = p(y)): PMI 0


def test_count_pmi_by_hand() -> None:
    keys = np.array([0, 0, 0, 1, 1, 1])
    labels = np.array([0, 0, 1, 0, 1, 1])
    got = count_pmi(keys, labels, 2)
    # p(z=0) = p(z=1) = 1/2; key 0: p(0|k) = 2/3, p(1|k) = 1/3
    assert np.allclose(got, np.log([4 / 3, 4 / 3, 2 / 3, 2 / 3, 4 / 3, 4 / 3]))
    assert np.allclose(count_pmi(np.zeros(4), np.array([0, 1, 0, 1]), 2), 0.0)  # uninformative key: PMI 0
