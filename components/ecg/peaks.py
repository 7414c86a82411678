"""R-peak detectors with one signature, ``detect(signal_1d, fs) -> int64 sample indices`` (sorted, unique).

``xqrs`` is ``wfdb.processing.xqrs_detect`` (the official tokenizer's choice); ``neurokit`` is
``neurokit2.ecg_peaks`` on the cleaned signal. `detect_r_peaks` runs the chosen detector on one lead of every
recording and falls back to neurokit2 where it finds fewer than two peaks."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import numpy as np

Detector = Callable[[np.ndarray, float], np.ndarray]
logging.getLogger("wfdb").setLevel(logging.ERROR)


def _clean(peaks: np.ndarray, n: int) -> np.ndarray:
    peaks = np.unique(np.asarray(peaks, dtype=np.int64))
    return peaks[(peaks >= 0) & (peaks < n)]


def xqrs(sig: np.ndarray, fs: float) -> np.ndarray:
    """``wfdb.processing.xqrs_detect`` (silent); an empty array when the signal is flat."""
    from wfdb.processing import xqrs_detect

    sig = np.asarray(sig, dtype=np.float64)
    if not np.isfinite(sig).all() or np.ptp(sig) == 0:
        return np.zeros(0, dtype=np.int64)
    return _clean(xqrs_detect(sig, fs=fs, verbose=False), len(sig))


def neurokit(sig: np.ndarray, fs: float) -> np.ndarray:
    """``neurokit2.ecg_peaks`` (neurokit method) on ``ecg_clean``; empty when it finds nothing."""
    import neurokit2 as nk

    sig = np.asarray(sig, dtype=np.float64)
    if not np.isfinite(sig).all() or np.ptp(sig) == 0:
        return np.zeros(0, dtype=np.int64)
    try:
        _, info = nk.ecg_peaks(nk.ecg_clean(sig, sampling_rate=int(fs)), sampling_rate=int(fs))
    except (ValueError, IndexError, ZeroDivisionError):
        return np.zeros(0, dtype=np.int64)
    return _clean(info["ECG_R_Peaks"], len(sig))


DETECTORS: dict[str, Detector] = {"xqrs": xqrs, "neurokit": neurokit}


def detect_one(sig: np.ndarray, fs: float, detector: str = "xqrs", fallback: str | None = "neurokit") -> np.ndarray:
    """Peaks of one signal; ``fallback`` where ``detector`` finds fewer than two."""
    peaks = DETECTORS[detector](sig, fs)
    if len(peaks) < 2 and fallback is not None and fallback != detector:
        other = DETECTORS[fallback](sig, fs)
        if len(other) > len(peaks):
            return other
    return peaks


def _detect_chunk(args: tuple[np.ndarray, float, str, str | None]) -> list[np.ndarray]:
    sigs, fs, detector, fallback = args
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    return [detect_one(s, fs, detector, fallback) for s in sigs]


def first_signal_lead(x: np.ndarray) -> np.ndarray:
    """Per recording of ``x`` (N, leads, T), the first lead that is not flat (lead I in the standard order when the
    recording has it; 0 when every lead is flat)."""
    live = np.ptp(np.asarray(x), axis=-1) > 0
    return np.where(live.any(axis=1), live.argmax(axis=1), 0)


def detect_r_peaks(
    x: np.ndarray,
    fs: float,
    detector: str = "xqrs",
    lead: int | None = 0,
    fallback: str | None = "neurokit",
    workers: int = 1,
) -> list[np.ndarray]:
    """R peaks of every recording of ``x`` (N, leads, T) on lead ``lead`` (0 = lead I in the standard order);
    ``lead=None``: on each recording's first lead with a signal (:func:`first_signal_lead`: lead I where present,
    so the official choice, and a record without lead I, such as a two-lead Holter, still gives its beats).

    ``workers`` > 1 splits the recordings over a process pool (same result, recordings are independent)."""
    if detector not in DETECTORS:
        raise ValueError(f"unknown detector {detector!r}; one of {sorted(DETECTORS)}")
    x = np.asarray(x)
    sigs = x[:, lead] if lead is not None else x[np.arange(len(x)), first_signal_lead(x)]
    if workers <= 1 or len(sigs) < 2 * workers:
        return _detect_chunk((sigs, fs, detector, fallback))
    chunks = np.array_split(sigs, workers * 4)
    with ProcessPoolExecutor(workers) as pool:
        parts = pool.map(_detect_chunk, [(c, fs, detector, fallback) for c in chunks])
    return [p for part in parts for p in part]
