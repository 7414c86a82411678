"""QRS tokenisation speed: 10-s 12-lead recordings at 100 Hz -> official .npy sentences, detection included.

Recordings come from the Gaussian-wave PQRST model (``components.ecg.synth.simulate_labelled``, all rhythm and form
classes), preprocessed as in the pipeline; the time is split into R-peak detection (``wfdb`` xqrs on lead I, neurokit2
fallback) and segmentation (beats -> 96-sample tokens -> sentences of ``max_len`` tokens, 12 leads). Detection runs
in one process and, for comparison, in a pool of ``--workers`` processes (results checked equal). Target: 10,000
recordings in <= 60 s on 2 cores.

    python benchmarks/qrs_tokenize.py [--n 10000] [--workers 2] [--max-len 256]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from components.ecg.peaks import detect_r_peaks
from components.ecg.preprocess import preprocess
from components.ecg.synth import simulate_labelled
from components.ecg.tokenizer import qrs_tokenize

TARGET_S = 60.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-len", type=int, default=256)
    args = parser.parse_args()
    started = time.perf_counter()
    x, _, _ = simulate_labelled(args.n, 0)
    x = np.concatenate([preprocess(x[i : i + 500], 100) for i in range(0, len(x), 500)])
    print(f"{args.n} recordings simulated and preprocessed in {time.perf_counter() - started:.1f} s (not timed below)")

    started = time.perf_counter()
    peaks = detect_r_peaks(x, 100, "xqrs", lead=0)
    detect_1 = time.perf_counter() - started
    started = time.perf_counter()
    sentences = qrs_tokenize(x, peaks, max_len=args.max_len)
    segment = time.perf_counter() - started
    started = time.perf_counter()
    pooled = detect_r_peaks(x, 100, "xqrs", lead=0, workers=args.workers)
    detect_pool = time.perf_counter() - started
    assert all(np.array_equal(a, b) for a, b in zip(peaks, pooled))
    beats = np.mean([len(p) for p in peaks])
    print(
        f"detection (xqrs, 1 process):          {detect_1:7.2f} s  ({1e3 * detect_1 / args.n:.2f} ms / recording, "
        f"{beats:.1f} beats on average)"
    )
    print(f"detection (xqrs, {args.workers} processes):        {detect_pool:7.2f} s")
    print(f"segmentation (12 leads, max_len {args.max_len}):  {segment:7.2f} s  -> {sentences.data.shape}")
    best = min(detect_1, detect_pool) + segment
    print(
        f"total: {detect_1 + segment:.2f} s in one process, {best:.2f} s with the faster detection "
        f"(target <= {TARGET_S:.0f} s: {'met' if best <= TARGET_S else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
