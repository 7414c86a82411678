"""Scores of generated samples: distances by dimension, mass near modes, velocity-law and feature scores."""

import math

import pytest
import torch

from components.metrics.distributions import sliced_wasserstein, wasserstein_1d
from components.metrics.generation import feature_scores, mode_fractions, sample_distance, velocity_law_scores


def test_sample_distance_is_w1_in_one_dimension_and_sliced_otherwise():
    a = torch.tensor([[0.0], [1.0], [2.0]])
    assert sample_distance(a, a + 0.5) == pytest.approx(0.5)
    b = torch.randn(50, 1, generator=torch.Generator().manual_seed(0))
    assert sample_distance(a, b) == wasserstein_1d(a, b)
    x = torch.randn(40, 2, generator=torch.Generator().manual_seed(1))
    y = torch.randn(30, 2, generator=torch.Generator().manual_seed(2))
    assert sample_distance(x, y, 16, torch.Generator().manual_seed(3)) == sliced_wasserstein(
        x, y, 16, generator=torch.Generator().manual_seed(3)
    )
    assert sample_distance(x, x, 16, torch.Generator().manual_seed(3)) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="one D"):
        sample_distance(x, a)


def test_mode_fractions_known_answers():
    v = torch.tensor([-1.0, -0.9, 1.0, 5.0])
    assert mode_fractions(v, [-1.0, 1.0], 0.2) == [0.5, 0.25]
    assert mode_fractions(v[:, None], [0.0], 0.5) == [0.0]
    with pytest.raises(ValueError, match="radius"):
        mode_fractions(v, [0.0], 0.0)
    with pytest.raises(ValueError, match=r"\[N\] or \[N, 1\]"):
        mode_fractions(torch.zeros(3, 2), [0.0], 0.1)


def test_velocity_law_scores_of_a_point_mass_against_two_modes():
    truth = torch.tensor([[-1.0], [1.0]]).repeat(50, 1)
    point = torch.zeros(100, 1)
    s = velocity_law_scores(point, truth, [-1.0, 1.0], 0.3)
    assert s["distance_to_true"] == pytest.approx(1.0) and s["spread"] == 0.0 and s["mean_norm"] == 0.0
    assert s["min_mode_fraction"] == 0.0 and s["mode_fraction"] == 0.0
    s = velocity_law_scores(truth.clone(), truth, [-1.0, 1.0], 0.3)
    assert s["distance_to_true"] == 0.0 and s["min_mode_fraction"] == 0.5 and s["mode_fraction"] == 1.0
    unknown = velocity_law_scores(torch.ones(3, 2), None, [], 0.3)
    assert math.isnan(unknown["distance_to_true"]) and math.isnan(unknown["min_mode_fraction"])
    assert unknown["mean_norm"] == pytest.approx(math.sqrt(2))


def test_feature_scores_of_real_and_confident_images():
    feats = torch.randn(200, 4, generator=torch.Generator().manual_seed(0))
    logits = 50.0 * torch.eye(4).repeat(50, 1)  # confident, balanced over 4 classes
    s = feature_scores(feats, logits, feats)
    assert s["fid"] == pytest.approx(0.0, abs=1e-8)
    assert s["confidence"] == pytest.approx(1.0) and s["inception_score"] == pytest.approx(4.0, rel=1e-6)
    flat = feature_scores(feats + 3.0, torch.zeros(200, 4), feats)
    assert flat["fid"] == pytest.approx(4 * 9.0, rel=1e-6)  # a shift of 3 in 4 dimensions, same covariance
    assert flat["confidence"] == pytest.approx(0.25) and flat["inception_score"] == pytest.approx(1.0)
