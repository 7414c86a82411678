"""NSOT figures: training curves, and 1-NNA-CD against the number of Euler steps (PNG + DVC plot data)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from components.io import save_csv, save_figure
from paperflows.plots import figure, plot_loss_curves
from paperflows.rows import mean, values


def training_curves(curves: list[dict[str, Any]], path: Path) -> None:
    """The loss of every method on the first category (first seed)."""
    first = curves[0]["category"]
    plot_loss_curves([c for c in curves if c["category"] == first], path, f"flow-matching loss ({first})", log_y=True)


def nna_vs_steps(rows: list[dict[str, Any]], methods: list[str], steps: list[int], png: Path, csv: Path) -> None:
    """Mean 1-NNA-CD over categories and seeds per method and step count: a log-x figure and its CSV (one
    column per method)."""
    curve = {m: [mean(values(rows, "1nna_cd", method=m, euler_steps=s)) for s in steps] for m in methods}
    fig, ax = figure()
    for m in methods:
        ax.plot(steps, curve[m], marker="o", label=m)
    ax.axhline(50, color="grey", linestyle=":", label="ideal (50%)")
    ax.set_xscale("log")
    ax.set_xlabel("Euler steps (NFE)")
    ax.set_ylabel("1-NNA-CD (%)  lower is better")
    ax.legend(fontsize=8)
    save_figure(fig, png)
    save_csv(
        [{"euler_steps": s, **{m: round(curve[m][i], 3) for m in methods}} for i, s in enumerate(steps)],
        csv,
        columns=["euler_steps", *methods],
    )
