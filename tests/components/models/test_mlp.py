"""Time-conditioned MLP velocity network: shapes per level count, exact parameter count, width matching."""

import pytest
import torch

from components.models.mlp import MLPVelocity, MLPVelocityConfig, count_parameters, width_for_params


@pytest.mark.parametrize("levels,shape", [(1, (5, 3)), (2, (5, 2, 3)), (3, (5, 3, 1, 3))])
def test_shapes_and_exact_parameter_count(levels, shape):
    cfg = MLPVelocityConfig(data_dim=3, levels=levels, hidden=16, n_layers=3, time_dim=8)
    model = MLPVelocity(cfg, seed=0)
    t = torch.rand(5) if levels == 1 else torch.rand(5, levels)
    out = model(torch.randn(shape), t)
    assert out.shape == ((5, 3) if levels < 3 else (5, 1, 3))
    assert count_parameters(model) == cfg.n_parameters


def test_seeded_init_is_reproducible_and_leaves_the_global_rng_alone():
    cfg = MLPVelocityConfig(data_dim=2, levels=2, hidden=8)
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a, b = MLPVelocity(cfg, seed=7), MLPVelocity(cfg, seed=7)
    assert torch.equal(torch.rand(1), before)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_bad_inputs_name_the_problem():
    model = MLPVelocity(MLPVelocityConfig(data_dim=2, levels=2, hidden=8))
    with pytest.raises(ValueError, match=r"expected x \[B, 2"):
        model(torch.randn(4, 3, 2), torch.rand(4, 2))
    with pytest.raises(ValueError, match="data_dim"):
        model(torch.randn(4, 2, 3), torch.rand(4, 2))
    with pytest.raises(ValueError, match="time_dim"):
        MLPVelocityConfig(data_dim=2, time_dim=5)


@pytest.mark.parametrize("data_dim,n_layers", [(1, 2), (2, 1), (784, 2), (3, 4)])
def test_width_for_params_is_the_closest_width(data_dim, n_layers):
    ref = MLPVelocityConfig(data_dim, levels=2, hidden=128, n_layers=n_layers)
    for levels in (1, 2, 3):
        got = width_for_params(
            MLPVelocityConfig(data_dim, levels=levels, hidden=128, n_layers=n_layers), ref.n_parameters
        )
        gap = abs(got.n_parameters - ref.n_parameters)
        for other in (got.hidden - 1, got.hidden + 1):
            probe = MLPVelocityConfig(data_dim, levels=levels, hidden=other, n_layers=n_layers)
            assert gap <= abs(probe.n_parameters - ref.n_parameters)
        if levels == 2:
            assert got.hidden == 128
