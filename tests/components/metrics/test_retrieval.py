"""Zero-shot accuracy, ROC AUC and recall@k on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from components.metrics.retrieval import recall_at_k, roc_auc, zero_shot_accuracy


def test_zero_shot_accuracy() -> None:
    sim = np.array([[0.9, 0.1], [0.2, 0.3], [0.5, 0.4]])
    assert zero_shot_accuracy(sim, np.array([0, 1, 1])) == pytest.approx(2 / 3)


def test_roc_auc_counts_ordered_pairs_and_half_ties() -> None:
    assert roc_auc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])) == pytest.approx(0.75)
    assert roc_auc(np.array([1.0, 1.0]), np.array([1, 0])) == pytest.approx(0.5)
    from sklearn.metrics import roc_auc_score
    rng = np.random.default_rng(0)
    s, y = rng.integers(0, 5, 200).astype(float), rng.integers(0, 2, 200)
    assert roc_auc(s, y) == pytest.approx(roc_auc_score(y, s))
    with pytest.raises(ValueError, match="positive and one negative"):
        roc_auc(np.array([0.1, 0.2]), np.array([1, 1]))


def test_recall_at_k_with_ties() -> None:
    sim = np.array([[0.9, 0.1, 0.5], [0.7, 0.2, 0.7], [0.3, 0.6, 0.1]])
    truth = np.array([0, 2, 2])
    # ranks: 1; 1 (tied with item 0, none strictly higher); 3
    assert recall_at_k(sim, truth, 1) == pytest.approx(2 / 3)
    assert recall_at_k(sim, truth, 3) == 1.0
