"""BC-PMI figures: the demonstrations per style, style accuracy and success against data size, and the heat map
of the PMI weights over the grid against the bifurcation zone (the gridworld form of the paper's Fig. 3)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

from components.imitation.gridworld import STYLE_NAMES, GridConfig
from components.io import save_csv, save_figure
from paperflows.plots import figure
from paperflows.report import mean
from pipelines.bc_pmi.params import LABELS


def _zone(ax: Any, grid: GridConfig) -> None:
    for row in (grid.zone_top - 0.5, grid.zone_bottom + 0.5):
        ax.axhline(row, color="white", lw=1.2, ls="--")
    ax.set_xticks(range(grid.size))
    ax.set_yticks(range(grid.size))
    ax.tick_params(labelsize=6)


def plot_demos(grid: GridConfig, demos: dict[str, np.ndarray], png: Path) -> None:
    """Visits per cell of one seed's demonstrations, one panel per style; dashed lines bound the zone."""
    fig, axes = figure(3.2 * grid.n_styles, 3.2, ncols=grid.n_styles, squeeze=False)
    for z in range(grid.n_styles):
        counts = np.zeros((grid.size, grid.size))
        states = demos["state"][demos["style"] == z]
        np.add.at(counts, (states[:, 0], states[:, 1]), 1)
        ax = axes[0][z]
        ax.imshow(np.log1p(counts), cmap="viridis")
        ax.set_title(f"style {z} ({STYLE_NAMES[z] if z < len(STYLE_NAMES) else z}): log(1 + visits)", fontsize=8)
        _zone(ax, grid)
    save_figure(fig, png)


def plot_style_accuracy(rows: Sequence[dict[str, Any]], png: Path, csv: Path) -> None:
    """Style accuracy and success (mean over seeds) against episodes per style, one line per method; the
    experts as a dotted level."""
    fig, axes = figure(9, 3.4, ncols=2, squeeze=False)
    methods = [m for m in dict.fromkeys(r["method"] for r in rows) if m != "expert"]
    sizes = sorted({r["size"] for r in rows if r["method"] != "expert"})
    points = []
    for method in methods:
        for size in sizes:
            mine = [r for r in rows if r["method"] == method and r["size"] == size]
            if mine:
                points.append({"method": method, "size": size,
                               "style_accuracy": mean([r["style_accuracy"] for r in mine]),
                               "success": mean([r["success"] for r in mine])})
    for ax, key in zip(axes[0], ("style_accuracy", "success")):
        for method in methods:
            mine = [p for p in points if p["method"] == method]
            ax.plot([p["size"] for p in mine], [p[key] for p in mine], marker="o", label=LABELS.get(method, method))
        experts = [r[key] for r in rows if r["method"] == "expert"]
        if experts:
            ax.axhline(float(np.mean(experts)), color="grey", ls=":", label=LABELS["expert"])
        ax.set_xscale("log")
        ax.set_xlabel("episodes per style")
        ax.set_ylabel(key.replace("_", " "))
        ax.legend(fontsize=7)
    save_figure(fig, png)
    save_csv(points, csv)


def plot_weight_map(grid: GridConfig, cells: Sequence[dict[str, Any]], size: int, png: Path, csv: Path) -> None:
    """Mean exp(PMI) weight per visited cell at ``size`` episodes per style (averaged over seeds and the
    tuples of the cell), with the zone's rows marked; the CSV gives, per column, the mean weight of the
    cells inside the zone and outside it."""
    grid_sum, grid_n = np.zeros((grid.size, grid.size)), np.zeros((grid.size, grid.size))
    for c in cells:
        if c["size"] == size:
            grid_sum[c["row"], c["col"]] += c["weight"]
            grid_n[c["row"], c["col"]] += 1
    weights = np.where(grid_n > 0, grid_sum / np.maximum(grid_n, 1), np.nan)
    fig, axes = figure(4.6, 4, squeeze=False)
    ax = axes[0][0]
    cmap = matplotlib.colormaps["magma"].with_extremes(bad="lightgrey")     # cells no demonstration visits
    image = ax.imshow(np.ma.masked_invalid(weights), cmap=cmap)
    fig.colorbar(image, ax=ax, fraction=0.046)
    ax.set_title(f"mean PMI weight per cell ({size} episodes per style; grey: unvisited)", fontsize=8)
    _zone(ax, grid)
    save_figure(fig, png)
    rows = []
    for col in range(grid.size):
        inside = [weights[r, col] for r in range(grid.zone_top, grid.zone_bottom + 1) if grid_n[r, col]]
        outside = [weights[r, col] for r in range(grid.size)
                   if not grid.zone_top <= r <= grid.zone_bottom and grid_n[r, col]]
        rows.append({"col": col, "weight": float(np.mean(inside)) if inside else 0.0,
                     "outside_weight": float(np.mean(outside)) if outside else 0.0})
    save_csv(rows, csv)
