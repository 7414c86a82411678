"""HeartLang's tokenizers: heartbeat "words" and lead-by-lead "sentences".

QRS tokenizer (official geometry). For every R peak r_i of a recording (detected on one lead and used for all
leads) and every lead, the beat is the segment from the midpoint with the previous R to the midpoint with the
next R (the recording's start / end for the first / last beat). It is placed in a zero vector of ``token_len``
(96) so that R sits at index ``token_len // 2`` (48); where the segment reaches further than the vector on a side
(a segment longer than 96 is centred on R), it is cut there. Tokens are concatenated lead by lead (all beats of
lead I, then of lead II, ...) into a sentence of ``max_len`` tokens, padded with zeros or truncated. Side inputs:
``in_chans`` = lead index + 1 and ``in_times`` = R index // fs + 1 (the second of the recording), 0 on padding.

Fixed-window tokenizer (control): windows of ``token_len`` samples with stride ``token_len`` per lead (a last
partial window is dropped), the same sentence layout; ``in_times`` from the window start.

Outputs are the official ``.npy`` triple: ``{stage}_data.npy`` (N, max_len, token_len) float32,
``{stage}_data_in_chans.npy`` and ``{stage}_data_in_times.npy`` (N, max_len) int32.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

TOKEN_LEN = 96
MAX_LEN = 256
TIME_VOCAB = 16  # size of the official time embedding: recordings of 15 s or more overflow it


@dataclass
class Sentences:
    """Token sentences: ``data`` (N, L, token_len) float32, ``in_chans`` / ``in_times`` (N, L) int32 (0 = pad)."""

    data: np.ndarray
    in_chans: np.ndarray
    in_times: np.ndarray

    def __len__(self) -> int:
        return len(self.data)

    def subset(self, index: np.ndarray) -> Sentences:
        return Sentences(self.data[index], self.in_chans[index], self.in_times[index])


def beat_tokens(x: np.ndarray, peaks: np.ndarray, token_len: int = TOKEN_LEN) -> np.ndarray:
    """Tokens of one recording ``x`` (leads, T) at ``peaks``: (leads, beats, token_len), R at ``token_len // 2``."""
    peaks = np.asarray(peaks, dtype=np.int64)
    leads, n = x.shape
    if len(peaks) == 0:
        return np.zeros((leads, 0, token_len), dtype=np.float32)
    half = token_len // 2
    mids = (peaks[:-1] + peaks[1:]) // 2
    start = np.concatenate([[0], mids])  # segment [start, end) around each R
    end = np.concatenate([mids, [n]])
    idx = peaks[:, None] + np.arange(-half, token_len - half)[None, :]  # (beats, token_len)
    inside = (idx >= start[:, None]) & (idx < end[:, None]) & (idx >= 0) & (idx < n)
    values = x[:, np.clip(idx, 0, n - 1)]  # (leads, beats, token_len)
    return np.where(inside[None], values, 0.0).astype(np.float32)


def _sentence(
    tokens: np.ndarray, times: np.ndarray, max_len: int, codes: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    leads, beats, token_len = tokens.shape
    data = np.zeros((max_len, token_len), dtype=np.float32)
    chans = np.zeros(max_len, dtype=np.int32)
    tims = np.zeros(max_len, dtype=np.int32)
    flat = tokens.reshape(leads * beats, token_len)[:max_len]
    k = len(flat)
    data[:k] = flat
    chans[:k] = np.repeat(codes, beats)[:k]
    tims[:k] = np.tile(times.astype(np.int32), leads)[:k]
    return data, chans, tims


def _check_times(x: np.ndarray, fs: float) -> None:
    if x.shape[-1] / fs >= TIME_VOCAB - 1:
        raise ValueError(f"recordings of {x.shape[-1] / fs:.1f} s overflow the time embedding (< {TIME_VOCAB - 1} s)")


def _leads(x: np.ndarray, leads: Sequence[int] | None) -> tuple[np.ndarray, np.ndarray]:
    """The selected leads of ``x`` and their ``in_chans`` codes (original lead index + 1)."""
    index = np.arange(x.shape[1]) if leads is None else np.asarray(leads, dtype=np.int64)
    return x[:, index], (index + 1).astype(np.int32)


def qrs_tokenize(
    x: np.ndarray,
    peaks: Sequence[np.ndarray],
    fs: float = 100,
    max_len: int = MAX_LEN,
    token_len: int = TOKEN_LEN,
    leads: Sequence[int] | None = None,
) -> Sentences:
    """QRS-tokenize ``x`` (N, leads, T) with one peak array per recording (detected on one lead); ``leads``
    (indices) limits the sentence to those leads, in that order (default: all)."""
    x, codes = _leads(np.asarray(x, dtype=np.float32), leads)
    if len(peaks) != len(x):
        raise ValueError(f"{len(peaks)} peak arrays for {len(x)} recordings")
    _check_times(x, fs)
    out = [
        _sentence(beat_tokens(rec, p, token_len), np.asarray(p) // int(fs) + 1, max_len, codes)
        for rec, p in zip(x, peaks)
    ]
    return _stack(out, max_len, token_len)


def window_tokenize(
    x: np.ndarray,
    fs: float = 100,
    max_len: int = MAX_LEN,
    token_len: int = TOKEN_LEN,
    leads: Sequence[int] | None = None,
) -> Sentences:
    """Fixed-window tokens (stride = ``token_len``) of ``x`` (N, leads, T), the same sentence layout."""
    x, codes = _leads(np.asarray(x, dtype=np.float32), leads)
    _check_times(x, fs)
    n, leads, length = x.shape
    k = length // token_len
    starts = np.arange(k) * token_len
    tokens = x[:, :, : k * token_len].reshape(n, leads, k, token_len)
    out = [_sentence(t, starts // int(fs) + 1, max_len, codes) for t in tokens]
    return _stack(out, max_len, token_len)


def _stack(out: list, max_len: int, token_len: int) -> Sentences:
    if not out:
        return Sentences(
            np.zeros((0, max_len, token_len), np.float32),
            np.zeros((0, max_len), np.int32),
            np.zeros((0, max_len), np.int32),
        )
    data, chans, times = zip(*out)
    return Sentences(np.stack(data), np.stack(chans), np.stack(times))


def save_sentences(s: Sentences, folder: str | Path, stage: str) -> list[Path]:
    """Write the official triple ``{stage}_data.npy``, ``{stage}_data_in_chans.npy``, ``{stage}_data_in_times.npy``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{stage}_data.npy", folder / f"{stage}_data_in_chans.npy", folder / f"{stage}_data_in_times.npy"]
    for path, array in zip(
        paths, (s.data.astype(np.float32), s.in_chans.astype(np.int32), s.in_times.astype(np.int32))
    ):
        np.save(path, array)
    return paths


def load_sentences(folder: str | Path, stage: str) -> Sentences:
    folder = Path(folder)
    return Sentences(
        np.load(folder / f"{stage}_data.npy"),
        np.load(folder / f"{stage}_data_in_chans.npy"),
        np.load(folder / f"{stage}_data_in_times.npy"),
    )
