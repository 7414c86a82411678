"""roc_auc: the Mann-Whitney statistic with half credit for ties, against hand counts and scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest

from components.metrics.ranking import roc_auc


def test_roc_auc_counts_ordered_pairs_and_half_ties() -> None:
    assert roc_auc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])) == pytest.approx(0.75)
    assert roc_auc(np.array([1.0, 1.0]), np.array([1, 0])) == pytest.approx(0.5)
    from sklearn.metrics import roc_auc_score
    rng = np.random.default_rng(0)
    s, y = rng.integers(0, 5, 200).astype(float), rng.integers(0, 2, 200)
    assert roc_auc(s, y) == pytest.approx(roc_auc_score(y, s))
    assert np.isnan(roc_auc(np.array([0.1, 0.2]), np.array([1, 1])))  # one class empty: undefined
