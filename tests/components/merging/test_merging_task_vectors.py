"""Task-vector mergers against hand-computed answers (3 tasks, D = 5)."""

import pytest
import torch

from components.merging import (
    MERGERS,
    MergeConfig,
    dare_drop,
    dare_ties,
    disjoint_merge,
    elect_sign,
    sign_conflict_rate,
    task_arithmetic,
    ties,
    trim_top_k,
)

TAUS = torch.tensor(
    [[1.0, -2.0, 0.5, 3.0, -0.1], [2.0, 1.0, -0.5, -1.5, 0.3], [-4.0, 1.0, 0.2, 2.0, -0.6]], dtype=torch.float64
)


def test_registry_has_the_three_methods_with_one_signature():
    assert set(MERGERS) == {"ta", "ties", "dare_ties"}
    for merger in MERGERS.values():
        assert merger(TAUS, MergeConfig(), torch.Generator().manual_seed(0)).shape == (5,)


def test_task_arithmetic_is_lambda_times_sum():
    expected = 0.5 * torch.tensor([-1.0, 0.0, 0.2, 3.5, -0.4], dtype=torch.float64)
    got = task_arithmetic(TAUS, MergeConfig(lam=0.5, top_k=20, merge="mean"))  # top_k/merge ignored
    torch.testing.assert_close(got, expected)


def test_trim_keeps_top_60_percent_per_task():
    expected = torch.tensor(
        [[1.0, -2.0, 0.0, 3.0, 0.0], [2.0, 1.0, 0.0, -1.5, 0.0], [-4.0, 1.0, 0.0, 2.0, 0.0]], dtype=torch.float64
    )
    torch.testing.assert_close(trim_top_k(TAUS, 60.0), expected)


def test_trim_keeps_entries_tied_with_the_threshold():
    tv = torch.tensor([[3.0, -2.0, 2.0, 1.0]])
    torch.testing.assert_close(trim_top_k(tv, 50.0), torch.tensor([[3.0, -2.0, 2.0, 0.0]]))


def test_ties_trimmed_mean_and_sum():
    # trimmed sums [-1, 0, 0, 3.5, 0] -> signs [-1, 0, 0, +1, 0]; majority sign(0) -> +1 fills zeros.
    # kept: c0 {-4}, c1 {1, 1} (the -2 disagrees), c3 {3, 2} (the -1.5 disagrees).
    cfg = MergeConfig(lam=0.5, top_k=60.0, merge="mean")
    torch.testing.assert_close(ties(TAUS, cfg), torch.tensor([-2.0, 0.5, 0.0, 1.25, 0.0], dtype=torch.float64))
    cfg_sum = MergeConfig(lam=0.5, top_k=60.0, merge="sum")
    torch.testing.assert_close(ties(TAUS, cfg_sum), torch.tensor([-2.0, 1.0, 0.0, 2.5, 0.0], dtype=torch.float64))


def test_ties_without_trim_uses_disjoint_mean_over_agreeing_nonzeros():
    # sums [-1, 0, 0.2, 3.5, -0.4] -> signs [-1, +1 (majority), +1, +1, -1]
    expected = torch.tensor([-4.0, 1.0, 0.35, 2.5, -0.35], dtype=torch.float64)
    torch.testing.assert_close(ties(TAUS, MergeConfig(lam=1.0, top_k=100.0)), expected)


def test_elect_sign_resolves_zero_sums_to_majority_then_positive():
    negative_majority = torch.tensor([[-1.0, -1.0, -1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])
    torch.testing.assert_close(elect_sign(negative_majority), torch.tensor([-1.0, -1.0, -1.0, 1.0]))
    balanced = torch.tensor([[-1.0, -1.0, 1.0], [1.0, -1.0, 0.0]])  # signs [0, -1, +1], majority 0
    torch.testing.assert_close(elect_sign(balanced), torch.tensor([1.0, -1.0, 1.0]))


def test_disjoint_merge_counts_only_kept_nonzero_entries():
    trimmed = torch.tensor([[2.0, 0.0, -1.0], [4.0, 0.0, 3.0], [0.0, 5.0, 1.0]])
    sign = torch.tensor([1.0, 1.0, 1.0])
    torch.testing.assert_close(disjoint_merge(trimmed, sign, "mean"), torch.tensor([3.0, 5.0, 2.0]))
    torch.testing.assert_close(disjoint_merge(trimmed, sign, "sum"), torch.tensor([6.0, 5.0, 4.0]))


def test_dare_with_p0_equals_ties():
    cfg = MergeConfig(lam=0.7, top_k=60.0, dare_p=0.0)
    torch.testing.assert_close(dare_ties(TAUS, cfg), ties(TAUS, cfg))


def test_dare_rescale_preserves_expectation():
    tv = torch.randn(1, 300, generator=torch.Generator().manual_seed(1), dtype=torch.float64) + 3.0
    repeats = 4000
    dropped = dare_drop(tv.expand(repeats, -1).contiguous(), 0.7, torch.Generator().manual_seed(2))
    assert abs(float((dropped == 0).double().mean()) - 0.7) < 0.01
    # survivors are rescaled by 1/(1-p); the Monte-Carlo mean matches tau within ~6 standard errors
    stderr = tv.abs() * (0.7 / 0.3) ** 0.5 / repeats**0.5
    assert bool(((dropped.mean(dim=0, keepdim=True) - tv).abs() < 6 * stderr).all())


def test_dare_is_reproducible_and_needs_a_generator():
    cfg = MergeConfig(top_k=60.0, dare_p=0.5)
    a = dare_ties(TAUS, cfg, torch.Generator().manual_seed(3))
    b = dare_ties(TAUS, cfg, torch.Generator().manual_seed(3))
    torch.testing.assert_close(a, b)
    with pytest.raises(ValueError, match="Generator"):
        dare_ties(TAUS, cfg)


@pytest.mark.parametrize("kwargs", [{"top_k": 0.0}, {"top_k": 120.0}, {"dare_p": 1.0}, {"merge": "max"}])
def test_merge_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        MergeConfig(**kwargs)


def test_sign_conflict_rate_hand_example():
    tv = torch.tensor([[1.0, 1.0, 0.0, 2.0], [1.0, -1.0, 0.0, 0.0], [0.0, 0.0, 3.0, 0.0]])
    assert sign_conflict_rate(tv) == pytest.approx(0.5)  # shared: c0 (agree), c1 (conflict)
