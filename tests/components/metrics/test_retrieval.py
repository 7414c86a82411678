"""Zero-shot accuracy, ROC AUC and recall@k on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from components.metrics.retrieval import recall_at_k, zero_shot_accuracy


def test_zero_shot_accuracy() -> None:
    sim = np.array([[0.9, 0.1], [0.2, 0.3], [0.5, 0.4]])
    assert zero_shot_accuracy(sim, np.array([0, 1, 1])) == pytest.approx(2 / 3)


def test_recall_at_k_with_ties() -> None:
    sim = np.array([[0.9, 0.1, 0.5], [0.7, 0.2, 0.7], [0.3, 0.6, 0.1]])
    truth = np.array([0, 2, 2])
    # ranks: 1; 1 (tied with item 0, none strictly higher); 3
    assert recall_at_k(sim, truth, 1) == pytest.approx(2 / 3)
    assert recall_at_k(sim, truth, 3) == 1.0
