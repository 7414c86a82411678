"""KnOTS alignment: exact reconstruction, factored == full, KnOTS-TA == TA, global top-K."""

import pytest
import torch

from components.merging import (
    MergeConfig,
    baseline_merge,
    knots_align,
    knots_merge,
    knots_space,
    original_space,
    sign_conflict_rate,
    subspace_alignment,
    ties,
)


def random_factors(n, out_dim, in_dim, rank, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(out_dim, rank, generator=g, dtype=dtype), torch.randn(rank, in_dim, generator=g, dtype=dtype))
        for _ in range(n)
    ]


@pytest.mark.parametrize("method", ["factored", "full"])
def test_shared_basis_reproduces_every_update(method):
    factors = random_factors(3, 12, 10, 3, seed=0)
    u, r = knots_align(factors, method=method)
    assert u.dtype == torch.float64 and r.shape == (3, 9, 10) and u.shape == (12, 9)
    torch.testing.assert_close(u.T @ u, torch.eye(9, dtype=torch.float64), atol=1e-12, rtol=0)
    for t, (b, a) in enumerate(factors):
        torch.testing.assert_close(u @ r[t], b @ a, atol=1e-12, rtol=0)


@pytest.mark.parametrize("shape", [(12, 10, 3), (5, 16, 4), (20, 3, 4)])  # O < nr and I < r included
def test_factored_equals_full(shape):
    out_dim, in_dim, rank = shape
    factors = random_factors(3, out_dim, in_dim, rank, seed=1)
    u_f, r_f = knots_align(factors, method="factored")
    u_x, r_x = knots_align(factors, method="full")
    assert r_f.shape == r_x.shape
    s_f = torch.linalg.svdvals(torch.cat(list(r_f), dim=1))  # S, since R = S V^T with V orthonormal
    s_x = torch.linalg.svdvals(torch.cat(list(r_x), dim=1))
    torch.testing.assert_close(s_f, s_x, atol=1e-10, rtol=1e-10)
    for t in range(3):
        torch.testing.assert_close(u_f @ r_f[t], u_x @ r_x[t], atol=1e-10, rtol=0)


@pytest.mark.parametrize("method", ["factored", "full"])
def test_singular_values_below_tolerance_are_dropped(method):
    ((b, a),) = random_factors(1, 12, 10, 3, seed=2)
    zero = (torch.zeros(12, 3, dtype=torch.float64), a)  # an untrained LoRA (B = 0)
    tiny = (1e-7 * b, a)  # singular values ~1e-7 <= 1e-5
    u, r = knots_align([(b, a), (b.clone(), a.clone()), zero, tiny], method=method)
    assert u.shape[1] == 3  # duplicates add no rank, B = 0 and tiny updates are dropped
    torch.testing.assert_close(u @ r[0], b @ a, atol=1e-12, rtol=0)
    assert float(r[2].abs().max()) < 1e-12


def layered_factors(seed, dtype=torch.float32):
    return {
        "blocks.0.attn.q_proj": random_factors(4, 8, 8, 2, seed, dtype),
        "blocks.0.mlp.fc1": random_factors(4, 16, 8, 2, seed + 1, dtype),
    }


def test_knots_ta_equals_ta():
    factors = layered_factors(seed=3)
    cfg = MergeConfig(lam=0.4, merge="sum")
    aligned = knots_merge(factors, "ta", cfg, scale=2.0)
    plain = baseline_merge(factors, "ta", cfg, scale=2.0)
    expected = {n: 0.4 * 2.0 * sum(b @ a for b, a in fs) for n, fs in factors.items()}
    for name in factors:
        assert aligned[name].dtype == torch.float32 and aligned[name].shape == expected[name].shape
        torch.testing.assert_close(aligned[name], plain[name], atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(plain[name], expected[name], atol=1e-5, rtol=1e-5)


def test_knots_ties_merges_flattened_r_then_maps_back():
    factors = layered_factors(seed=4, dtype=torch.float64)
    cfg = MergeConfig(lam=0.6, top_k=20.0)
    got = knots_merge(factors, "ties", cfg)
    aligned = {n: knots_align(fs) for n, fs in factors.items()}
    flat = torch.cat([r.reshape(4, -1) for _, r in aligned.values()], dim=1)
    merged, start = ties(flat, cfg), 0
    for name, (u, r) in aligned.items():
        size = r[0].numel()
        torch.testing.assert_close(got[name], u @ merged[start : start + size].reshape(r.shape[1:]))
        start += size
    baseline = baseline_merge(factors, "ties", cfg)
    assert not torch.allclose(got["blocks.0.mlp.fc1"], baseline["blocks.0.mlp.fc1"])


def test_top_k_is_global_across_layers():
    small = [(torch.ones(2, 1), 0.01 * torch.ones(1, 2))] * 2  # 4 entries of 0.01 per task
    large = [(torch.ones(2, 1), torch.ones(1, 2))] * 2  # 4 entries of 1.0 per task
    space = original_space({"small": small, "large": large})
    merged = space.merge("ties", MergeConfig(top_k=50.0))  # keeps the 4 largest of 8
    torch.testing.assert_close(merged["large"], torch.ones(2, 2))
    torch.testing.assert_close(merged["small"], torch.zeros(2, 2))


def test_space_is_reusable_for_a_grid_and_checks_inputs():
    space = knots_space(layered_factors(seed=5))
    assert space.layer_names == ["blocks.0.attn.q_proj", "blocks.0.mlp.fc1"]
    one = space.merge("ta", MergeConfig(lam=1.0))
    half = space.merge("ta", MergeConfig(lam=0.5))
    for name in one:
        torch.testing.assert_close(half[name], 0.5 * one[name])
    with pytest.raises(ValueError, match="shape"):
        space.to_deltas(torch.zeros(3))
    with pytest.raises(ValueError, match="unknown merge method"):
        space.merge("magic", MergeConfig())
    bad = {"q": [(torch.ones(2, 1), torch.ones(1, 2), 1.0)]}
    with pytest.raises(ValueError, match=r"\(B, A\) pair"):
        knots_space(bad)


def test_subspace_alignment_known_values_and_basis_invariance():
    e = torch.eye(4, dtype=torch.float64)
    same = [e[:, :2] @ e[:2], 3.0 * e[:, :2] @ e[:2]]
    orthogonal = [e[:, :2] @ e[:2], e[:, 2:] @ e[:2]]
    assert subspace_alignment(same, rank=2) == pytest.approx(1.0)
    assert subspace_alignment(orthogonal, rank=2) == pytest.approx(0.0, abs=1e-12)
    assert subspace_alignment(orthogonal, rank=2, side="right") == pytest.approx(1.0)
    factors = random_factors(3, 12, 10, 2, seed=6)
    u, r = knots_align(factors)
    before = subspace_alignment([b @ a for b, a in factors], rank=2)
    assert 0.0 < before < 1.0
    assert subspace_alignment(list(r), rank=2) == pytest.approx(before, abs=1e-9)


def test_sign_conflicts_differ_between_spaces():
    factors = layered_factors(seed=7, dtype=torch.float64)
    before = sign_conflict_rate(original_space(factors).vectors, top_k=20.0)
    after = sign_conflict_rate(knots_space(factors).vectors, top_k=20.0)
    assert 0.0 <= before <= 1.0 and 0.0 <= after <= 1.0 and before != after


def test_auto_uses_the_factored_svd_only_where_it_is_cheaper() -> None:
    from components.merging.knots import choose_align_method

    gen = torch.Generator().manual_seed(3)
    f64 = {"generator": gen, "dtype": torch.float64}
    low_rank = [(torch.randn(64, 2, **f64), torch.randn(2, 48, **f64)) for _ in range(3)]
    full_rank = [(torch.randn(4, 8, **f64), torch.randn(8, 6, **f64)) for _ in range(3)]
    assert choose_align_method(low_rank) == "factored"  # 6 < min(64, 144)
    assert choose_align_method(full_rank) == "full"  # 24 >= min(4, 18)
    for factors in (low_rank, full_rank):
        u, r = knots_align(factors, method="auto")
        for t, (b, a) in enumerate(factors):
            assert torch.allclose(u @ r[t], b @ a, atol=1e-10)


def test_alignment_diagnostics_on_known_updates():
    from components.merging import alignment_diagnostics

    # two tasks updating one layer along the same rank-1 direction: identical subspaces (score 1);
    # opposite signs: every entry both keep is a sign conflict, in either space
    b, a = torch.tensor([[1.0], [2.0]], dtype=torch.float64), torch.tensor([[3.0, -1.0]], dtype=torch.float64)
    layers = {"layer": [(b, a), (-b, a)]}
    diag = alignment_diagnostics(original_space(layers), knots_space(layers), layers, top_k=100.0)
    assert diag["subspace_alignment"] == pytest.approx(1.0)
    assert diag["knots_ta_minus_ta_max_abs"] < 1e-12 and diag["delta_max_abs"] == pytest.approx(0.0, abs=1e-12)
    assert diag["sign_conflict_original"] == pytest.approx(1.0)
    # same sign: no conflict; TA at lambda 0.7 sums the two updates
    layers = {"layer": [(b, a), (2 * b, a)]}
    diag = alignment_diagnostics(original_space(layers), knots_space(layers), layers, top_k=100.0)
    assert diag["sign_conflict_original"] == 0.0 and diag["delta_max_abs"] == pytest.approx(0.7 * 3 * 6)
