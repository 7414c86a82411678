"""MM-Ego figures: accuracy by video length (raw and debiased), and the memory pointer over one long clip."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from components.egovideo.synthetic import BUCKETS
from components.io import save_csv, save_figure
from paperflows.plots import figure
from pipelines.mm_ego.params import CHANCE, LABELS

KINDS = ("raw", "debiased")


def plot_accuracy(rows: Sequence[dict[str, Any]], bucket_frames: Sequence[int], png: Path, csv: Path) -> None:
    """Mean accuracy over seeds per bucket, one line per model; the same numbers as DVC plot data."""
    names = list(dict.fromkeys(r["model"] for r in rows))
    mean = {
        (n, kind, b): float(np.mean([r[f"{kind}_{b}"] for r in rows if r["model"] == n]))
        for n in names
        for kind in KINDS
        for b in BUCKETS
    }
    fig, axes = figure(10, 4, ncols=2)
    for ax, kind in zip(axes, KINDS):
        for n in names:
            ax.plot(range(len(BUCKETS)), [mean[(n, kind, b)] for b in BUCKETS], marker="o", label=LABELS[n])
        ax.axhline(CHANCE, color="grey", linestyle=":", linewidth=1)
        ax.set_xticks(range(len(BUCKETS)), [f"{b}\n({t} frames)" for b, t in zip(BUCKETS, bucket_frames)])
        ax.set_ylabel(f"{kind} accuracy (%)")
        ax.set_title(f"{kind} accuracy by video length")
    axes[0].legend(fontsize=7)
    save_figure(fig, png)
    save_csv(
        [{"bucket": b, **{f"{n}_{kind}": mean[(n, kind, b)] for n in names for kind in KINDS}} for b in BUCKETS], csv
    )


def plot_pointer(
    example: tuple[np.ndarray, dict[str, Any]] | None,
    pointer: Sequence[dict[str, Any]],
    k: int,
    bucket_frames: Sequence[int],
    png: Path,
    csv: Path,
) -> None:
    """Left: the pointer scores of one long clip (evidence frames dashed, top-k marked); right: the
    pointer's recall of the evidence per bucket beside k/T (what k evenly spaced frames cover on average)."""
    fig, axes = figure(11, 3.5, ncols=2)
    data: list[dict[str, Any]] = []
    if example is not None:
        scores, row = example
        evidence = set(row["evidence_frames"])
        top = sorted(np.argsort(-scores)[:k].tolist())
        axes[0].plot(np.arange(len(scores)), scores, linewidth=0.8, label="pointer score")
        axes[0].scatter(top, scores[top], s=18, color="tab:orange", label=f"top-{k}")
        for e in sorted(evidence):
            axes[0].axvline(e, color="tab:red", linestyle="--", linewidth=1)
        axes[0].set_title(f"{row['question']} (evidence: red)", fontsize=8)
        axes[0].set_xlabel("frame")
        axes[0].legend(fontsize=7)
        data = [{"frame": i, "score": float(s), "evidence": int(i in evidence)} for i, s in enumerate(scores)]
    else:
        axes[0].text(0.5, 0.5, "no MPP model in train.methods", ha="center")
    if pointer:
        recall = [float(np.mean([r["recall"] for r in pointer if r["bucket"] == b] or [np.nan])) for b in BUCKETS]
        uniform = [min(1.0, k / t) for t in bucket_frames]
        axes[1].bar(np.arange(3) - 0.2, recall, width=0.4, label=f"pointer top-{k}")
        axes[1].bar(np.arange(3) + 0.2, uniform, width=0.4, label="random k frames (k/T)")
        axes[1].set_xticks(range(3), list(BUCKETS))
        axes[1].set_ylabel("evidence frames selected (recall)")
        axes[1].legend(fontsize=7)
    save_figure(fig, png)
    save_csv(data, csv, columns=["frame", "score", "evidence"])
