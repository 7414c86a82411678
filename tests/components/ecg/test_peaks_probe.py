"""R-peak detectors (registry, fallback) and the linear probe (label subsets, macro AUC)."""

from __future__ import annotations

import numpy as np

from components.ecg.peaks import DETECTORS, detect_r_peaks
from components.ecg.probe import label_subset, linear_probe, macro_auc, one_hot


def _spikes(n: int = 1000, every: int = 80) -> tuple[np.ndarray, np.ndarray]:
    """A QRS-like train: narrow Gaussian spikes every ``every`` samples at 100 Hz."""
    t = np.arange(n)
    where = np.arange(40, n - 20, every)
    sig = sum(np.exp(-0.5 * ((t - r) / 1.5) ** 2) for r in where) + 0.01 * np.sin(t / 7)
    return sig, where


def test_detectors_share_one_signature_and_find_the_beats() -> None:
    sig, where = _spikes()
    for name, detect in DETECTORS.items():
        found = detect(sig, 100)
        assert found.dtype == np.int64, name
        hits = sum(np.abs(found - r).min() <= 8 for r in where[1:-1])  # xqrs marks ~60 ms early here
        assert hits >= len(where) - 3, (name, found, where)


def test_flat_lead_gives_no_peaks_and_lead_choice_is_respected() -> None:
    sig, _ = _spikes()
    x = np.stack([np.zeros_like(sig), sig])[None]
    assert len(detect_r_peaks(x, 100, lead=0)[0]) == 0
    assert len(detect_r_peaks(x, 100, lead=1)[0]) >= 10


def test_label_subset_holds_every_class() -> None:
    y = one_hot(np.repeat(np.arange(4), 50), 4)
    pick = label_subset(y, 0.01, np.random.default_rng(0))
    assert len(pick) == 4 and y[pick].sum(0).tolist() == [1, 1, 1, 1]
    assert len(label_subset(y, 0.5, np.random.default_rng(0))) == 100


def test_probe_auc_known_answers() -> None:
    assert macro_auc(np.array([[0.9, 0.1], [0.1, 0.9]]), np.array([[1, 0], [0, 1]])) == 1.0
    rng = np.random.default_rng(0)
    classes = rng.integers(3, size=200)
    x = one_hot(classes, 3) * 3.0 + 0.1 * rng.standard_normal((200, 3))
    y = one_hot(classes, 3)
    assert linear_probe(x[:100], y[:100], x[100:], y[100:]) > 0.99
    noise = rng.standard_normal((200, 3))
    assert 0.3 < linear_probe(noise[:100], y[:100], noise[100:], y[100:]) < 0.7
