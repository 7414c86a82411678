"""A small WFDB record in the exact format PhysioNet distributes the MIT-BIH Arrhythmia Database in: two signals
(``MLII``, a modified lead II, and ``V1``) at 360 Hz in format 212 (12-bit, 200 adu/mV, baseline 1024), with a
``.atr`` reference annotation file that opens with a rhythm annotation (``+``, aux ``(N``) and marks every beat
(``N``, one ``V``). The signal is a sum of Gaussian P, Q, R, S and T waves on a wandering baseline."""

from __future__ import annotations

from pathlib import Path

import numpy as np

FS = 360


def _wave(t: np.ndarray, centre: float, amplitude: float, width: float) -> np.ndarray:
    return amplitude * np.exp(-0.5 * ((t - centre) / width) ** 2)


def write_mitbih_like(folder: Path, name: str = "100", seconds: int = 30, seed: int = 0) -> np.ndarray:
    """Write ``<name>.hea/.dat/.atr`` into ``folder``; returns the annotated beat samples."""
    import wfdb

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    n = seconds * FS
    t = np.arange(n) / FS
    rr = rng.normal(0.82, 0.04, seconds * 2)
    beats = 0.5 + np.concatenate([[0.0], np.cumsum(rr)])
    beats = beats[beats < seconds - 0.5]
    ventricular = len(beats) // 2  # one premature ventricular beat: wide, no P wave
    beats[ventricular] -= 0.2
    lead_ii = 0.08 * np.sin(2 * np.pi * 0.25 * t)
    lead_v1 = 0.05 * np.sin(2 * np.pi * 0.31 * t + 1.0)
    for k, r in enumerate(beats):
        wide = 2.5 if k == ventricular else 1.0
        p_wave = 0.0 if k == ventricular else 1.0
        lead_ii += (
            _wave(t, r - 0.16, 0.12 * p_wave, 0.025)
            + _wave(t, r - 0.03, -0.12, 0.008 * wide)
            + _wave(t, r, 1.1, 0.011 * wide)
            + _wave(t, r + 0.035, -0.25, 0.01 * wide)
            + _wave(t, r + 0.28, 0.3, 0.045)
        )
        lead_v1 += (
            _wave(t, r - 0.16, 0.05 * p_wave, 0.025)
            + _wave(t, r, 0.25, 0.008 * wide)
            + _wave(t, r + 0.03, -0.9, 0.014 * wide)
            + _wave(t, r + 0.28, -0.1, 0.05)
        )
    signal = np.stack([lead_ii, lead_v1], axis=1) + rng.normal(0, 0.01, (n, 2))
    wfdb.wrsamp(
        name,
        fs=FS,
        units=["mV", "mV"],
        sig_name=["MLII", "V1"],
        p_signal=signal,
        fmt=["212", "212"],
        adc_gain=[200.0, 200.0],
        baseline=[1024, 1024],
        write_dir=str(folder),
    )
    samples = np.round(beats * FS).astype(np.int64)
    symbols = ["V" if k == ventricular else "N" for k in range(len(samples))]
    wfdb.wrann(
        name,
        "atr",
        np.concatenate([[18], samples]),
        symbol=["+", *symbols],
        aux_note=["(N", *[""] * len(samples)],
        write_dir=str(folder),
    )
    return samples
