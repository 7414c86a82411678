"""Preprocessing: band-pass response, resampling, lead order, NaN fill."""

from __future__ import annotations

import numpy as np

from components.ecg.preprocess import LEADS, Standardiser, bandpass, fill_nan, limb_leads, preprocess, reorder_leads


def test_bandpass_keeps_the_band_and_removes_dc_and_high_frequencies() -> None:
    t = np.arange(1000) / 100
    inside, dc, high = np.sin(2 * np.pi * 10 * t), 3.0, np.sin(2 * np.pi * 45 * t)
    core = slice(200, 800)
    passed = bandpass(np.stack([inside, np.full_like(t, dc)])[None])[0]
    assert np.abs(passed[0, core] - inside[core]).max() < 0.1  # 10 Hz kept (slow high-pass transient)
    assert np.abs(passed[1, core]).max() < 0.1 * dc  # DC removed (up to filtfilt edge effects)
    assert np.abs(bandpass(high[None, None])[0, 0, core]).max() < 0.1  # 45 Hz: above the 40 Hz corner


def test_preprocess_shape_order_and_rate() -> None:
    rng = np.random.default_rng(0)
    names = list(reversed(LEADS))
    x = rng.standard_normal((2, 12, 5000))
    out = preprocess(x, 500, names)
    assert out.shape == (2, 12, 1000) and out.dtype == np.float32
    ref = preprocess(x[:, ::-1], 500, LEADS)
    np.testing.assert_allclose(out, ref, atol=1e-6)


def test_missing_leads_are_zero_and_nans_are_filled() -> None:
    x = np.ones((1, 2, 10))
    out = reorder_leads(x, ["V1", "avr"])
    assert out[0, LEADS.index("V1")].sum() == 10 and out[0, LEADS.index("aVR")].sum() == 10 and out[0, 0].sum() == 0
    y = np.array([[[1.0, np.nan, 3.0, np.nan], [np.nan] * 4]])
    np.testing.assert_array_equal(fill_nan(y), [[[1, 2, 3, 3], [0, 0, 0, 0]]])


def test_limb_leads_follow_einthoven_and_goldberger() -> None:
    i, ii = np.array([1.0]), np.array([3.0])
    iii, avr, avl, avf = limb_leads(i, ii)
    assert (iii, avr, avl, avf) == (2.0, -2.0, -0.5, 2.5)


def test_standardiser_fits_the_signal_leads_of_the_training_split() -> None:
    train = np.zeros((2, 3, 4))
    train[:, 0] = [[1.0, 3.0, 1.0, 3.0], [1.0, 3.0, 1.0, 3.0]]  # mean 2, std 1; leads 1 and 2 carry no signal
    scale = Standardiser.fit(train)
    assert (scale.mean, scale.std) == (2.0, 1.0)
    out = scale(train)
    assert out.dtype == np.float32 and np.allclose(out[:, 0], [-1.0, 1.0, -1.0, 1.0]) and not out[:, 1:].any()
    test = np.full((1, 3, 4), 4.0)
    assert np.allclose(scale(test), 2.0)  # the training split's statistics, not the test split's
    assert Standardiser.fit(np.zeros((1, 2, 3))) == Standardiser(0.0, 1.0)
