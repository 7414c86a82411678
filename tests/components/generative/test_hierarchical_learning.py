"""What HRF's headline needs from its learned part: a velocity network trained by the shared loop on the 1-D mixture
approaches the exact (closed-form) field, so a learned RF/HRF2 gap is measured against a fitted field, not noise."""

from __future__ import annotations

import torch

from components.data.toy import gaussian_mixture_1d
from components.generative.hierarchical import (
    hierarchical_batch,
    hierarchical_batch_loss,
    mixture_field_model,
    sample_schedule,
)
from components.metrics.generation import sample_distance
from components.models.fourier_velocity import FourierVelocityNet
from components.models.fourier_velocity_config import FourierVelocityConfig
from components.training import TrainConfig, fit, random_batches


def test_a_trained_rf_field_approaches_the_exact_mixture_field() -> None:
    means, variance = [-1.0, 1.0], 0.02
    x1 = gaussian_mixture_1d(means, variance, 8000, torch.Generator().manual_seed(0))
    rows, exact = random_batches(x1, size=512), mixture_field_model(means, variance)
    model = FourierVelocityNet(FourierVelocityConfig(1, 1, 32, 2, 16), seed=0)
    cfg = TrainConfig(steps=400, lr=3e-3, seed=0, progress=False, device="cpu")
    fit(model, hierarchical_batch_loss, lambda step, gen: hierarchical_batch(rows(step, gen)[0], 1, gen), cfg)
    model.eval()
    x = torch.linspace(-2, 2, 41)[:, None].repeat(5, 1)
    t = torch.linspace(0.0, 0.8, 5).repeat_interleave(41)
    with torch.no_grad():
        truth, learned = exact(x, t), model(x, t)
    assert (learned - truth).pow(2).mean() < 0.25 * truth.pow(2).mean()  # the field, not a constant
    reference = gaussian_mixture_1d(means, variance, 8000, torch.Generator().manual_seed(1))
    x0 = torch.randn(8000, 1, generator=torch.Generator().manual_seed(2))
    w1 = {
        name: sample_distance(sample_schedule(f, x0, [2]).x, reference)
        for name, f in (("learned", model), ("exact", exact))
    }
    assert w1["learned"] < 1.3 * w1["exact"]  # two Euler steps: as far from the target as the exact field lands
    untrained = FourierVelocityNet(FourierVelocityConfig(1, 1, 32, 2, 16), seed=0).eval()
    with torch.no_grad():
        assert (untrained(x, t) - truth).pow(2).mean() > 0.5 * truth.pow(2).mean()  # the test can fail
