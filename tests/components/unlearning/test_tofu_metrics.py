"""TOFU's metrics on hand-computed values (open-unlearning's definitions)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from components.unlearning.tofu_metrics import (
    closer_to_1_better,
    forget_quality,
    model_utility,
    probability,
    probability_with_options,
    rouge_l_recall,
    true_better,
    truth_ratio,
)


def test_probability_and_truth_ratio_by_hand() -> None:
    assert probability(np.array([0.0, math.log(2)])) == pytest.approx([1.0, 0.5])
    # correct (paraphrased) mean NLL ln 2 -> p 0.5; wrong NLLs ln 4 and ln 16 -> mean ln 8 -> p 1/8; tr = 0.25
    tr = truth_ratio(np.array([math.log(2)]), np.array([[math.log(4), math.log(16)]]))
    assert tr == pytest.approx([0.25], rel=1e-6)
    assert closer_to_1_better(np.array([0.25, 4.0, 1.0])) == pytest.approx((0.25 + 0.25 + 1.0) / 3, rel=1e-6)
    assert true_better(np.array([0.25, 4.0, 1.0])) == pytest.approx((0.75 + 0 + 0) / 3)
    # options: p(correct) 0.5, wrong 0.25 + 0.125 -> 0.5 / 0.875
    assert probability_with_options(np.array([math.log(2)]), np.array([[math.log(4), math.log(8)]])) == pytest.approx(
        [0.5 / 0.875]
    )


def test_forget_quality_is_the_ks_p_value() -> None:
    same = forget_quality([0.1, 0.2, 0.3, 0.4], [0.1, 0.2, 0.3, 0.4])
    assert same == pytest.approx(1.0)
    apart = forget_quality([0.1, 0.2, 0.3, 0.4, 0.5], [1.1, 1.2, 1.3, 1.4, 1.5])
    assert apart == pytest.approx(2 / math.comb(10, 5))  # exact two-sided p of complete separation, n = m = 5
    with pytest.raises(ValueError, match="retain model"):
        forget_quality([0.1], [])


def test_model_utility_is_the_harmonic_mean() -> None:
    assert model_utility({"a": 0.5, "b": 1.0}) == pytest.approx(2 / (1 / 0.5 + 1 / 1.0))
    assert model_utility({"a": 0.0, "b": 1.0}) == 0.0
    with pytest.raises(ValueError):
        model_utility({"a": float("nan")})


def test_rouge_l_recall_uses_stemming() -> None:
    # "cats" stems to "cat": the LCS with "the cat sits on the mat" is "the cat", 2 of 6 reference words
    # (1 of 6 without stemming)
    assert rouge_l_recall(["the cats sat"], ["the cat sits on the mat"]) == pytest.approx([2 / 6])
    assert rouge_l_recall(["Lisbon. Then more words"], ["Lisbon."]) == pytest.approx([1.0])
    assert rouge_l_recall([""], ["Lisbon."]) == [0.0]
