"""NutriBench's figure: the glucose traces of one (patient, meal) under each strategy's bolus."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from components.io import save_csv, save_figure
from paperflows.plots import figure
from pipelines.nutribench.params import TRUE_BOLUS


def column(arm: str) -> str:
    """The CSV column of an arm's trace (``true carbs`` -> ``true_carbs``)."""
    return arm.replace(" ", "_")


def plot_glucose_traces(
    traces: dict[str, np.ndarray],
    *,
    patient: str,
    carb: float,
    meal_time_min: int,
    tir_low: float,
    tir_high: float,
    png: Path,
    csv: Path,
) -> None:
    """BG (mg/dL) per minute of each arm as PNG, and the same traces as DVC plot data (one column per arm)."""
    fig, ax = figure(7, 4)
    minutes = np.arange(next(iter(traces.values())).shape[0])
    ax.axhspan(tir_low, tir_high, color="tab:green", alpha=0.08, label=f"target {tir_low:g}-{tir_high:g}")
    for name, bg in traces.items():
        ax.plot(minutes, bg, label=name, lw=2.2 if name == TRUE_BOLUS else 1.2, ls="-" if name == TRUE_BOLUS else "--")
    ax.axvline(meal_time_min, color="grey", lw=0.8)
    ax.set_xlabel("minutes")
    ax.set_ylabel("BG (mg/dL)")
    ax.set_title(f"{patient}: {carb:.1f} g meal, bolus from each strategy's estimate", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    save_figure(fig, png)
    save_csv(
        [{"minute": int(t), **{column(n): round(float(bg[t]), 3) for n, bg in traces.items()}} for t in minutes], csv
    )
