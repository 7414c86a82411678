"""NSOT offline superset OT, online subsampling and the hybrid coupling."""

import itertools

import pytest
import torch

from components.ot import (
    hybrid_coupling,
    pair_cost,
    precompute_superset_ot,
    squared_distances,
    subsample_pairs,
    superset_pairs,
)


def _sorted_rows(x: torch.Tensor) -> torch.Tensor:
    return x[torch.argsort(x[:, 0])]


def test_superset_pairs_is_exact_ot_and_beats_random_pairing():
    gen_data = torch.Generator().manual_seed(0)
    x1 = torch.randn(6, 3, generator=gen_data) + 2.0
    x0, x1_paired = superset_pairs(x1, torch.Generator().manual_seed(1), solver="exact")
    assert x0.shape == x1_paired.shape == (6, 3)
    torch.testing.assert_close(_sorted_rows(x1_paired), _sorted_rows(x1), rtol=0, atol=0)  # a re-ordering
    cost = squared_distances(x0, x1)
    brute = min(float(cost[torch.arange(6), torch.tensor(p)].sum()) for p in itertools.permutations(range(6)))
    assert float((x0 - x1_paired).pow(2).sum()) == pytest.approx(brute, rel=1e-5)
    assert float(pair_cost(x0[None], x1_paired[None])) <= float(pair_cost(x0[None], x1[None]))
    # Same generator state -> same noise.
    again, _ = superset_pairs(x1, torch.Generator().manual_seed(1))
    assert torch.equal(again, x0)


def test_precompute_is_deterministic_and_reports_costs():
    shapes = torch.randn(3, 32, 3, generator=torch.Generator().manual_seed(2)) * 0.5 + 1.0
    X0, X1, stats = precompute_superset_ot(shapes, seed=7)
    X0b, X1b, stats_b = precompute_superset_ot(list(shapes), seed=7)
    X0c, _, _ = precompute_superset_ot(shapes, seed=8)
    assert X0.shape == X1.shape == (3, 32, 3)
    assert torch.equal(X0, X0b) and torch.equal(X1, X1b)
    assert not torch.equal(X0, X0c)
    assert stats["mean_pair_cost"] == stats_b["mean_pair_cost"]
    assert stats["mean_pair_cost"] == pytest.approx(float(pair_cost(X0, X1).mean()))
    assert stats["mean_pair_cost"] < 0.8 * stats["mean_independent_cost"]
    assert stats["n_shapes"] == 3 and stats["n_points"] == 32
    for s in range(3):  # each X1[s] is a re-ordering of shapes[s]
        torch.testing.assert_close(_sorted_rows(X1[s]), _sorted_rows(shapes[s]), rtol=0, atol=0)


def test_sinkhorn_solver_is_close_to_exact_and_never_cheaper():
    shapes = torch.randn(2, 48, 3, generator=torch.Generator().manual_seed(3))
    _, _, exact = precompute_superset_ot(shapes, seed=0, solver="exact")
    _, X1, approx = precompute_superset_ot(shapes, seed=0, solver="sinkhorn")
    assert exact["mean_pair_cost"] <= approx["mean_pair_cost"] + 1e-6
    assert approx["mean_pair_cost"] < 1.15 * exact["mean_pair_cost"]
    torch.testing.assert_close(_sorted_rows(X1[0]), _sorted_rows(shapes[0]), rtol=0, atol=0)
    with pytest.raises(ValueError, match="unknown OT solver"):
        precompute_superset_ot(shapes, seed=0, solver="greedy")


def test_subsample_keeps_pairing_and_draws_distinct_points():
    S, M, N = 4, 20, 8
    X0 = torch.randn(S, M, 3, generator=torch.Generator().manual_seed(4))
    X1 = 2.0 * X0 + 100.0 * torch.arange(S, dtype=torch.float32)[:, None, None]  # pairing & shape id encoded
    idx = torch.tensor([3, 0, 3, 1, 2])
    x0, x1 = subsample_pairs(X0, X1, idx, N, torch.Generator().manual_seed(5))
    assert x0.shape == x1.shape == (5, N, 3)
    torch.testing.assert_close(x1, 2.0 * x0 + 100.0 * idx.float()[:, None, None])
    for b in range(5):
        rows = [int(torch.nonzero((X0[idx[b]] == p).all(1))[0]) for p in x0[b]]
        assert len(set(rows)) == N  # without replacement
    # Fresh subsets for the two copies of shape 3; deterministic for a fixed generator seed.
    assert not torch.equal(x0[0], x0[2])
    again, _ = subsample_pairs(X0, X1, idx, N, torch.Generator().manual_seed(5))
    assert torch.equal(again, x0)
    with pytest.raises(ValueError, match="n_points"):
        subsample_pairs(X0, X1, idx, M + 1, torch.Generator())


def test_hybrid_coupling_endpoints_and_correlation():
    gen = torch.Generator().manual_seed(6)
    x0 = torch.randn(20_000, generator=gen)
    assert hybrid_coupling(x0, 0.0, gen) is x0
    # beta = 1: output does not depend on x0 at all (same noise for different x0).
    out_a = hybrid_coupling(x0, 1.0, torch.Generator().manual_seed(9))
    out_b = hybrid_coupling(x0 + 50.0, 1.0, torch.Generator().manual_seed(9))
    torch.testing.assert_close(out_a, out_b)
    for beta in (0.2, 1.0):
        out = hybrid_coupling(x0, beta, gen)
        assert float(out.var()) == pytest.approx(1.0, abs=0.05)  # still N(0, 1) marginally
        corr = float(torch.corrcoef(torch.stack([x0, out]))[0, 1])
        assert corr == pytest.approx((1 - beta) ** 0.5, abs=0.03)
    with pytest.raises(ValueError, match="beta"):
        hybrid_coupling(x0, 1.5, gen)
