"""Continual-learning metrics from the accuracy matrix, as mammoth's ``utils/metrics.py`` defines them.

``R[i][j]`` is the accuracy (%) on task ``j`` after learning task ``i`` (``j <= i``; row ``i`` has ``i + 1``
entries). With ``T`` tasks:

* final average accuracy: ``mean_j R[T-1][j]``;
* forgetting: ``mean_{j < T-1} (max_i R[i][j] - R[T-1][j])``, the maximum over every row that has task ``j``
  (the last included, so each term is >= 0);
* backward transfer: ``mean_{j < T-1} (R[T-1][j] - R[j][j])``.

Forgetting and backward transfer are NaN for a single task (no old task to forget).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["backward_transfer", "final_average_accuracy", "forgetting"]

Matrix = Sequence[Sequence[float]]


def _check(matrix: Matrix) -> None:
    if not matrix or any(len(row) != i + 1 for i, row in enumerate(matrix)):
        raise ValueError(f"accuracy matrix rows must have 1, 2, ..., T entries, got lengths {[len(r) for r in matrix]}")


def final_average_accuracy(matrix: Matrix) -> float:
    """Mean accuracy over all tasks after the last one."""
    _check(matrix)
    return math.fsum(matrix[-1]) / len(matrix[-1])


def forgetting(matrix: Matrix) -> float:
    """Mean over the old tasks of (best accuracy ever reached - final accuracy)."""
    _check(matrix)
    last = len(matrix) - 1
    if last == 0:
        return math.nan
    drops = [max(matrix[i][j] for i in range(j, last + 1)) - matrix[last][j] for j in range(last)]
    return math.fsum(drops) / last


def backward_transfer(matrix: Matrix) -> float:
    """Mean over the old tasks of (final accuracy - accuracy right after learning the task)."""
    _check(matrix)
    last = len(matrix) - 1
    if last == 0:
        return math.nan
    return math.fsum(matrix[last][j] - matrix[j][j] for j in range(last)) / last
