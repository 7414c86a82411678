"""Fourier input features (the official HRF low-dim embedding) and the velocity network built on them:
known answers of the features, exact parameter counts, width matching, shapes and seeding."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from components.models.fourier_velocity import FourierVelocityConfig, FourierVelocityNet, match_width
from components.models.layers import FourierInputEmbedding, fourier_features


def test_fourier_features_known_answer() -> None:
    x = torch.tensor([0.0, math.pi / 2], dtype=torch.float64)
    out = fourier_features(x, 4, max_period=100.0)  # frequencies 1 and 1/100
    assert out.shape == (2, 4)
    assert torch.allclose(out[0], torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=torch.float64))
    expected = [1.0, math.sin(math.pi / 200), 0.0, math.cos(math.pi / 200)]
    assert torch.allclose(out[1], torch.tensor(expected, dtype=torch.float64), atol=1e-12)
    # every entry of any shape gets its own features; the top frequency is 1 (unscaled, unlike the time embedding)
    grid = fourier_features(torch.randn(3, 2, 5), 8)
    assert grid.shape == (3, 2, 5, 8)
    assert fourier_features(torch.tensor([1.0]), 8)[0, 0] == pytest.approx(math.sin(1.0))
    with pytest.raises(ValueError, match="even and >= 4"):
        fourier_features(x, 6 - 1)
    with pytest.raises(ValueError, match="even and >= 4"):
        fourier_features(x, 2)


def test_fourier_input_embedding_shape_and_count() -> None:
    emb = FourierInputEmbedding(3, 8, 5)
    assert emb(torch.randn(4, 3)).shape == (4, 5)
    assert sum(p.numel() for p in emb.parameters()) == FourierInputEmbedding.n_parameters(3, 8, 5)
    with pytest.raises(ValueError, match="expected 3 numbers"):
        emb(torch.randn(4, 2))


@pytest.mark.parametrize("features", ["fourier", "raw"])
@pytest.mark.parametrize("levels", [1, 2, 3])
def test_parameter_count_is_exact(features: str, levels: int) -> None:
    cfg = FourierVelocityConfig(data_dim=2, levels=levels, hidden=12, n_layers=3, emb_dim=8, data_features=features)
    net = FourierVelocityNet(cfg)
    assert sum(p.numel() for p in net.parameters()) == cfg.n_parameters


def test_match_width_is_the_closest_count() -> None:
    reference = FourierVelocityConfig(1, 2, 64, 2, 16)
    for levels in (1, 3):
        cfg = match_width(FourierVelocityConfig(1, levels, 1, 2, 16), reference.n_parameters)
        gap = abs(cfg.n_parameters - reference.n_parameters)
        for other in (cfg.hidden - 1, cfg.hidden + 1):
            assert gap <= abs(replace(cfg, hidden=other).n_parameters - reference.n_parameters)
        assert gap / reference.n_parameters < 0.01
    assert match_width(reference, reference.n_parameters).hidden == 64
    with pytest.raises(ValueError, match=">= 1"):
        match_width(reference, 0)


def test_shapes_seeding_and_dependence_on_every_level() -> None:
    rf = FourierVelocityNet(FourierVelocityConfig(2, 1, 16, 2, 8), seed=3)
    assert rf(torch.randn(5, 2), torch.rand(5)).shape == (5, 2)
    again = FourierVelocityNet(FourierVelocityConfig(2, 1, 16, 2, 8), seed=3)
    assert all(torch.equal(a, b) for a, b in zip(rf.state_dict().values(), again.state_dict().values()))
    image = FourierVelocityNet(FourierVelocityConfig(16, 2, 8, 2, 8, "raw"), seed=0)
    assert image(torch.randn(3, 2, 4, 4), torch.rand(3, 2)).shape == (3, 4, 4)
    hrf = FourierVelocityNet(FourierVelocityConfig(1, 2, 16, 2, 8), seed=0)
    s, t = torch.randn(6, 2, 1, requires_grad=True), torch.rand(6, 2, requires_grad=True)
    hrf(s, t).sum().backward()
    assert (s.grad[:, 0].abs().sum() > 0) and (s.grad[:, 1].abs().sum() > 0) and (t.grad.abs().sum(0) > 0).all()
    with pytest.raises(ValueError, match=r"expected x \[B, 2"):
        hrf(torch.randn(6, 1), torch.rand(6))
    with pytest.raises(ValueError, match="data_dim"):
        hrf(torch.randn(6, 2, 3), torch.rand(6, 2))
    with pytest.raises(ValueError, match="n_layers"):
        FourierVelocityConfig(1, n_layers=1)
    with pytest.raises(ValueError, match="data_features"):
        FourierVelocityConfig(1, data_features="linear")  # type: ignore[arg-type]
