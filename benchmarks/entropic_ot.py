"""Entropic OT for NSOT's ``solver: sinkhorn``: the project's solvers beside POT's per-problem loop.

In one process, interleaved over repeats, on B problems of N x N squared-Euclidean costs between Gaussian
clouds (mean-normalised, eps = 0.01 relative, as :func:`components.ot.entropic_assignment` uses them):

* ``entropic_assignment`` (what NSOT calls): per problem, POT's stabilised Sinkhorn plus greedy rounding;
* POT's ``ot.sinkhorn`` loop over the problems (the peer, without the rounding);
* ``sinkhorn_log``: the project's batched log-domain Sinkhorn in torch (all B problems in one call).

Prints the median seconds of each and the ratios. The batched log-domain form spends 2 N^2 exponentials
per iteration and loses to the peer by an order of magnitude on CPU, so NSOT's solver calls POT; the
batched form stays for torch use (autograd, GPU batches).

    python benchmarks/entropic_ot.py [--batch 32] [--points 256] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np
import ot
import torch

from components.ot import entropic_assignment, sinkhorn_log
from components.ot.assignment import squared_distances

EPS, ITERS = 0.01, 300


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--points", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    x0 = torch.randn(args.batch, args.points, 3, generator=gen, dtype=torch.float64)
    x1 = torch.randn(args.batch, args.points, 3, generator=gen, dtype=torch.float64)
    costs = torch.stack([squared_distances(a, b) for a, b in zip(x0, x1)])
    costs = costs / costs.mean(dim=(1, 2), keepdim=True)
    weights = np.full(args.points, 1.0 / args.points)
    warnings.filterwarnings("ignore", module="ot")

    def ours() -> None:
        for c in costs:
            entropic_assignment(c, eps=EPS, n_iters=ITERS)

    def peer() -> None:
        for c in costs:
            ot.sinkhorn(
                weights,
                weights,
                c.numpy(),
                EPS,
                method="sinkhorn_stabilized",
                numItermax=ITERS,
                stopThr=1e-9,
                warn=False,
            )

    def batched_log() -> None:
        sinkhorn_log(costs, eps=EPS, n_iters=ITERS, tol=1e-9)

    runs = {
        "entropic_assignment (POT + rounding)": ours,
        "POT ot.sinkhorn loop (peer)": peer,
        "sinkhorn_log, batched torch": batched_log,
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - started)
    medians = {name: statistics.median(t) for name, t in times.items()}
    peer_s = medians["POT ot.sinkhorn loop (peer)"]
    print(
        f"B = {args.batch} problems of N = {args.points}, eps = {EPS} (relative), {ITERS} iterations, "
        f"one thread, median of {args.repeats}"
    )
    print("| solver | seconds | peer / solver |\n|---|---|---|")
    for name, seconds in medians.items():
        print(f"| {name} | {seconds:.3f} | {peer_s / seconds:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
