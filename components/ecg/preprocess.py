"""Preprocessing of 12-lead ECGs as in HeartLang's dataset scripts: NaN fill, resampling to 100 Hz, the
standard lead order (I, II, III, aVR, aVL, aVF, V1-V6) and a zero-phase Butterworth band-pass 0.67-40 Hz of
order 5 (``scipy.signal.filtfilt``). Everything works on arrays ``(N, leads, T)`` at once.

:class:`Standardiser` is the PTB-XL benchmark's standardisation (``ecg_ptbxl_benchmarking``, ``apply_standardizer``:
one mean and one standard deviation over every sample of the training split, applied to every split), which
HeartLang tokenizes as it is; leads without a signal (all zero: absent from a record) stay zero."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import signal

LEADS = ("I", "II", "III", "aVR", "aVL", "aVF", "V1", "V2", "V3", "V4", "V5", "V6")
TARGET_FS = 100
BAND = (0.67, 40.0)
ORDER = 5


def fill_nan(x: np.ndarray) -> np.ndarray:
    """Linear interpolation of NaNs along time per lead (constant at the ends); an all-NaN lead becomes 0."""
    x = np.array(x, dtype=np.float64, copy=True)
    flat = x.reshape(-1, x.shape[-1])
    bad = np.isnan(flat)
    for row in np.flatnonzero(bad.any(axis=1)):
        ok = ~bad[row]
        if not ok.any():
            flat[row] = 0.0
            continue
        t = np.arange(flat.shape[1])
        flat[row, ~ok] = np.interp(t[~ok], t[ok], flat[row, ok])
    return flat.reshape(x.shape)


def reorder_leads(x: np.ndarray, names: Sequence[str]) -> np.ndarray:
    """``x`` (N, len(names), T) in the standard order; a lead missing from ``names`` is all zeros.
    Names match case-insensitively (``AVR`` = ``aVR``)."""
    index = {n.strip().lower(): i for i, n in enumerate(names)}
    out = np.zeros((x.shape[0], len(LEADS), x.shape[-1]), dtype=x.dtype)
    for k, lead in enumerate(LEADS):
        if lead.lower() in index:
            out[:, k] = x[:, index[lead.lower()]]
    return out


def resample(x: np.ndarray, fs: float, target_fs: int = TARGET_FS) -> np.ndarray:
    """Polyphase resampling along the last axis from ``fs`` to ``target_fs`` (identity when equal)."""
    if fs == target_fs:
        return x
    ratio = Fraction(target_fs / fs).limit_denominator(1000)
    return signal.resample_poly(x, ratio.numerator, ratio.denominator, axis=-1)


def bandpass(x: np.ndarray, fs: float = TARGET_FS, band: tuple[float, float] = BAND, order: int = ORDER) -> np.ndarray:
    """Zero-phase Butterworth band-pass (``filtfilt``) along the last axis."""
    b, a = signal.butter(order, band, btype="bandpass", fs=fs)
    return signal.filtfilt(b, a, x, axis=-1)


def preprocess(x: np.ndarray, fs: float, names: Sequence[str] = LEADS, target_fs: int = TARGET_FS) -> np.ndarray:
    """The whole chain: ``(N, leads, T)`` at ``fs`` with lead ``names`` -> float32 ``(N, 12, T')`` at ``target_fs``."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 3 or x.shape[1] != len(names):
        raise ValueError(f"expected (N, {len(names)}, T), got {x.shape}")
    x = reorder_leads(fill_nan(x), names)
    return bandpass(resample(x, fs, target_fs), target_fs).astype(np.float32)


def limb_leads(lead_i: np.ndarray, lead_ii: np.ndarray) -> tuple[np.ndarray, ...]:
    """III, aVR, aVL, aVF from I and II (Einthoven / Goldberger)."""
    return lead_ii - lead_i, -(lead_i + lead_ii) / 2, lead_i - lead_ii / 2, lead_ii - lead_i / 2


@dataclass(frozen=True)
class Standardiser:
    """``(x - mean) / std`` with one mean and one standard deviation over every sample of the leads that carry a
    signal (not all zero) of a training set; those leads of any set are standardised, the others stay zero."""

    mean: float
    std: float

    @classmethod
    def fit(cls, x: np.ndarray) -> Standardiser:
        x = np.asarray(x, dtype=np.float64)
        signal_leads = x[np.abs(x).max(axis=-1) > 0]
        if signal_leads.size == 0:
            return cls(0.0, 1.0)
        std = float(signal_leads.std())
        return cls(float(signal_leads.mean()), std if std > 0 else 1.0)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        has_signal = (np.abs(x).max(axis=-1) > 0)[..., None]
        return np.where(has_signal, (x - self.mean) / self.std, 0.0).astype(np.float32)
