"""MTSAM figures: task losses while training, example predictions beside the ground truth, Δm per method."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from components.io import save_csv, save_figure
from components.models.multitask_dense import TASKS
from paperflows.plots import figure
from pipelines.mtsam.params import LABELS, SHORT


def training_curves(curves: Sequence[Mapping[str, Any]], png: Path, csv: Path) -> None:
    """Each task's training loss against the step, one line per method (first seed; a per-task method's
    line is the loss of that task's own model). The CSV holds the same numbers, one column per method/task."""
    first = min(int(c["seed"]) for c in curves)
    methods = list(dict.fromkeys(c["method"] for c in curves))
    fig, axes = figure(13, 3.6, ncols=len(TASKS))
    table: dict[int, dict[str, float]] = {}
    for ax, task in zip(axes, TASKS):
        key = f"{task}_loss"
        for method in methods:
            rows = [
                c
                for c in curves
                if c["method"] == method and c["seed"] == first and c.get(key) is not None and not np.isnan(c[key])
            ]
            ax.plot([r["step"] for r in rows], [r[key] for r in rows], label=LABELS[method])
            for r in rows:
                table.setdefault(int(r["step"]), {})[f"{method}/{task}"] = float(r[key])
        ax.set_title(f"{task} loss (training batches)")
        ax.set_xlabel("step")
    axes[0].legend(fontsize=7)
    save_figure(fig, png)
    save_csv([{"step": step, **cols} for step, cols in sorted(table.items())], csv)


def _normal_rgb(normal: torch.Tensor) -> np.ndarray:
    unit = normal / normal.norm(dim=0, keepdim=True).clamp_min(1e-12)
    return ((unit.permute(1, 2, 0).numpy() + 1) / 2).clip(0, 1)


def example_predictions(
    data: Mapping[str, torch.Tensor], examples: Mapping[str, Mapping[str, torch.Tensor]], png: Path
) -> None:
    """Rows: test images. Columns: the image, then ground truth and each method's prediction for segmentation,
    depth and normals (first seed)."""
    methods = list(examples)
    n = min((len(v["seg"]) for v in examples.values()), default=0)
    if n == 0:
        fig, ax = figure(4, 2)
        ax.text(0.5, 0.5, "no example predictions (train.examples = 0)", ha="center")
        ax.axis("off")
        save_figure(fig, png)
        return
    sources = ["ground truth", *methods]
    fig, axes = figure(1.6 * (1 + 3 * len(sources)), 1.7 * n, ncols=1 + 3 * len(sources), nrows=n, squeeze=False)
    for i in range(n):
        axes[i, 0].imshow(data["test/image"][i].permute(1, 2, 0).numpy().clip(0, 1))
        depth_max = float(data["test/depth"][i].max())
        for j, source in enumerate(sources):
            if source == "ground truth":
                seg, depth, normal = data["test/label"][i], data["test/depth"][i, 0], data["test/normal"][i]
            else:
                pred = examples[source]
                seg, depth, normal = pred["seg"][i].argmax(0), pred["depth"][i, 0], pred["normal"][i]
            panels = [
                (seg.numpy(), {"cmap": "tab10", "vmin": -1, "vmax": 9}),
                (depth.numpy(), {"cmap": "viridis", "vmin": 0, "vmax": depth_max}),
                (_normal_rgb(normal), {}),
            ]
            for k, (image, style) in enumerate(panels):
                ax = axes[i, 1 + 3 * j + k]
                ax.imshow(image, **style)
                if i == 0:
                    ax.set_title(f"{SHORT.get(source, 'truth')}: {TASKS[k]}", fontsize=6)
    for ax in axes.ravel():
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0, 0].set_title("image", fontsize=7)
    save_figure(fig, png)


def delta_m(rows: Sequence[Mapping[str, Any]], png: Path, csv: Path) -> None:
    """Δm (%) per method: each seed a dot, the mean a bar."""
    methods = list(dict.fromkeys(r["method"] for r in rows))
    means = [float(np.mean([r["delta_m"] for r in rows if r["method"] == m])) for m in methods]
    fig, ax = figure(7, 3.5)
    ax.bar(range(len(methods)), means, color="lightsteelblue")
    for i, m in enumerate(methods):
        ys = [r["delta_m"] for r in rows if r["method"] == m]
        ax.scatter([i] * len(ys), ys, color="black", s=12, zorder=3)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_xticks(range(len(methods)), [SHORT[m] for m in methods], fontsize=8)
    ax.set_ylabel("Δm vs single-task baseline (%)")
    save_figure(fig, png)
    save_csv([{"method": m, "delta_m": v} for m, v in zip(methods, means)], csv)
