"""HRF figures: quality against NFE, trajectories, the velocity law at the origin, MNIST samples; and the
DVC plot data of the quality curves."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from components.io import save_csv, save_figure
from components.metrics.stats import mean_ci
from paperflows.plots import figure
from paperflows.rows import mean, rows_where
from pipelines.hrf.params import (
    DATASET_LABEL,
    LOWDIM,
    METRIC_LABEL,
    HrfParams,
    dataset_depths,
    dataset_schedules,
    method_name,
    schedule_label,
)

Examples = dict[tuple[str, int, str], Tensor]
Best = dict[int, tuple[str, dict[int, float]]]  # nfe -> (steps, {seed: value})


def number(value: Any) -> float:
    """A stored number; an undefined one (NaN written to parquet, read back as None) is NaN."""
    return float("nan") if value is None else float(value)


def seed_values(rows: list[dict[str, Any]], key: str, **equal: Any) -> dict[int, float]:
    """``{seed: key}`` over the rows matching ``equal``."""
    return {int(r["seed"]): number(r[key]) for r in rows_where(rows, **equal)}


def best_by_nfe(rows: list[dict[str, Any]], dataset: str, method: str, key: str = "distance") -> Best:
    """For each NFE the schedule of ``method`` with the lowest mean over seeds of its validation score
    ``val_<key>`` (of ``key`` itself where rows have no validation score), and that schedule's ``key``:
    ``{nfe: (steps, {seed: value})}``, NFEs ascending."""
    chosen_by: dict[int, tuple[str, float]] = {}
    out: Best = {}
    for steps in dict.fromkeys(r["steps"] for r in rows_where(rows, dataset=dataset, method=method)):
        chosen = rows_where(rows, dataset=dataset, method=method, steps=steps)
        select = f"val_{key}" if f"val_{key}" in chosen[0] else key
        score = mean(list(seed_values(chosen, select).values()))
        nfe = int(chosen[0]["nfe"])
        if nfe not in chosen_by or score < chosen_by[nfe][1]:
            chosen_by[nfe], out[nfe] = (steps, score), (steps, seed_values(chosen, key))
    return dict(sorted(out.items()))


def _grid(width: float, height: float, nrows: int, ncols: int) -> tuple[Any, np.ndarray]:
    fig, axes = figure(width, height, ncols=ncols, nrows=nrows)
    return fig, np.array(axes, dtype=object).reshape(nrows, ncols)


def _half_width(values: list[float]) -> float:
    interval = mean_ci(values)
    return interval.high - interval.estimate if interval.n > 1 else 0.0


def quality_plot(
    rows: list[dict[str, Any]],
    datasets: list[str],
    path: Path,
    key: str = "distance",
    floor: list[dict[str, Any]] | None = None,
    oracle: list[dict[str, Any]] | None = None,
) -> None:
    """Test metric per NFE of every method (HRF: the split chosen on validation), mean over seeds with its 95%
    interval, log-log; the exact fields' curves dashed and the sampling floor dotted where given."""
    fig, axes = _grid(5 * len(datasets), 4, 1, len(datasets))
    for ax, dataset in zip(axes[0], datasets):
        curves = [(m, rows, "o-", "") for m in dict.fromkeys(r["method"] for r in rows if r["dataset"] == dataset)]
        curves += [
            (m, oracle, "x--", " exact field")
            for m in dict.fromkeys(r["method"] for r in oracle or [] if r["dataset"] == dataset)
        ]
        for method, table, style, suffix in curves:
            best = best_by_nfe(table, dataset, method, key)
            vals = [list(b[1].values()) for b in best.values()]
            ax.errorbar(
                list(best),
                [mean(v) for v in vals],
                yerr=[_half_width(v) for v in vals],
                fmt=style,
                capsize=3,
                label=f"{method}{suffix}",
            )
        lows = [r["floor"] for r in floor or [] if r["dataset"] == dataset]
        if lows:
            ax.axhline(mean(lows), color="gray", linestyle=":", label="floor (two exact samples)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("NFE")
        ax.set_ylabel(f"{METRIC_LABEL[dataset]} (lower is better)")
        ax.set_title(DATASET_LABEL[dataset])
        ax.legend(fontsize=8)
    save_figure(fig, path)


def quality_csv(rows: list[dict[str, Any]], path: Path, key: str = "distance") -> None:
    """DVC plot data: ``dataset, method, nfe, steps, value`` (split chosen on validation, test mean over seeds)."""
    out = [
        {"dataset": dataset, "method": method, "nfe": nfe, "steps": steps, "value": round(mean(list(vals.values())), 5)}
        for dataset in dict.fromkeys(r["dataset"] for r in rows)
        for method in dict.fromkeys(r["method"] for r in rows if r["dataset"] == dataset)
        for nfe, (steps, vals) in best_by_nfe(rows, dataset, method, key).items()
    ]
    save_csv(out, path, columns=["dataset", "method", "nfe", "steps", "value"])


def nearest_schedule(p: HrfParams, dataset: str, depth: int) -> str:
    """The schedule of a depth whose NFE is nearest to ``eval.plot_nfe``."""
    options = dataset_schedules(p, dataset, depth)
    return schedule_label(min(options, key=lambda s: abs(math.prod(s) - p.eval.plot_nfe)))


def trajectory_plot(p: HrfParams, examples: Examples, path: Path) -> None:
    """Sample paths of every depth: x against t (1-D mixture), the plane (2-D moons)."""
    columns = max(len(dataset_depths(p, d)) for d in LOWDIM)
    fig, axes = _grid(4.2 * columns, 8, 2, columns)
    for row, dataset in enumerate(LOWDIM):
        depths = dataset_depths(p, dataset)
        for col in range(columns):
            ax = axes[row][col]
            if col >= len(depths):
                ax.axis("off")
                continue
            depth = depths[col]
            steps = nearest_schedule(p, dataset, depth)
            traj = examples[(dataset, depth, steps)].numpy()  # [N_0 + 1, B, d]
            if dataset == "mixture":
                times = torch.linspace(0, 1, traj.shape[0]).numpy()
                ax.plot(traj[:, :, 0], times, color="#748B47", alpha=0.25, linewidth=0.7)
                ax.scatter(traj[0, :, 0], times[0] + 0 * traj[0, :, 0], s=3, c="#4D4D4D", zorder=3)
                ax.scatter(traj[-1, :, 0], times[-1] + 0 * traj[-1, :, 0], s=3, c="blue", zorder=3)
                ax.set_xlabel("x")
                ax.set_ylabel("t")
            else:
                ax.plot(traj[:, :, 0], traj[:, :, 1], color="#748B47", alpha=0.25, linewidth=0.7)
                ax.scatter(traj[0, :, 0], traj[0, :, 1], s=3, c="#4D4D4D", zorder=3, label="x0")
                ax.scatter(traj[-1, :, 0], traj[-1, :, 1], s=3, c="blue", zorder=3, label="x1")
                ax.set_aspect("equal", adjustable="datalim")
            ax.set_title(f"{DATASET_LABEL[dataset]}: {method_name(depth)} steps {steps}")
    fig.tight_layout()
    save_figure(fig, path)


def velocity_plot(p: HrfParams, examples: Examples, path: Path) -> None:
    """Velocities at the origin: HRF samples against the true law (depth 0 in ``examples``) and RF's value."""
    times = p.eval.velocity_times
    fig, axes = _grid(4.5 * len(times), 8, 2, len(times))
    for col, t in enumerate(times):
        ax = axes[0][col]
        truth = examples.get(("mixture", 0, f"v{t:g}"))
        if truth is not None:
            ax.hist(truth[:, 0].numpy(), bins=80, density=True, histtype="step", color="black", label="true law")
        for depth in p.model.depths:
            v = examples[("mixture", depth, f"v{t:g}")][:, 0].numpy()
            if depth == 1:
                ax.axvline(float(v[0]), color="red", linestyle="--", label="RF (one value)")
            else:
                ax.hist(v, bins=80, density=True, histtype="step", label=f"{method_name(depth)} samples")
        ax.set_title(f"1-D mixture: velocity at x = 0, t = {t:g}")
        ax.set_xlabel("v")
        ax.legend(fontsize=8)
        ax = axes[1][col]
        truth = examples.get(("moons", 0, f"v{t:g}"))
        if truth is not None:
            ax.scatter(truth[:, 0].numpy(), truth[:, 1].numpy(), s=2, c="black", alpha=0.3, label="true law")
        for depth in p.model.depths_2d:
            v = examples[("moons", depth, f"v{t:g}")].numpy()
            if depth == 1:
                ax.scatter(v[:1, 0], v[:1, 1], s=80, marker="*", c="red", label="RF (one value)", zorder=4)
            else:
                ax.scatter(v[:, 0], v[:, 1], s=2, alpha=0.4, label=f"{method_name(depth)} samples")
        ax.set_title(f"2-D moons: velocity at the origin, t = {t:g}")
        ax.set_aspect("equal", adjustable="datalim")
        ax.legend(fontsize=8, markerscale=3)
    fig.tight_layout()
    save_figure(fig, path)


def sample_grid(p: HrfParams, grids: dict[tuple[int, str], Tensor], path: Path) -> None:
    """MNIST samples of every depth with its largest-NFE schedule (rows of 8)."""
    keys = [(d, max(dataset_schedules(p, "mnist", d), key=math.prod)) for d in p.model.depths_image]
    fig, axes = _grid(4 * len(keys), 4, 1, len(keys))
    for ax, (depth, steps) in zip(axes[0], keys):
        imgs = grids[(depth, schedule_label(steps))]
        tiles = imgs[: (len(imgs) // 8) * 8].view(-1, 8, 28, 28).permute(0, 2, 1, 3).reshape(-1, 8 * 28)
        ax.imshow(tiles.numpy(), cmap="gray", vmin=-1, vmax=1)
        ax.set_title(f"{method_name(depth)} steps {schedule_label(steps)} (NFE {math.prod(steps)})")
        ax.axis("off")
    save_figure(fig, path)
