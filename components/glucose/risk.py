"""Glycaemic outcome metrics of BG traces: time in range and the Kovatchev risk indices.

Kovatchev's symmetrised BG scale (BG in mg/dL)::

    f(BG) = 1.509 (ln(BG)^1.084 - 5.381),   r(BG) = 10 f(BG)^2
    rl = r if f < 0 else 0,   rh = r if f > 0 else 0

Two averaging conventions exist and are both offered (``RISK_CONVENTIONS``):

* ``kovatchev`` (the published definition): LBGI = mean of rl over *all* readings, HBGI = mean of rh
  over all readings, so a short dip below the safe zone gives a small LBGI;
* ``simglucose`` (``simglucose.analysis.risk.risk_index``): the mean of rl over the low readings only
  (and rh over the high ones), 0 when there are none.

The two agree when every reading is on one side of f = 0 (BG ~ 112.5 mg/dL), and in general
``kovatchev = simglucose * share of readings on that side``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def time_in_range(bg: np.ndarray, low: float = 70.0, high: float = 180.0) -> np.ndarray:
    """Share of readings with ``low <= BG <= high``; bg (..., T) -> (...,) in [0, 1]."""
    bg = np.asarray(bg, dtype=np.float64)
    return np.mean((bg >= low) & (bg <= high), axis=-1)


def _risk_parts(bg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    bg = np.asarray(bg, dtype=np.float64)
    if np.any(~np.isfinite(bg)) or np.any(bg <= 0):
        raise ValueError("BG readings must be finite and > 0 mg/dL")
    f = 1.509 * (np.log(bg) ** 1.084 - 5.381)
    r = 10.0 * f**2
    return np.where(f < 0, r, 0.0), np.where(f > 0, r, 0.0)


def _kovatchev(bg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rl, rh = _risk_parts(bg)
    return rl.mean(axis=-1), rh.mean(axis=-1)


def _simglucose(bg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rl, rh = _risk_parts(bg)
    bg = np.asarray(bg, dtype=np.float64)
    f = 1.509 * (np.log(bg) ** 1.084 - 5.381)
    n_low, n_high = (f < 0).sum(axis=-1), (f > 0).sum(axis=-1)
    lbgi = np.where(n_low > 0, rl.sum(axis=-1) / np.maximum(n_low, 1), 0.0)
    hbgi = np.where(n_high > 0, rh.sum(axis=-1) / np.maximum(n_high, 1), 0.0)
    return lbgi, hbgi


RISK_CONVENTIONS: dict[str, Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]] = {
    "kovatchev": _kovatchev,
    "simglucose": _simglucose,
}


def risk_indices(bg: np.ndarray, convention: str = "kovatchev") -> tuple[np.ndarray, np.ndarray]:
    """(LBGI, HBGI) of BG traces bg (..., T) mg/dL, each (...,); see the module docstring."""
    if convention not in RISK_CONVENTIONS:
        raise KeyError(f"unknown risk convention {convention!r}; choose from {sorted(RISK_CONVENTIONS)}")
    return RISK_CONVENTIONS[convention](bg)
