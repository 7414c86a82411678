"""Wasserstein (exact 1-D), sliced Wasserstein, Fréchet distance, Inception-style score and order flips:
known answers and agreement with scipy."""

import math

import pytest
import torch
from scipy.stats import wasserstein_distance

from components.metrics.distributions import (
    frechet_distance,
    frechet_distance_from_stats,
    inception_score,
    order_flip_fraction,
    sliced_wasserstein,
    wasserstein_1d,
)


# ---- 1-D Wasserstein -----------------------------------------------------------------------------
@pytest.mark.parametrize("p", [1.0, 2.0, 3.0])
def test_shifted_point_masses_are_at_the_shift(p):
    assert wasserstein_1d(torch.zeros(7), torch.full((3,), 2.5), p) == pytest.approx(2.5)
    assert wasserstein_1d(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([3.0, 1.0, 2.0]), p) == 0.0


def test_hand_computed_unequal_sizes():
    # a = {0, 1} (1/2 each), b = {0, 0, 3} (1/3 each): quantile gaps 0 on [0, 1/2), 1 on [1/2, 2/3), 2 on [2/3, 1]
    a, b = torch.tensor([0.0, 1.0]), torch.tensor([0.0, 0.0, 3.0])
    assert wasserstein_1d(a, b) == pytest.approx(1 / 6 + 2 / 3)
    assert wasserstein_1d(a, b, p=2) == pytest.approx(math.sqrt(1 / 6 + 4 / 3))


@pytest.mark.parametrize("n,m", [(200, 200), (300, 170), (1, 50)])
def test_w1_agrees_with_scipy(n, m):
    gen = torch.Generator().manual_seed(n + m)
    a, b = torch.randn(n, generator=gen), 3 * torch.rand(m, 1, generator=gen)
    assert wasserstein_1d(a, b) == pytest.approx(wasserstein_distance(a.numpy(), b[:, 0].numpy()), rel=1e-9)
    assert wasserstein_1d(a, b) == pytest.approx(wasserstein_1d(b, a))


def test_bad_inputs():
    with pytest.raises(ValueError, match="non-empty"):
        wasserstein_1d(torch.zeros(0), torch.zeros(3))
    with pytest.raises(ValueError, match=r"\[N\]"):
        wasserstein_1d(torch.zeros(3, 2), torch.zeros(3))
    with pytest.raises(ValueError, match="p must be"):
        wasserstein_1d(torch.zeros(3), torch.zeros(3), p=0.5)


# ---- sliced Wasserstein --------------------------------------------------------------------------
def test_sliced_identical_sets_is_zero_and_a_shift_gives_its_average_projection():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(500, 2, generator=gen)
    assert sliced_wasserstein(x, x, 50, generator=gen) == pytest.approx(0.0, abs=1e-12)
    assert sliced_wasserstein(x, x[torch.randperm(500, generator=gen)], 50, generator=gen) == pytest.approx(
        0.0, abs=1e-12
    )
    # a translation by c moves every projection by <c, theta>: SW2^2 = E[<c, theta>^2] = |c|^2 / D
    shift = torch.tensor([3.0, 4.0])
    value = sliced_wasserstein(x, x + shift, 4000, generator=torch.Generator().manual_seed(1))
    assert value == pytest.approx(5.0 / math.sqrt(2), rel=0.03)
    # SW1 of the same translation: E|<c, theta>| = 2|c|/pi in 2-D
    value = sliced_wasserstein(x, x + shift, 4000, p=1.0, generator=torch.Generator().manual_seed(1))
    assert value == pytest.approx(2 * 5.0 / math.pi, rel=0.03)


def test_sliced_one_dimensional_is_the_exact_distance_and_seeded():
    gen = torch.Generator().manual_seed(2)
    a, b = torch.randn(100, 1, generator=gen), torch.rand(80, 1, generator=gen)
    assert sliced_wasserstein(a, b, 3, p=1.0) == pytest.approx(wasserstein_1d(a, b))
    x, y = torch.randn(50, 3, generator=gen), torch.randn(60, 3, generator=gen)
    one = sliced_wasserstein(x, y, 20, generator=torch.Generator().manual_seed(5))
    assert one == sliced_wasserstein(x, y, 20, generator=torch.Generator().manual_seed(5))
    with pytest.raises(ValueError, match="point sets"):
        sliced_wasserstein(x, y[:, :2])


# ---- Fréchet distance ----------------------------------------------------------------------------
def test_frechet_known_gaussians():
    mu_a, mu_b = torch.tensor([0.0, 1.0]), torch.tensor([3.0, -3.0])
    cov_a, cov_b = torch.diag(torch.tensor([4.0, 1.0])), torch.diag(torch.tensor([1.0, 9.0]))
    # diagonal covariances: |mu_a - mu_b|^2 + sum (sqrt(a_i) - sqrt(b_i))^2
    assert frechet_distance_from_stats(mu_a, cov_a, mu_b, cov_b) == pytest.approx(25.0 + 1.0 + 4.0)
    rot = torch.tensor([[0.6, -0.8], [0.8, 0.6]])
    cov = rot @ torch.diag(torch.tensor([2.0, 0.5])) @ rot.T
    assert frechet_distance_from_stats(mu_a, cov, mu_a, cov) == pytest.approx(0.0, abs=1e-9)


def test_frechet_of_feature_sets():
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(4000, 3, generator=gen)
    assert frechet_distance(x, x) == pytest.approx(0.0, abs=1e-9)
    y = torch.randn(4000, 3, generator=gen) * 2 + torch.tensor([1.0, 0.0, 0.0])
    # N(0, I) vs N(e1, 4I): 1 + 3 * (1 - 2)^2 = 4
    assert frechet_distance(x, y) == pytest.approx(4.0, rel=0.05)
    with pytest.raises(ValueError, match="two samples"):
        frechet_distance(x[:1], y)


# ---- Inception-style score and order flips -------------------------------------------------------
def test_inception_score_extremes():
    assert inception_score(torch.full((6, 3), 1 / 3)) == pytest.approx(1.0)
    assert inception_score(torch.eye(4).repeat(2, 1)) == pytest.approx(4.0, rel=1e-6)
    assert inception_score(torch.eye(4)[[0, 0, 0, 0]]) == pytest.approx(1.0, rel=1e-6)


def test_order_flip_fraction_known_answers():
    x = torch.tensor([0.0, 1.0, 2.0, 3.0])
    assert order_flip_fraction(x, 2 * x + 1) == 0.0
    assert order_flip_fraction(x, -x) == 1.0
    assert order_flip_fraction(x, torch.tensor([1.0, 0.0, 2.0, 3.0])) == pytest.approx(1 / 6)  # one of six pairs
    assert order_flip_fraction(x, torch.zeros(4)) == 0.0  # ties are not flips
    gen = torch.Generator().manual_seed(4)
    a, b = torch.randn(3000, generator=gen), torch.randn(3000, 1, generator=gen)
    assert order_flip_fraction(a, b, chunk=700) == pytest.approx(0.5, abs=0.02)  # independent: 1/2
    with pytest.raises(ValueError, match="same N"):
        order_flip_fraction(a, b[:10])
