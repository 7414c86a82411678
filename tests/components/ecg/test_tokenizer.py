"""QRS and fixed-window tokenizers: the official geometry exactly (R at 48, zeros outside the beat, padding codes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from components.ecg.tokenizer import (
    Sentences,
    beat_tokens,
    load_sentences,
    qrs_tokenize,
    save_sentences,
    window_tokenize,
)


def _ramp(leads: int = 3, n: int = 1000) -> np.ndarray:
    """Every sample distinct and non-zero: lead k, time t -> 1 + 10000 k + t."""
    return (1 + 10000 * np.arange(leads)[:, None] + np.arange(n)[None, :]).astype(np.float32)


def test_beat_sits_at_48_with_zeros_outside_its_segment() -> None:
    x = _ramp(2, 200)
    tokens = beat_tokens(x, np.array([20, 60, 150]))
    assert tokens.shape == (2, 3, 96)
    np.testing.assert_array_equal(tokens[:, :, 48], x[:, [20, 60, 150]])
    # beat 1: from the midpoint with beat 0 (40) to the midpoint with beat 2 (105), exclusive
    expected = np.zeros((2, 96), np.float32)
    expected[:, 48 - 20 : 48 + 45] = x[:, 40:105]
    np.testing.assert_array_equal(tokens[:, 1], expected)
    # beat 0 starts at the recording's start; beat 2 ends at its end (200) and is cut at 48 + 47 samples
    assert (tokens[:, 0, :28] == 0).all() and (tokens[:, 0, 28:48] == x[:, :20]).all()
    np.testing.assert_array_equal(tokens[:, 0, 48 : 48 + 20], x[:, 20:40])
    assert (tokens[:, 0, 68:] == 0).all()
    np.testing.assert_array_equal(tokens[:, 2, 48 - 45 : 48], x[:, 105:150])
    np.testing.assert_array_equal(tokens[:, 2, 48:], x[:, 150:198])


def test_long_segment_is_centred_on_r() -> None:
    x = _ramp(1, 400)
    token = beat_tokens(x, np.array([100]))[0, 0]
    np.testing.assert_array_equal(token, x[0, 52:148])


def test_sentence_codes_and_padding() -> None:
    x = _ramp(3, 1000)[None]
    peaks = [np.array([50, 250, 480, 730])]
    s = qrs_tokenize(x, peaks, max_len=16)
    assert s.data.shape == (1, 16, 96) and s.data.dtype == np.float32
    assert s.in_chans.dtype == np.int32 and s.in_times.dtype == np.int32
    np.testing.assert_array_equal(s.in_chans[0], [1] * 4 + [2] * 4 + [3] * 4 + [0] * 4)
    np.testing.assert_array_equal(s.in_times[0], [1, 3, 5, 8] * 3 + [0] * 4)
    assert (s.data[0, 12:] == 0).all()
    np.testing.assert_array_equal(s.data[0, 4:8, 48], x[0, 1, [50, 250, 480, 730]])  # lead II's beats follow lead I's
    short = qrs_tokenize(x, peaks, max_len=6)  # truncated lead by lead
    np.testing.assert_array_equal(short.in_chans[0], [1, 1, 1, 1, 2, 2])
    picked = qrs_tokenize(x, peaks, max_len=8, leads=[2, 0])  # a lead subset keeps the original lead codes
    np.testing.assert_array_equal(picked.in_chans[0], [3] * 4 + [1] * 4)


def test_no_beats_gives_an_all_padding_sentence() -> None:
    s = qrs_tokenize(_ramp(2, 1000)[None], [np.zeros(0, np.int64)], max_len=8)
    assert (s.in_chans == 0).all() and (s.in_times == 0).all() and (s.data == 0).all()


def test_fixed_windows() -> None:
    x = _ramp(2, 1000)[None]
    s = window_tokenize(x, max_len=24)
    np.testing.assert_array_equal(s.in_chans[0], [1] * 10 + [2] * 10 + [0] * 4)
    np.testing.assert_array_equal(s.in_times[0, :10], np.arange(10) * 96 // 100 + 1)
    for k in range(10):
        np.testing.assert_array_equal(s.data[0, k], x[0, 0, 96 * k : 96 * k + 96])
        np.testing.assert_array_equal(s.data[0, 10 + k], x[0, 1, 96 * k : 96 * k + 96])


def test_time_embedding_overflow_is_refused() -> None:
    with pytest.raises(ValueError, match="overflow"):
        window_tokenize(np.zeros((1, 1, 1500), np.float32))


def test_official_npy_triple(tmp_path: Path) -> None:
    s = qrs_tokenize(_ramp(2, 1000)[None].repeat(3, 0), [np.array([100, 300])] * 3, max_len=8)
    paths = save_sentences(s, tmp_path, "train")
    assert [p.name for p in paths] == ["train_data.npy", "train_data_in_chans.npy", "train_data_in_times.npy"]
    back = load_sentences(tmp_path, "train")
    assert isinstance(back, Sentences) and back.data.shape == (3, 8, 96) and back.in_chans.shape == (3, 8)
    assert back.data.dtype == np.float32 and back.in_times.dtype == np.int32
    np.testing.assert_array_equal(back.data, s.data)
