"""Log-domain Sinkhorn: marginals, agreement with POT, convergence to exact OT, stability, rounding."""

import numpy as np
import ot as pot
import pytest
import torch

from components.ot import (
    entropic_assignment,
    exact_assignment,
    round_plan_to_permutation,
    sinkhorn_log,
    squared_distances,
)


def _problem(seed: int, b: int = 3, n: int = 6, m: int = 5):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(b, n, 2, generator=gen, dtype=torch.float64)
    y = torch.randn(b, m, 2, generator=gen, dtype=torch.float64)
    a = torch.rand(b, n, generator=gen, dtype=torch.float64) + 0.1
    w = torch.rand(b, m, generator=gen, dtype=torch.float64) + 0.1
    return squared_distances(x, y), a / a.sum(1, keepdim=True), w / w.sum(1, keepdim=True)


def test_marginals_match_weights():
    cost, a, b = _problem(0)
    res = sinkhorn_log(cost, a, b, eps=0.1, n_iters=2000, tol=1e-9)
    assert res.plan.shape == cost.shape
    assert res.marginal_error < 1e-9
    assert res.n_iters < 2000
    torch.testing.assert_close(res.plan.sum(2), a, atol=1e-8, rtol=0)
    torch.testing.assert_close(res.plan.sum(1), b, atol=1e-8, rtol=0)
    torch.testing.assert_close(res.cost, (res.plan * cost).sum((1, 2)))


def test_plan_matches_pot_sinkhorn():
    cost, a, b = _problem(1)
    eps = 0.2
    res = sinkhorn_log(cost, a, b, eps=eps, n_iters=5000, tol=1e-12)
    for k in range(cost.shape[0]):
        ref = pot.sinkhorn(a[k].numpy(), b[k].numpy(), cost[k].numpy(), reg=eps, numItermax=100_000, stopThr=1e-13)
        np.testing.assert_allclose(res.plan[k].numpy(), ref, atol=1e-9)


def test_unbatched_uniform_default():
    cost, _, _ = _problem(2, b=1, n=4, m=4)
    res = sinkhorn_log(cost[0], eps=0.5, n_iters=3000, tol=1e-10)
    assert res.marginal_error < 1e-10
    assert res.plan.shape == (4, 4) and res.cost.ndim == 0
    torch.testing.assert_close(res.plan.sum(0), torch.full((4,), 0.25, dtype=torch.float64), atol=1e-9, rtol=0)
    torch.testing.assert_close(res.plan.sum(1), torch.full((4,), 0.25, dtype=torch.float64), atol=1e-9, rtol=0)


def test_converges_to_exact_ot_cost_as_eps_shrinks():
    gen = torch.Generator().manual_seed(3)
    x, y = torch.randn(8, 2, generator=gen, dtype=torch.float64), torch.randn(8, 2, generator=gen, dtype=torch.float64)
    cost = squared_distances(x, y)
    perm = exact_assignment(cost)
    exact = float(cost[torch.arange(8), perm].mean())  # uniform weights 1/8: plan cost = mean matched cost
    gaps = []
    for eps in (0.5, 0.05, 0.005):
        res = sinkhorn_log(cost, eps=eps, n_iters=5000, tol=1e-8)
        gaps.append(float(res.cost) - exact)
    # Entropic plans are (nearly) feasible, so never (noticeably) cheaper than exact OT.
    assert all(g >= -1e-3 * exact for g in gaps)
    assert gaps[0] > gaps[1] > abs(gaps[2])
    assert abs(gaps[2]) < 1e-2 * exact


def test_small_eps_is_finite_in_float32():
    gen = torch.Generator().manual_seed(4)
    cost = squared_distances(torch.randn(2, 16, 3, generator=gen), torch.randn(2, 16, 3, generator=gen)) * 100
    res = sinkhorn_log(cost, eps=1e-3, n_iters=50, tol=1e-6)
    assert torch.isfinite(res.plan).all()
    assert res.plan.dtype == torch.float32
    torch.testing.assert_close(res.plan.sum(1), torch.full((2, 16), 1 / 16), atol=1e-5, rtol=0)


def test_invalid_arguments():
    with pytest.raises(ValueError, match="eps"):
        sinkhorn_log(torch.zeros(2, 2), eps=0.0)
    with pytest.raises(ValueError, match="a must be"):
        sinkhorn_log(torch.zeros(2, 2), a=torch.ones(3) / 3, eps=0.1)


def test_rounding_recovers_a_permutation_plan_and_entropic_assignment_matches_exact():
    perm = torch.tensor([2, 0, 3, 1])
    plan = torch.full((4, 4), 0.01)
    plan[torch.arange(4), perm] = 0.2
    assert torch.equal(round_plan_to_permutation(plan), perm)
    # Well separated clusters: the entropic assignment finds the exact one.
    gen = torch.Generator().manual_seed(5)
    centres = torch.arange(6, dtype=torch.float64)[:, None] * 10.0
    x = centres + 0.1 * torch.randn(6, 1, generator=gen, dtype=torch.float64)
    y = centres[torch.tensor([3, 5, 0, 1, 4, 2])] + 0.1 * torch.randn(6, 1, generator=gen, dtype=torch.float64)
    cost = squared_distances(x, y)
    assert torch.equal(entropic_assignment(cost), exact_assignment(cost))
