"""Exact assignment against brute force over all permutations; batched per-sample OT; pair cost."""

import itertools

import pytest
import torch

from components.ot import batched_exact_assignment, exact_assignment, pair_cost, squared_distances


def _brute_force_min(cost: torch.Tensor) -> float:
    n, m = cost.shape
    return min(float(sum(cost[i, p[i]] for i in range(n))) for p in itertools.permutations(range(m), n))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_exact_assignment_matches_brute_force(n):
    gen = torch.Generator().manual_seed(n)
    for _ in range(3):
        cost = torch.rand(n, n, generator=gen, dtype=torch.float64)
        perm = exact_assignment(cost)
        assert perm.dtype == torch.long and perm.shape == (n,)
        assert sorted(perm.tolist()) == list(range(n))  # a bijection
        assert float(cost[torch.arange(n), perm].sum()) == pytest.approx(_brute_force_min(cost), abs=1e-12)


def test_exact_assignment_rectangular_and_known_answer():
    cost = torch.tensor([[5.0, 1.0, 9.0], [1.0, 5.0, 9.0]])
    assert exact_assignment(cost).tolist() == [1, 0]
    gen = torch.Generator().manual_seed(0)
    cost = torch.rand(3, 5, generator=gen, dtype=torch.float64)
    perm = exact_assignment(cost)
    assert len(set(perm.tolist())) == 3
    assert float(cost[torch.arange(3), perm].sum()) == pytest.approx(_brute_force_min(cost), abs=1e-12)


def test_exact_assignment_rejects_bad_input():
    with pytest.raises(ValueError, match="more rows"):
        exact_assignment(torch.zeros(3, 2))
    with pytest.raises(ValueError, match="NaN"):
        exact_assignment(torch.tensor([[0.0, float("nan")], [1.0, 0.0]]))
    with pytest.raises(ValueError, match=r"\[N, M\]"):
        exact_assignment(torch.zeros(2, 2, 2))


def test_batched_assignment_recovers_a_hidden_permutation():
    gen = torch.Generator().manual_seed(1)
    x0 = torch.randn(4, 7, 3, generator=gen)
    hidden = torch.stack([torch.randperm(7, generator=gen) for _ in range(4)])
    # x1[b, hidden[b, i]] = x0[b, i]: the zero-cost pairing sends row i to column hidden[b, i].
    x1 = torch.empty_like(x0)
    x1.scatter_(1, hidden[..., None].expand(-1, -1, 3), x0)
    perm = batched_exact_assignment(x0, x1)
    assert torch.equal(perm, hidden)
    paired = x1.gather(1, perm[..., None].expand_as(x1))
    assert torch.equal(paired, x0)


def test_batched_assignment_matches_brute_force_per_sample():
    gen = torch.Generator().manual_seed(2)
    x0, x1 = torch.randn(3, 5, 2, generator=gen), torch.randn(3, 5, 2, generator=gen)
    perm = batched_exact_assignment(x0, x1)
    for b in range(3):
        cost = squared_distances(x0[b], x1[b]).double()
        assert float(cost[torch.arange(5), perm[b]].sum()) == pytest.approx(_brute_force_min(cost), rel=1e-6)


def test_pair_cost_hand_example():
    x0 = torch.tensor([[[0.0, 0.0], [1.0, 1.0]]])
    x1 = torch.tensor([[[3.0, 4.0], [1.0, 1.0]]])
    assert pair_cost(x0, x1).tolist() == [12.5]  # (25 + 0) / 2
    assert pair_cost(torch.zeros(2, 3), torch.ones(2, 3)).tolist() == [3.0, 3.0]
    with pytest.raises(ValueError, match="shape mismatch"):
        pair_cost(torch.zeros(2, 3), torch.zeros(3, 3))
