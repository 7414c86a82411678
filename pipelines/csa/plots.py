"""CSA figures: zero-shot accuracy and mislabel AUC vs the number of pairs, and the canonical correlations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from components.io import save_csv, save_figure
from paperflows.plots import figure
from pipelines.csa.params import LABELS

PANELS = (("zero_shot", "zero-shot accuracy"), ("mislabel_auc", "mislabel detection ROC AUC"))


def plot_scaling(rows: list[dict[str, Any]], png: Path, csv: Path) -> None:
    """Mean (over seeds) and min-max band of each metric vs N, one line per method (log-scaled N)."""
    methods = list(dict.fromkeys(r["method"] for r in rows))
    ns = sorted({r["n_pairs"] for r in rows})
    fig, axes = figure(9, 3.4, ncols=len(PANELS), squeeze=False)
    data = []
    for ax, (key, title) in zip(axes[0], PANELS):
        for method in methods:
            per_n = [[r[key] for r in rows if r["method"] == method and r["n_pairs"] == n] for n in ns]
            mean = [float(np.mean(v)) for v in per_n]
            ax.plot(ns, mean, marker="o", label=LABELS.get(method, method))
            ax.fill_between(ns, [min(v) for v in per_n], [max(v) for v in per_n], alpha=0.15)
        ax.set_xscale("log"), ax.set_xlabel("training pairs N"), ax.set_title(title, fontsize=9)
    axes[0][0].legend(fontsize=7)
    for method in methods:
        for n in ns:
            sel = [r for r in rows if r["method"] == method and r["n_pairs"] == n]
            data.append({"n_pairs": n, "method": method, **{k: float(np.mean([r[k] for r in sel])) for k, _ in PANELS}})
    save_csv(data, csv)
    save_figure(fig, png)


def plot_rho(rows: list[dict[str, Any]], png: Path, csv: Path) -> None:
    """Canonical correlations rho_k (mean over seeds), one line per N: the weights CSA puts on each dimension."""
    ns = sorted({r["n_pairs"] for r in rows})
    fig, ax = figure(5, 3.4)
    data = []
    for n in ns:
        ks = sorted({r["k"] for r in rows if r["n_pairs"] == n})
        mean = [float(np.mean([r["rho"] for r in rows if r["n_pairs"] == n and r["k"] == k])) for k in ks]
        ax.plot(ks, mean, label=f"N = {n}")
        data += [{"k": k, "n_pairs": n, "rho": m} for k, m in zip(ks, mean)]
    ax.set_xlabel("canonical dimension k"), ax.set_ylabel("rho_k"), ax.legend(fontsize=7)
    save_csv(data, csv)
    save_figure(fig, png)
