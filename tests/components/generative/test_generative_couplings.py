"""Flow-matching couplings: identity, mini-batch OT and per-sample (equivariant) OT vs brute force."""

import itertools

import pytest
import torch

from components.generative import COUPLINGS, couple


def _brute_min(cost: torch.Tensor) -> float:
    n = cost.shape[0]
    return min(float(cost[torch.arange(n), torch.tensor(p)].sum()) for p in itertools.permutations(range(n)))


def test_registry_and_unknown_name():
    assert {"independent", "minibatch_ot", "pointwise_ot"} <= set(COUPLINGS)
    with pytest.raises(ValueError, match="unknown coupling"):
        couple("sinkhorn_magic", torch.zeros(2, 3), torch.zeros(2, 3))


def test_independent_is_identity():
    x0, x1 = torch.randn(4, 5, 3), torch.randn(4, 5, 3)
    y0, y1 = COUPLINGS["independent"](x0, x1, None)
    assert y0 is x0 and y1 is x1


def test_minibatch_ot_pairs_whole_samples_optimally():
    gen = torch.Generator().manual_seed(0)
    x0, x1 = torch.randn(5, 4, 2, generator=gen), torch.randn(5, 4, 2, generator=gen)
    y0, y1 = couple("minibatch_ot", x0, x1, gen)
    assert torch.equal(y0, x0)
    # y1 is x1 with whole samples re-ordered (no mixing of points between samples)
    matches = [[torch.equal(y1[i], x1[j]) for j in range(5)] for i in range(5)]
    assert all(sum(row) == 1 for row in matches)
    cost = (x0.flatten(1)[:, None] - x1.flatten(1)[None]).pow(2).sum(-1)
    assert float((y0 - y1).pow(2).sum()) == pytest.approx(_brute_min(cost), rel=1e-5)


def test_minibatch_ot_recovers_shuffled_batch():
    gen = torch.Generator().manual_seed(1)
    x0 = torch.randn(8, 6, generator=gen)
    x1 = x0[torch.randperm(8, generator=gen)] + 0.01 * torch.randn(8, 6, generator=gen)
    _, y1 = couple("minibatch_ot", x0, x1)
    assert float((y1 - x0).abs().max()) < 0.05


def test_pointwise_ot_permutes_points_within_each_sample():
    gen = torch.Generator().manual_seed(2)
    x0, x1 = torch.randn(3, 5, 3, generator=gen), torch.randn(3, 5, 3, generator=gen)
    y0, y1 = couple("pointwise_ot", x0, x1, gen)
    assert torch.equal(y0, x0) and y1.shape == x1.shape
    for b in range(3):
        assert sorted(y1[b].flatten().tolist()) == sorted(x1[b].flatten().tolist())
        cost = (x0[b][:, None] - x1[b][None]).pow(2).sum(-1)
        assert float((x0[b] - y1[b]).pow(2).sum()) == pytest.approx(_brute_min(cost), rel=1e-5)
