"""GRF masking figures: accuracy per attention variant, the mask error vs walks, and cost vs tokens (log-log)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from components.attention.scaling import loglog_slope
from components.io import save_csv, save_figure
from paperflows.plots import figure
from pipelines.grf_masking.params import TASKS, VARIANTS

MASK_LABELS = {"grf_mask": "GRF mask (sparse features)", "exact_mask": "dense mask"}
TICKS = {
    "linear": "linear\n(unmasked)",
    "exact_mask": "linear +\nexact mask",
    "grf_mask": "linear +\nGRF mask",
    "softmax": "softmax\n(unmasked)",
}


def plot_accuracy(rows: Sequence[dict[str, Any]], png: Path, csv: Path) -> None:
    """Test accuracy per variant, one panel per task: one dot per seed, the bar at the mean."""
    tasks = [t for t in TASKS if any(r["task"] == t for r in rows)]
    fig, axes = figure(6.5 * len(tasks), 3.4, ncols=len(tasks))
    for ax, task in zip(np.atleast_1d(axes), tasks):
        mine = [r for r in rows if r["task"] == task]
        variants = [v for v in VARIANTS if any(r["variant"] == v for r in mine)]
        for i, v in enumerate(variants):
            accs = [r["test_accuracy"] for r in mine if r["variant"] == v]
            ax.bar(i, np.mean(accs), color=f"C{i}", alpha=0.5)
            ax.plot([i] * len(accs), accs, "k.", markersize=5)
        ax.set_xticks(range(len(variants)), [TICKS[v] for v in variants], fontsize=8)
        lows = [r["test_accuracy"] for r in mine]
        ax.set_ylim(max(0.0, min(lows) - 5), min(100.0, max(lows) + 2))
        ax.set_ylabel(f"{TASKS[task]} test accuracy (%)")
    save_figure(fig, png)
    save_csv(
        [
            {"task": r["task"], "variant": r["variant"], "seed": r["seed"], "test_accuracy": r["test_accuracy"]}
            for r in rows
        ],
        csv,
    )


def plot_mask_error(rows: Sequence[dict[str, Any]], png: Path, csv: Path) -> None:
    """Mean relative error vs walks per seed, log-log, with the fitted slope and a 1/sqrt(n) reference."""
    fig, ax = figure(5, 3.6)
    walks = sorted({r["n_walks"] for r in rows})
    mean = [float(np.mean([r["relative_error"] for r in rows if r["n_walks"] == n])) for n in walks]
    for seed in sorted({r["seed"] for r in rows}):
        mine = sorted((r for r in rows if r["seed"] == seed), key=lambda r: r["n_walks"])
        ax.plot([r["n_walks"] for r in mine], [r["relative_error"] for r in mine], ".", color="C0", alpha=0.5)
    slope = loglog_slope(walks, mean)
    ax.plot(walks, mean, "-", color="C0", label=f"GRF estimate (fitted slope {slope:.2f})")
    ax.plot(walks, [mean[0] * (walks[0] / n) ** 0.5 for n in walks], "--", color="gray", label="1/sqrt(n)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("random walks per node")
    ax.set_ylabel("relative Frobenius error")
    ax.legend(fontsize=8)
    save_figure(fig, png)
    save_csv([{k: r[k] for k in ("seed", "n_walks", "relative_error")} for r in rows], csv)


def plot_scaling(rows: Sequence[dict[str, Any]], fit_min_n: int, png: Path, csv: Path) -> None:
    """Median forward time and peak memory vs N (mean over seeds), log-log, slopes fitted on N >= fit_min_n."""
    fig, axes = figure(10, 3.8, ncols=2)
    for ax, key, label in ((axes[0], "seconds", "forward time (s)"), (axes[1], "peak_bytes", "peak memory (MB)")):
        for i, mask in enumerate(("grf_mask", "exact_mask")):
            sizes = sorted({r["n_tokens"] for r in rows if r["mask"] == mask})
            if not sizes:
                continue
            ys = [float(np.nanmean([r[key] for r in rows if r["mask"] == mask and r["n_tokens"] == n])) for n in sizes]
            scale = 1e-6 if key == "peak_bytes" else 1.0
            fit = [(n, y) for n, y in zip(sizes, ys) if n >= fit_min_n and y > 0]
            slope = loglog_slope(*zip(*fit)) if len(fit) >= 2 else float("nan")
            ax.plot(
                sizes,
                [max(y, 1e-9) * scale for y in ys],
                "o-",
                color=f"C{i}",
                label=f"{MASK_LABELS[mask]} (slope {slope:.2f})",
            )
        ns = sorted({r["n_tokens"] for r in rows})
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"tokens N (slopes fitted on N >= {fit_min_n}; {ns[0]}..{ns[-1]})")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    save_figure(fig, png)
    save_csv([{k: r[k] for k in ("seed", "n_tokens", "mask", "seconds", "peak_bytes")} for r in rows], csv)
