"""KnOTS figures: the validation search over lambda."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from components.io import save_csv, save_figure
from paperflows.plots import figure


def lambda_search(rows: list[dict[str, Any]], methods: list[str], lambdas: list[float], png: Path, csv: Path) -> None:
    """Validation average normalised accuracy against lambda, per method: best over top-K per seed, mean over seeds."""
    per_seed: dict[tuple[str, float, int], float] = {}
    for r in rows:
        key = (r["method"], r["lam"], r["seed"])
        per_seed[key] = max(per_seed.get(key, float("-inf")), r["val_norm_acc"])
    seeds = {r["seed"] for r in rows}
    curve = {
        (m, lam): sum(v for (mm, ll, _), v in per_seed.items() if (mm, ll) == (m, lam)) / len(seeds)
        for m in methods
        for lam in lambdas
    }
    fig, ax = figure()
    for method in methods:
        ax.plot(lambdas, [curve[(method, lam)] for lam in lambdas], marker="o", label=method)
    ax.set_xlabel("lambda")
    ax.set_ylabel("validation avg normalised accuracy (%)")
    ax.legend(fontsize=8)
    save_figure(fig, png)
    save_csv([{"lambda": lam, **{m: round(curve[(m, lam)], 3) for m in methods}} for lam in lambdas], csv)
