"""FLAT figures: unlearning curves (forget-answer probability and retain exact match per step) and the
forget-quality vs model-utility scatter, one colour per method."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from components.io import save_csv, save_figure
from paperflows.plots import figure
from pipelines.flat.params import LABELS

PANELS = (
    ("forget_prob", "forget-answer probability"),
    ("forget_em", "forget exact match"),
    ("retain_em", "retain exact match"),
)


def plot_curves(curves: Sequence[dict[str, Any]], png: Path, csv: Path) -> None:
    """Mean over seeds per probe step, one line per method; the same numbers as DVC plot data."""
    methods = list(dict.fromkeys(r["method"] for r in curves))
    steps = sorted({int(r["step"]) for r in curves})
    mean = {
        (m, s, k): float(np.mean([r[k] for r in curves if r["method"] == m and int(r["step"]) == s] or [np.nan]))
        for m in methods
        for s in steps
        for k, _ in PANELS
    }
    fig, axes = figure(13, 3.6, ncols=len(PANELS))
    for ax, (key, label) in zip(axes, PANELS):
        for m in methods:
            ax.plot(steps, [mean[(m, s, key)] for s in steps], marker="o", markersize=3, label=LABELS.get(m, m))
        ax.set_xlabel("unlearning step")
        ax.set_ylabel(label)
        ax.set_ylim(-0.02, 1.02)
    axes[0].legend(fontsize=7)
    fig.suptitle("Unlearning curves (mean over seeds)", fontsize=10)
    save_figure(fig, png)
    save_csv(
        [
            {
                "step": s,
                **{f"{m}_{k}": mean[(m, s, k)] for m in methods for k, _ in PANELS},
                "forget_prob": float(np.nanmean([mean[(m, s, "forget_prob")] for m in methods])),
            }
            for s in steps
        ],
        csv,
    )


def plot_tradeoff(rows: Sequence[dict[str, Any]], png: Path, csv: Path) -> None:
    """Forget quality (log scale) against model utility: every unlearning run, and the two references."""
    fig, ax = figure(6.5, 4.5)
    methods = list(dict.fromkeys(r["method"] for r in rows))
    data = []
    for m in methods:
        mine = [r for r in rows if r["method"] == m]
        fq = [max(float(r["forget_quality"]), 1e-12) for r in mine]
        mu = [float(r["model_utility"]) for r in mine]
        style = {"marker": "*", "s": 160, "edgecolor": "black"} if m in ("original", "retain") else {"s": 36}
        ax.scatter(fq, mu, label=LABELS.get(m, m), **style)
        data += [
            {"method": m, "seed": r["seed"] if r["seed"] is not None else -1, "forget_quality": f, "model_utility": u}
            for r, f, u in zip(mine, fq, mu)
        ]
    ax.set_xscale("log")
    ax.axvline(0.05, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("forget quality (KS p-value vs retain oracle, log)")
    ax.set_ylabel("model utility (harmonic mean)")
    ax.set_title("Forget quality vs model utility", fontsize=10)
    ax.legend(fontsize=7, loc="best")
    save_figure(fig, png)
    save_csv(data, csv)


def plot_finetune(curves: Sequence[dict[str, Any]], png: Path) -> None:
    """Fine-tuning loss of the original and of the retain oracle."""
    fig, ax = figure(5.5, 3.6)
    for role in dict.fromkeys(r["model"] for r in curves):
        mine = [r for r in curves if r["model"] == role]
        ax.plot([r["step"] for r in mine], [r["loss"] for r in mine], label=LABELS.get(role, role))
    ax.set_xlabel("step")
    ax.set_ylabel("answer NLL (nats/token)")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title("Fine-tuning (LoRA)", fontsize=10)
    save_figure(fig, png)
