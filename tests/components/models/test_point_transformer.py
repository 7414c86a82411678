"""Point transformer velocity field: shapes, permutation equivariance, time conditioning."""

import dataclasses

import pytest
import torch

from components.generative import flow_matching_loss, sample
from components.models.point_transformer import PointTransformer, PointTransformerConfig


def _model(seed=0, **kw):
    torch.manual_seed(seed)  # parameter init of nn.Module uses the global generator
    return PointTransformer(PointTransformerConfig(**kw)).eval()


def test_shape_and_frozen_config():
    cfg = PointTransformerConfig()
    assert (cfg.d_model, cfg.n_layers, cfg.n_heads) == (64, 2, 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.d_model = 8
    model = _model(d_model=32, n_layers=1, n_heads=4)
    x = torch.randn(3, 10, 3)
    assert model(x, torch.rand(3)).shape == (3, 10, 3)
    with pytest.raises(ValueError, match="must divide"):
        PointTransformer(PointTransformerConfig(d_model=30, n_heads=4))
    with pytest.raises(ValueError, match="t must be"):
        model(x, torch.rand(2))


def test_permutation_equivariance():
    model = _model()
    gen = torch.Generator().manual_seed(1)
    x, t = torch.randn(2, 12, 3, generator=gen), torch.rand(2, generator=gen)
    perm = torch.randperm(12, generator=gen)
    with torch.no_grad():
        out, out_perm = model(x, t), model(x[:, perm], t)
    torch.testing.assert_close(out_perm, out[:, perm], atol=1e-5, rtol=1e-5)
    assert float(out.std()) > 1e-3  # not trivially constant


def test_time_conditioning_and_sample_independence():
    model = _model()
    x = torch.randn(2, 8, 3)
    with torch.no_grad():
        a = model(x, torch.tensor([0.1, 0.5]))
        b = model(x, torch.tensor([0.9, 0.5]))
    assert float((a[0] - b[0]).abs().max()) > 1e-3  # t changes the output
    torch.testing.assert_close(a[1], b[1])  # sample 1 is unaffected by sample 0's time


def test_few_training_steps_reduce_loss_and_sampling_runs():
    model = _model(d_model=32, n_layers=1).train()
    gen = torch.Generator().manual_seed(2)
    x1 = torch.randn(16, 8, 3, generator=gen) * 0.1 + torch.tensor([2.0, 0.0, -1.0])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(40):
        x0, t = torch.randn(16, 8, 3, generator=gen), torch.rand(16, generator=gen)
        loss = flow_matching_loss(model, x0, x1, t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:5]) / 5
    with torch.no_grad():
        res = sample(model.eval(), torch.randn(4, 8, 3, generator=gen), n_steps=5, method="heun")
    assert res.x.shape == (4, 8, 3) and res.nfe == 10
