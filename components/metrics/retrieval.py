"""Scores of a similarity matrix: zero-shot accuracy, ROC AUC of a detection score, and recall@k.

- ``zero_shot_accuracy(sim [n, C], labels [n])``: mean of argmax_c sim_ic == label_i.
- ``roc_auc(scores [n], positive [n])``: P(score of a positive > score of a negative) + P(tie) / 2 (the
  Mann-Whitney statistic, equal to the area under the ROC curve).
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


def roc_auc(scores: np.ndarray, positive: np.ndarray) -> float:
    scores, positive = np.asarray(scores, dtype=np.float64), np.asarray(positive, dtype=bool)
    if scores.shape != positive.shape or scores.ndim != 1:
        raise ValueError(f"need scores [n] and positive [n], got {scores.shape} and {positive.shape}")
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("ROC AUC needs at least one positive and one negative")
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    # average ranks of tied scores (1-based)
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    avg = first + (counts + 1) / 2.0
    ranks[order] = np.repeat(avg, counts)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def recall_at_k(sim: np.ndarray, truth: np.ndarray, k: int) -> float:
    sim, truth = np.asarray(sim), np.asarray(truth)
    if sim.ndim != 2 or truth.shape != (sim.shape[0],) or k < 1:
        raise ValueError(f"need sim [n, m], truth [n] and k >= 1, got {sim.shape}, {truth.shape}, {k}")
    true_score = sim[np.arange(len(truth)), truth]
    rank = 1 + (sim > true_score[:, None]).sum(1)
    return float((rank <= k).mean())
