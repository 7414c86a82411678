"""BC-PMI figures: the demonstrations per style, style accuracy and success against data size, the map of the PMI
weights (grid cells, or the Reacher's fingertip plane) and the weights along demonstrations against the style
zone (the forms of the paper's Fig. 3)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

from components.imitation.envs import StyleEnv
from components.io import save_csv, save_figure
from paperflows.plots import figure
from paperflows.rows import mean
from pipelines.bc_pmi.params import LABELS


def _zone(ax: Any, env: StyleEnv) -> None:
    if env.zone_rows is not None:
        for row in (env.zone_rows[0] - 0.5, env.zone_rows[1] + 0.5):
            ax.axhline(row, color="white", lw=1.2, ls="--")
    if env.map_size <= 15:
        ax.set_xticks(range(env.map_size))
        ax.set_yticks(range(env.map_size))
    ax.tick_params(labelsize=6)


def plot_demos(env: StyleEnv, demos: dict[str, np.ndarray], png: Path) -> None:
    """Visits per map cell (grid cells, or fingertip positions) of one seed's demonstrations, one panel per style;
    dashed lines bound the gridworld's zone."""
    fig, axes = figure(3.2 * env.n_styles, 3.2, ncols=env.n_styles, squeeze=False)
    cells = env.cell(demos["obs"])
    for z in range(env.n_styles):
        counts = np.zeros((env.map_size, env.map_size))
        mine = cells[demos["style"] == z]
        np.add.at(counts, (mine[:, 0], mine[:, 1]), 1)
        ax = axes[0][z]
        ax.imshow(np.log1p(counts), cmap="viridis")
        ax.set_title(f"style {z} ({env.style_names[z]}): log(1 + visits)", fontsize=8)
        _zone(ax, env)
    save_figure(fig, png)


def plot_style_accuracy(rows: Sequence[dict[str, Any]], png: Path, csv: Path) -> None:
    """Style accuracy and success (mean over seeds) against episodes per style, one line per method; the
    experts and the random policy (the learning gates' reference) as dotted levels."""
    fig, axes = figure(9, 3.4, ncols=2, squeeze=False)
    levels = {"expert": (LABELS["expert"], "grey"), "random": ("Random policy", "tab:red")}
    methods = [m for m in dict.fromkeys(r["method"] for r in rows) if m not in levels]
    sizes = sorted({r["size"] for r in rows if r["method"] not in levels})
    points = []
    for method in methods:
        for size in sizes:
            mine = [r for r in rows if r["method"] == method and r["size"] == size]
            if mine:
                points.append(
                    {
                        "method": method,
                        "size": size,
                        "style_accuracy": mean([r["style_accuracy"] for r in mine]),
                        "success": mean([r["success"] for r in mine]),
                    }
                )
    for ax, key in zip(axes[0], ("style_accuracy", "success")):
        for method in methods:
            mine = [p for p in points if p["method"] == method]
            ax.plot([p["size"] for p in mine], [p[key] for p in mine], marker="o", label=LABELS.get(method, method))
        for level, (label, color) in levels.items():
            found = [r[key] for r in rows if r["method"] == level]
            if found:
                ax.axhline(float(np.mean(found)), color=color, ls=":", label=label)
        ax.set_xscale("log")
        ax.set_xlabel("episodes per style")
        ax.set_ylabel(key.replace("_", " "))
        ax.legend(fontsize=7)
    save_figure(fig, png)
    save_csv(points, csv)


def plot_weight_map(env: StyleEnv, cells: Sequence[dict[str, Any]], size: int, png: Path, csv: Path) -> None:
    """Mean exp(PMI) weight per visited map cell at ``size`` episodes per style (averaged over seeds and the
    tuples of the cell), the gridworld's zone rows marked; the CSV gives, per column, the mean weight of the
    cells inside the zone and outside it."""
    n = env.map_size
    grid_sum, grid_n = np.zeros((n, n)), np.zeros((n, n))
    zone = np.zeros((n, n), dtype=bool)
    for c in cells:
        if c["size"] == size:
            grid_sum[c["row"], c["col"]] += c["weight"]
            grid_n[c["row"], c["col"]] += 1
            zone[c["row"], c["col"]] |= bool(c["in_zone"])
    weights = np.where(grid_n > 0, grid_sum / np.maximum(grid_n, 1), np.nan)
    fig, axes = figure(4.6, 4, squeeze=False)
    ax = axes[0][0]
    cmap = matplotlib.colormaps["magma"].with_extremes(bad="lightgrey")  # cells no demonstration visits
    image = ax.imshow(np.ma.masked_invalid(weights), cmap=cmap)
    fig.colorbar(image, ax=ax, fraction=0.046)
    place = "cell" if env.name == "gridworld" else "fingertip cell"
    ax.set_title(f"mean PMI weight per {place} ({size} episodes per style; grey: unvisited)", fontsize=8)
    _zone(ax, env)
    save_figure(fig, png)
    rows = []
    for col in range(n):
        inside = [weights[r, col] for r in range(n) if grid_n[r, col] and zone[r, col]]
        outside = [weights[r, col] for r in range(n) if grid_n[r, col] and not zone[r, col]]
        rows.append(
            {
                "col": col,
                "weight": float(np.mean(inside)) if inside else 0.0,
                "outside_weight": float(np.mean(outside)) if outside else 0.0,
            }
        )
    save_csv(rows, csv)


def plot_weights_along(env: StyleEnv, rows: Sequence[dict[str, Any]], png: Path, csv: Path, per_style: int = 3) -> None:
    """The normalised exp(PMI) weight against the step t along the first ``per_style`` demonstrations of each
    style (one seed and data size), steps inside the style zone marked; the CSV holds the plotted points."""
    fig, axes = figure(4.2 * env.n_styles, 3.2, ncols=env.n_styles, squeeze=False)
    points = []
    for z in range(env.n_styles):
        ax = axes[0][z]
        episodes = sorted({r["episode"] for r in rows if r["style"] == z})[:per_style]
        for episode in episodes:
            steps = sorted((r for r in rows if r["episode"] == episode), key=lambda r: r["t"])
            t = [r["t"] for r in steps]
            w = [r["weight"] for r in steps]
            line = ax.plot(t, w, lw=1, label=f"episode {episode}")[0]
            inside = [(a, b) for a, b, r in zip(t, w, steps) if r["in_zone"]]
            if inside:
                ax.scatter(*zip(*inside), s=10, color=line.get_color())
            points += [
                {"style": z, "episode": episode, "t": r["t"], "weight": r["weight"], "in_zone": r["in_zone"]}
                for r in steps
            ]
        ax.axhline(1.0, color="grey", ls=":", lw=0.8)
        ax.set_title(f"style {z} ({env.style_names[z]}); dots: in the style zone", fontsize=8)
        ax.set_xlabel("step t")
        ax.set_ylabel("exp(PMI) / mean")
        ax.legend(fontsize=6)
    save_figure(fig, png)
    save_csv(points, csv)
