"""GRF-masked against dense-masked linear attention at N = 16k tokens (targets: >= 20x faster, >= 50x less memory,
GRF time exponent <= 1.15), side by side in one process.

One single-head masked linear-attention layer (ReLU features, d = 16) on a random grid graph (10% of edges
dropped), mask construction included: for the GRF layer, two independent sets of graph random features (16 walks
per node, p_halt 0.3, f_0..f_4) and two sparse products; for the dense layer, the power series
``sum_k alpha_k W^k`` as an N x N matrix and the masked N x N attention. Prints the median time of ``--repeats``
forwards and the peak memory of one (CUDA allocator peak, or the resident-set high-water mark on CPU) for each,
their ratios, and the GRF time exponent fitted on N = n/16 .. n (log-log least squares, five sizes).

    python benchmarks/grf_attention.py [--n 16384] [--repeats 3] [--dense-repeats 1] [--device auto] [--threads 1]
"""

from __future__ import annotations

import argparse

import torch

from components.attention import random_grid_graph
from components.attention.scaling import loglog_slope, masked_forward, measure
from components.training import select_device, torch_threads

TIME_RATIO, MEMORY_RATIO, EXPONENT = 20.0, 50.0, 1.15


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16384)
    parser.add_argument("--repeats", type=int, default=3, help="timed GRF forwards per size")
    parser.add_argument("--dense-repeats", type=int, default=1, help="timed dense forwards")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    device = select_device(args.device)
    gen = torch.Generator().manual_seed(0)
    f = torch.tensor([2.0**-k for k in range(5)])

    def run(kind: str, n: int, repeats: int, warmup: bool = True) -> tuple[int, float, float]:
        graph = random_grid_graph(n, 0.1, gen)
        q, k, v = torch.randn(3, 1, 1, graph.n, 16, generator=gen).to(device).unbind(0)
        seconds, peak = measure(lambda: masked_forward(kind, graph, q, k, v, f, 16, 0.3, gen), device, repeats, warmup)
        return graph.n, seconds, peak

    with torch.no_grad(), torch_threads(args.threads):
        sizes = [args.n // 16, args.n // 8, args.n // 4, args.n // 2, args.n]
        grf = [run("grf_mask", n, args.repeats) for n in sizes]
        # the dense layer is slow enough at this size that one untimed call measures its memory, one its time
        n, dense_s, dense_peak = run("exact_mask", args.n, args.dense_repeats, warmup=False)
    grf_s, grf_peak = grf[-1][1], grf[-1][2]
    exponent = loglog_slope([g[0] for g in grf], [g[1] for g in grf])
    print(
        f"N = {n} tokens on {device.type}, median of {args.repeats} GRF / {args.dense_repeats} dense forwards, "
        "mask construction included"
    )
    print(f"  GRF mask    {grf_s * 1000:10.1f} ms   peak {grf_peak / 2**20:9.1f} MiB")
    print(f"  dense mask  {dense_s * 1000:10.1f} ms   peak {dense_peak / 2**20:9.1f} MiB")
    time_ratio, memory_ratio = dense_s / grf_s, dense_peak / max(grf_peak, 1.0)
    print("  GRF time by size: " + ", ".join(f"{g[0]}: {g[1] * 1000:.1f} ms" for g in grf))
    results = [
        ("dense / GRF time", time_ratio, TIME_RATIO, time_ratio >= TIME_RATIO),
        ("dense / GRF peak memory", memory_ratio, MEMORY_RATIO, memory_ratio >= MEMORY_RATIO),
        ("GRF time exponent", exponent, EXPONENT, exponent <= EXPONENT),
    ]
    for name, value, target, ok in results:
        side = "<=" if name.endswith("exponent") else ">="
        print(f"  {name:<24} {value:8.2f}   target {side} {target:g}: {'meets' if ok else 'MISSES'}")
    return 0 if all(ok for *_, ok in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
