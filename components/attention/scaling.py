"""Measuring the masks: the GRF estimate's error against the number of walks, and the forward cost of the
GRF-masked and the dense-masked layer against the number of tokens.

* ``relative_mask_error``: ``||Phi_q Phi_k^T - M||_F / ||M||_F`` of one GRF estimate.
* ``masked_forward``: one single-head masked linear-attention forward, mask construction included (walk
  sampling for ``"grf_mask"``; the power series for ``"exact_mask"``).
* ``measure``: after one warm-up call, the peak memory of one call above what was allocated before it and the
  median wall time of ``repeats`` further calls: on CUDA the allocator's peak; on Linux CPUs the process's
  resident-set high-water mark (reset through ``/proc/self/clear_refs``), which counts every page touched; NaN
  where neither is available.
* ``loglog_slope``: the least-squares slope of ``log y`` on ``log x``.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from components.attention.graphs import Graph
from components.attention.linear import GrfMask, exact_masked_linear_attention, grf_masked_linear_attention
from components.attention.masks import exact_mask, sample_grf

__all__ = ["loglog_slope", "masked_forward", "measure", "relative_mask_error"]


def relative_mask_error(
    graph: Graph, f: Tensor, exact: Tensor, n_walks: int, p_halt: float, generator: torch.Generator
) -> float:
    k_max = f.shape[0] - 1
    a = sample_grf(graph, n_walks, p_halt, k_max, generator).matrix(f)
    b = sample_grf(graph, n_walks, p_halt, k_max, generator).matrix(f)
    estimate = torch.sparse.mm(a, b.to_dense().T)
    return float(torch.linalg.norm(estimate - exact) / torch.linalg.norm(exact))


def masked_forward(
    kind: str,
    graph: Graph,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    f: Tensor,
    n_walks: int,
    p_halt: float,
    generator: torch.Generator | None = None,
) -> Tensor:
    """``kind`` "grf_mask" (sample walks, O(N) attention) or "exact_mask" (dense mask, O(N^2) attention)."""
    if kind == "grf_mask":
        a, b = (sample_grf(graph, n_walks, p_halt, f.shape[0] - 1, generator) for _ in range(2))
        dev = q.device
        return grf_masked_linear_attention(q, k, v, GrfMask(a.matrix(f).to(dev), b.matrix(f).to(dev)))
    if kind == "exact_mask":
        return exact_masked_linear_attention(q, k, v, exact_mask(graph, f).to(q.device))
    raise ValueError(f"kind must be 'grf_mask' or 'exact_mask', got {kind!r}")


def _rss_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_rss_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _fixed_mmap_threshold() -> None:
    """glibc: serve every allocation above 64 KiB by its own mapping, returned on free (a fixed threshold; glibc's
    default one grows), so that the resident set follows the live tensors and its high-water mark is a peak."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 1 << 16)  # M_MMAP_THRESHOLD: 64 KiB
        libc.mallopt(-1, 1 << 16)  # M_TRIM_THRESHOLD: give freed heap tops back
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _trim() -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def measure(fn: Callable[[], object], device: torch.device, repeats: int, warmup: bool = True) -> tuple[float, float]:
    """(median seconds over ``repeats`` calls, peak bytes of one call above the memory held before it)."""
    cuda = device.type == "cuda"
    _fixed_mmap_threshold()
    if warmup:
        fn()  # lazy initialisation and first-touched code pages are not the layer's memory
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        peak = float(torch.cuda.max_memory_allocated(device) - base)
    else:
        _trim()  # freed heap pages back to the OS, so reusing them is counted
        ok = _reset_rss_peak()
        base = _rss_kib("VmRSS")
        fn()
        high = _rss_kib("VmHWM")
        peak = float((high - base) * 1024) if ok and base is not None and high is not None else math.nan
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times), peak


def loglog_slope(x: list[float] | np.ndarray, y: list[float] | np.ndarray) -> float:
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    if len(lx) < 2:
        return math.nan
    return float(np.polyfit(lx, ly, 1)[0])
