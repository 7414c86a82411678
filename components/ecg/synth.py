"""Synthetic ECG sources.

* `deepfake_ecgs`: realistic unlabelled 10 s ECGs from the Pulse2Pulse generator of the ``deepfake-ecg`` package:
  noise U(-1, 1) of shape (B, 8, 5000) -> ``G(noise) * 6000``, 500 Hz, leads I, II, V1-V6 (taken as µV, returned
  in mV); III, aVR, aVL, aVF follow from I and II.
* `simulate_labelled`: labelled 10 s ECGs from a Gaussian-wave PQRST model (the brief's CPU reduction) with a
  rhythm class (sinus 60-100 bpm, bradycardia < 60, tachycardia > 100, AF-like: irregular RR and no P wave) and a
  form class (normal, wide QRS: Q/R/S Gaussian widths x ``WIDE``, inverted T: T amplitude negated). neurokit2's
  ECGSYN was the first choice, but its RR loop never returns for some draws (measured: 7 restarts in 100
  recordings even with heart_rate_std <= 3), so it is not used. One lead is simulated (taken as lead II); the
  12-lead layout is filled from it as projections of one cardiac dipole: lead k = g_k x signal,
  with fixed gains `LEAD_GAINS` jittered per recording (x U(0.8, 1.2)) plus independent white noise per lead.
  Leads therefore differ only in gain and noise; morphology differences between leads are not modelled.
"""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np

from components.ecg.preprocess import LEADS, limb_leads

RHYTHMS = ("sinus", "brady", "tachy", "af_like")
FORMS = ("normal", "wide_qrs", "inverted_t")
HEART_RATES = {"sinus": (60.0, 100.0), "brady": (40.0, 55.0), "tachy": (105.0, 150.0), "af_like": (70.0, 120.0)}
WIDE = 2.5
LEAD_GAINS = np.array([0.6, 1.0, 0.4, -0.8, 0.1, 0.7, -0.5, 0.3, 0.8, 1.2, 1.0, 0.8])


def deepfake_generator():
    """The packaged Pulse2Pulse generator with its weights, in eval mode on the CPU."""
    import torch

    from components.io import package_path

    weights = package_path(
        "deepfakeecg",
        "checkpoints/g_stat.pt",
        distribution="deepfake-ecg==1.1.2",
        needed_for="the unlabelled ECG source",
    )
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        import deepfakeecg

        generator = deepfakeecg.Generator()
    generator.load_state_dict(torch.load(weights, weights_only=True, map_location="cpu")["stat_dict"])
    return generator.eval()


def deepfake_ecgs(n: int, seed: int, batch: int = 64, generator=None) -> np.ndarray:
    """``n`` ECGs (n, 12, 5000) in mV at 500 Hz, standard lead order."""
    import torch

    g = generator if generator is not None else deepfake_generator()
    rng = torch.Generator().manual_seed(seed)
    out = np.zeros((n, len(LEADS), 5000), dtype=np.float32)
    with torch.no_grad():
        for i in range(0, n, batch):
            b = min(batch, n - i)
            eight = (g(torch.empty(b, 8, 5000).uniform_(-1, 1, generator=rng)) * 6000 / 1000).numpy()
            lead_i, lead_ii = eight[:, 0], eight[:, 1]
            out[i : i + b] = np.concatenate([eight[:, :2], np.stack(limb_leads(lead_i, lead_ii), 1), eight[:, 2:]], 1)
    return out


# Gaussian-wave PQRST model: (offset from R in s, amplitude in mV, width in s) of P, Q, R, S, T
WAVES = {
    "P": (-0.16, 0.15, 0.025),
    "Q": (-0.03, -0.10, 0.010),
    "R": (0.0, 1.0, 0.012),
    "S": (0.03, -0.25, 0.012),
    "T": (0.26, 0.30, 0.050),
}


def _rr_series(rhythm: str, rng: np.random.Generator, seconds: float = 11.0) -> np.ndarray:
    """R times (s) covering ``seconds``: sinus-like rhythms vary RR by 2 %, AF-like draws RR i.i.d. in
    [0.6, 1.4] x the mean (irregularly irregular)."""
    low, high = HEART_RATES[rhythm]
    mean_rr = 60.0 / rng.uniform(low, high)
    k = int(seconds / (0.6 * mean_rr)) + 2
    if rhythm == "af_like":
        rr = mean_rr * rng.uniform(0.6, 1.4, size=k)
    else:
        rr = mean_rr * (1 + 0.02 * rng.standard_normal(k))
    return rng.uniform(0, mean_rr) + np.concatenate([[0.0], np.cumsum(rr)[:-1]])


def gaussian_ecg(rhythm: str, form: str, fs: int, rng: np.random.Generator, seconds: int = 10) -> np.ndarray:
    """One lead (mV) of the Gaussian-wave model: every beat is a sum of P, Q, R, S, T Gaussians around its R time.
    AF-like: no P wave, small 4-8 Hz fibrillatory waves; wide QRS: Q/R/S widths x ``WIDE`` (offsets x 1.8);
    inverted T: T amplitude negated. Amplitudes and widths are jittered by +-15 % per recording."""
    t = np.arange(seconds * fs) / fs
    r_times = _rr_series(rhythm, rng, seconds + 1.0)
    sig = np.zeros_like(t)
    rr = float(np.median(np.diff(r_times)))
    for name, (offset, amp, width) in WAVES.items():
        if name == "P" and rhythm == "af_like":
            continue
        amp *= rng.uniform(0.85, 1.15)
        width *= rng.uniform(0.85, 1.15)
        if name in "QRS" and form == "wide_qrs":
            width, offset = width * WIDE, offset * 1.8
        if name == "T":
            offset *= np.sqrt(rr)
            amp = -amp if form == "inverted_t" else amp
        centres = r_times + offset
        centres = centres[(centres > -0.5) & (centres < seconds + 0.5)]
        sig += amp * np.exp(-0.5 * ((t[None, :] - centres[:, None]) / width) ** 2).sum(0)
    if rhythm == "af_like":
        sig += 0.05 * np.sin(2 * np.pi * rng.uniform(4, 8) * t + rng.uniform(0, 6.3))
    return sig


def _one(args: tuple[str, str, int, float, tuple[int, ...]]) -> np.ndarray:
    """One labelled 12-lead recording, seeded by ``key``."""
    rhythm, form, fs, noise, key = args
    rng = np.random.default_rng(key)
    sig = gaussian_ecg(rhythm, form, fs, rng)
    gains = LEAD_GAINS * rng.uniform(0.8, 1.2, size=len(LEADS))
    wander = 0.1 * np.sin(2 * np.pi * rng.uniform(0.05, 0.3) * np.arange(10 * fs) / fs + rng.uniform(0, 6.3))
    return (gains[:, None] * sig[None] + wander[None] + noise * rng.standard_normal((len(LEADS), 10 * fs))).astype(
        np.float32
    )


def simulate_labelled(
    n: int, seed: int, fs: int = 100, noise: float = 0.03
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x (n, 12, 10 fs) in mV, rhythm class (n,), form class (n,))``; classes drawn uniformly and independently."""
    rng = np.random.default_rng(seed)
    rhythm = rng.integers(len(RHYTHMS), size=n)
    form = rng.integers(len(FORMS), size=n)
    x = (
        np.stack([_one((RHYTHMS[rhythm[i]], FORMS[form[i]], fs, noise, (seed, i))) for i in range(n)])
        if n
        else np.zeros((0, len(LEADS), 10 * fs), np.float32)
    )
    return x, rhythm.astype(np.int64), form.astype(np.int64)
