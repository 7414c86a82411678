"""Pearson and Kendall beside Spearman: known answers, ties, constant series."""

from __future__ import annotations

import math

import pytest

from components.metrics.stats import CORRELATIONS, kendall, pearson, spearman


def test_known_answers() -> None:
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # x = 1..4, y = 1, 3, 2, 4: 5 concordant and 1 discordant pair -> tau = 4/6
    assert kendall([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    # tau-b with y = 1, 1, 2, 0: pair (1, 2) tied in y, 2 concordant, 3 discordant -> (2 - 3) / sqrt(6 * 5)
    assert kendall([1, 2, 3, 4], [1, 1, 2, 0]) == pytest.approx((2 - 3) / math.sqrt(6 * 5))
    assert set(CORRELATIONS) == {"pearson", "spearman", "kendall"} and CORRELATIONS["spearman"] is spearman


def test_constant_series_and_bad_input() -> None:
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3])) and math.isnan(kendall([1, 2, 3], [5, 5, 5]))
    with pytest.raises(ValueError, match="need two paired series"):
        kendall([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="must be finite"):
        pearson([1, float("nan")], [1, 2])
