"""Scores of a similarity matrix: zero-shot accuracy and recall@k (the ROC AUC of a detection score is
``components.metrics.ranking.roc_auc``).

- ``zero_shot_accuracy(sim [n, C], labels [n])``: mean of argmax_c sim_ic == label_i.
- ``recall_at_k(sim [n, m], truth [n], k)``: fraction of queries whose true item's rank is <= k, the rank being
  1 + the number of items scored strictly higher (items tied with the truth, e.g. identical captions, do not
  push it down).
numpy only.
"""

from __future__ import annotations

import numpy as np


def zero_shot_accuracy(sim: np.ndarray, labels: np.ndarray) -> float:
    sim, labels = np.asarray(sim), np.asarray(labels)
    if sim.ndim != 2 or labels.shape != (sim.shape[0],):
        raise ValueError(f"need sim [n, C] and labels [n], got {sim.shape} and {labels.shape}")
    return float((sim.argmax(1) == labels).mean())


def recall_at_k(sim: np.ndarray, truth: np.ndarray, k: int) -> float:
    sim, truth = np.asarray(sim), np.asarray(truth)
    if sim.ndim != 2 or truth.shape != (sim.shape[0],) or k < 1:
        raise ValueError(f"need sim [n, m], truth [n] and k >= 1, got {sim.shape}, {truth.shape}, {k}")
    true_score = sim[np.arange(len(truth)), truth]
    rank = 1 + (sim > true_score[:, None]).sum(1)
    return float((rank <= k).mean())
