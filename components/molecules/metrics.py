"""MoleculeACE's metrics (``MoleculeACE/benchmark/utils.py``): RMSE on all test molecules and RMSE_cliff.

``RMSE_cliff`` is the RMSE over the test molecules whose ``cliff_mol`` flag is 1 (the flag as given, which
MoleculeACE computed on train + test together); a test set without a cliff molecule gives NaN, as
MoleculeACE's mean over an empty selection does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def rmse(y_true: Sequence[float], y_pred: Sequence[float]) -> float:
    """``sqrt(mean((y_true - y_pred)^2))``; NaN for no values."""
    t, p = np.asarray(y_true, dtype=np.float64), np.asarray(y_pred, dtype=np.float64)
    if t.shape != p.shape or t.ndim != 1:
        raise ValueError(f"rmse needs two 1-D arrays of one length, got {t.shape} and {p.shape}")
    return float(np.sqrt(np.mean(np.square(t - p)))) if t.size else math.nan


def rmse_cliff(y_pred: Sequence[float], y_true: Sequence[float], cliff_mols: Sequence[int]) -> float:
    """RMSE over the molecules with ``cliff_mols == 1`` (MoleculeACE's ``calc_cliff_rmse`` argument order)."""
    flags = np.asarray(cliff_mols)
    if flags.shape != np.shape(y_true) or not np.isin(flags, (0, 1)).all():
        raise ValueError("cliff_mols must be 0/1 flags, one per molecule")
    keep = flags == 1
    return rmse(np.asarray(y_true, dtype=np.float64)[keep], np.asarray(y_pred, dtype=np.float64)[keep])


def loss_ratio(squared_errors: Sequence[float], cliff_mols: Sequence[int]) -> float:
    """Mean squared error of the cliff molecules / that of the other molecules (the underfitting diagnostic:
    > 1 when cliff molecules keep a higher training loss); NaN when either group is empty or the denominator
    is 0."""
    e, flags = np.asarray(squared_errors, dtype=np.float64), np.asarray(cliff_mols)
    if e.shape != flags.shape:
        raise ValueError(f"{e.shape[0]} errors but {flags.shape[0]} flags")
    cliff, other = e[flags == 1], e[flags == 0]
    if not cliff.size or not other.size or other.mean() == 0:
        return math.nan
    return float(cliff.mean() / other.mean())
