"""STAR figures: the streams' tasks, accuracy on the tasks seen so far after each task, and STAR's paired gain."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from components.io import save_csv, save_figure
from paperflows.plots import figure
from pipelines.star.params import BASE_OF, DATASET_LABELS, LABELS


def plot_streams(samples: dict[str, list[tuple[tuple[int, ...], np.ndarray]]], png: Path) -> None:
    """Six training images of every task, one row per stream (the tasks a method sees in order)."""
    names = list(samples)
    n_tasks = max(len(tasks) for tasks in samples.values())
    fig, axes = figure(1.9 * n_tasks, 1.1 * len(names) + 0.4, ncols=n_tasks, nrows=len(names), squeeze=False)
    for r, name in enumerate(names):
        for t in range(n_tasks):
            ax = axes[r][t]
            ax.axis("off")
            if t >= len(samples[name]):
                continue
            classes, images = samples[name][t]
            tiles = images if images.ndim == 3 else images.mean(axis=-1)
            ax.imshow(np.concatenate(list(tiles[:3]), axis=1) if len(tiles) else np.zeros((2, 2)), cmap="gray")
            ax.set_title(
                f"{DATASET_LABELS.get(name, name) + ', ' if t == 0 else ''}task {t + 1}: classes "
                f"{', '.join(map(str, classes))}",
                fontsize=7,
            )
    save_figure(fig, png)


def plot_accuracy_vs_tasks(cells: Sequence[dict[str, Any]], png: Path, csv: Path) -> None:
    """Mean (over seeds) of the average accuracy on the tasks seen so far, after each task; one panel per
    stream and buffer size (Class-IL solid, Task-IL dashed), one colour per method."""
    panels = sorted(
        {(c["stream"], c["buffer"]) for c in cells if c["buffer"]},
        key=lambda sb: (list(dict.fromkeys(c["stream"] for c in cells)).index(sb[0]), sb[1]),
    )
    methods = list(dict.fromkeys(c["method"] for c in cells))
    data: dict[tuple[Any, ...], dict[str, Any]] = {}
    fig, axes = figure(4.2 * max(len(panels), 1), 3.4, ncols=max(len(panels), 1), squeeze=False)
    for ax, (stream, buffer) in zip(axes[0], panels):
        for k, method in enumerate(methods):
            for setting, style in (("class_il", "-"), ("task_il", "--")):
                mine = [
                    c
                    for c in cells
                    if c["stream"] == stream
                    and c["method"] == method
                    and c["setting"] == setting
                    and c["buffer"] in (buffer, 0)
                ]
                if not mine:
                    continue
                steps = sorted({c["after_task"] for c in mine})
                curve = [float(np.mean([c["accuracy"] for c in mine if c["after_task"] == i])) for i in steps]
                ax.plot(
                    [i + 1 for i in steps],
                    curve,
                    style,
                    color=f"C{k}",
                    marker="o",
                    markersize=3,
                    label=LABELS.get(method, method) if setting == "class_il" else None,
                )
                for i, v in zip(steps, curve):
                    key = (stream, buffer, method, i + 1)
                    data.setdefault(key, dict(zip(("stream", "buffer", "method", "tasks_seen"), key)))[setting] = v
        ax.set_title(f"{DATASET_LABELS.get(stream, stream)}, buffer {buffer}", fontsize=9)
        ax.set_xlabel("tasks learned")
        ax.set_ylabel("accuracy on tasks seen (%)")
    axes[0][0].legend(fontsize=7, title="solid Class-IL, dashed Task-IL", title_fontsize=7)
    save_figure(fig, png)
    columns = ["stream", "buffer", "method", "tasks_seen", "class_il", "task_il"]
    save_csv([{k: r.get(k) for k in columns} for r in data.values()], csv, columns=columns)


def plot_star_gain(rows: Sequence[dict[str, Any]], png: Path, csv: Path) -> None:
    """STAR minus its base, final Class-IL accuracy, per (seed, buffer) unit: points and the mean."""
    pairs = list(dict.fromkeys((r["stream"], r["method"]) for r in rows if r["method"] in BASE_OF))
    data: list[dict[str, Any]] = []
    fig, ax = figure(1.6 + 1.4 * max(len(pairs), 1), 3.6)
    for x, (stream, method) in enumerate(pairs):
        base = {
            (r["seed"], r["buffer"]): r["class_il"]
            for r in rows
            if r["stream"] == stream and r["method"] == BASE_OF[method]
        }
        diffs = [
            (r["seed"], r["buffer"], r["class_il"] - base[(r["seed"], r["buffer"])])
            for r in rows
            if r["stream"] == stream and r["method"] == method and (r["seed"], r["buffer"]) in base
        ]
        if not diffs:
            continue
        values = [d for _, _, d in diffs]
        ax.scatter([x + 0.08 * (i - len(values) / 2) for i in range(len(values))], values, s=14, color=f"C{x}")
        ax.hlines(np.mean(values), x - 0.3, x + 0.3, color="black")
        data += [
            {"stream": stream, "method": method, "unit": f"s{seed}_b{buffer}", "difference": d}
            for seed, buffer, d in diffs
        ]
    ax.axhline(0, color="grey", linestyle=":")
    ax.set_xticks(range(len(pairs)), [f"{LABELS[m]}\n{DATASET_LABELS.get(s, s)}" for s, m in pairs], fontsize=7)
    ax.set_ylabel("STAR - base, final Class-IL acc. (pp)")
    ax.set_title("paired by seed and buffer size (bar: mean)", fontsize=9)
    save_figure(fig, png)
    save_csv(data, csv, columns=["stream", "method", "unit", "difference"])
