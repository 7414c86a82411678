"""PreferDiff figures: validation Recall@5 and NDCG@5 per epoch for every objective (the paper's convergence
figure), mean over seeds with the seeds' range shaded."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from components.io import save_csv, save_figure
from paperflows.plots import figure
from pipelines.preferdiff.params import LABELS


def plot_convergence(curves: Sequence[dict[str, Any]], png: Path, csv: Path) -> None:
    """Two panels (validation Recall@5, NDCG@5 against epoch); the per-(method, epoch) means as DVC plot data."""
    methods = list(dict.fromkeys(c["method"] for c in curves))
    fig, axes = figure(9, 3.4, ncols=2, squeeze=False)
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for ax, metric in zip(axes[0], ("recall@5", "ndcg@5")):
        for k, method in enumerate(methods):
            mine = [c for c in curves if c["method"] == method]
            epochs = sorted({int(c["epoch"]) for c in mine})
            values = [[float(c[metric]) for c in mine if int(c["epoch"]) == e] for e in epochs]
            mean = [float(np.mean(v)) for v in values]
            ax.plot(epochs, mean, marker="o", markersize=3, color=f"C{k}", label=LABELS.get(method, method))
            ax.fill_between(epochs, [min(v) for v in values], [max(v) for v in values], color=f"C{k}", alpha=0.15)
            for e, m in zip(epochs, mean):
                rows.setdefault((method, e), {"method": method, "epoch": e})[metric] = m
        ax.set_xlabel("epoch")
        ax.set_ylabel(f"validation {metric}")
    axes[0][0].legend(fontsize=7)
    save_figure(fig, png)
    save_csv(list(rows.values()), csv)
