"""MotherNet figures: the pretraining curve on the prior, and ROC AUC per table and method."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from components.io import save_csv, save_figure
from paperflows.plots import figure
from pipelines.mothernet.params import LABELS, METHODS


def plot_pretraining(curves: Sequence[dict[str, Any]], png: Path, csv: Path) -> None:
    """Held-out cross-entropy of the written children on prior batches, one line per seed."""
    fig, ax = figure(5.5, 3.5)
    for seed in dict.fromkeys(c["seed"] for c in curves):
        mine = [c for c in curves if c["seed"] == seed]
        ax.plot([c["step"] for c in mine], [c["loss"] for c in mine], label=f"seed {seed}")
    ax.set_xlabel("step")
    ax.set_ylabel("held-out cross-entropy")
    ax.set_title("MotherNet pretraining on the synthetic prior")
    ax.legend()
    save_figure(fig, png)
    save_csv([{"seed": c["seed"], "step": c["step"], "loss": c["loss"]} for c in curves], csv)


def plot_auc_per_table(rows: Sequence[dict[str, Any]], png: Path, csv: Path) -> None:
    """Mean ROC AUC (over splits and seeds) per table, one bar per method."""
    tables = list(dict.fromkeys(r["table"] for r in rows))
    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    points = [
        {
            "table": t,
            "method": m,
            "auc": float(np.mean([r["auc"] for r in rows if r["table"] == t and r["method"] == m])),
        }
        for t in tables
        for m in methods
    ]
    fig, ax = figure(max(6.0, 0.55 * len(tables) * len(methods) / 2), 3.8)
    width = 0.8 / len(methods)
    for i, m in enumerate(methods):
        ax.bar(
            np.arange(len(tables)) + i * width, [p["auc"] for p in points if p["method"] == m], width, label=LABELS[m]
        )
    ax.set_xticks(np.arange(len(tables)) + 0.4 - width / 2, tables, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("ROC AUC")
    ax.set_ylim(0.0, 1.0)
    ax.axhline(0.5, color="grey", linewidth=0.8, linestyle=":")
    ax.legend(fontsize=7, loc="lower left", ncol=2)
    save_figure(fig, png)
    save_csv(points, csv)
