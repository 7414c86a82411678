"""Activity-cliff figures: RMSE_cliff per target, the training-loss ratio (underfitting), parity plots."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from components.io import save_csv, save_figure
from components.molecules.moleculeace import published_results
from paperflows.plots import figure
from pipelines.activity_cliff.params import LABELS, PUBLISHED_ROW

Rows = Sequence[Mapping[str, Any]]


def model_name(encoder: str, objective: str) -> str:
    return f"{encoder}/{objective}"


def of(rows: Rows, dataset: str, encoder: str, objective: str) -> list[Mapping[str, Any]]:
    """The rows of one (dataset, encoder, objective): one per seed."""
    return [r for r in rows if (r["dataset"], r["encoder"], r["objective"]) == (dataset, encoder, objective)]


def _mean(rows: Rows, key: str, **equal: Any) -> float:
    vals = [r[key] for r in rows if all(r[k] == v for k, v in equal.items()) and r[key] is not None]
    vals = [v for v in vals if np.isfinite(v)]
    return float(np.mean(vals)) if vals else float("nan")


def plot_bars(scores: Rows, svm: Rows, png: Path, csv: Path) -> None:
    """Per target: RMSE (left) and RMSE_cliff (right) of every encoder x objective (mean over seeds, seeds as
    dots), our SVM and MoleculeACE's published SVM + ECFP and MLP + ECFP as lines."""
    datasets = list(dict.fromkeys(r["dataset"] for r in scores))
    models = list(dict.fromkeys((r["encoder"], r["objective"]) for r in scores))
    published = published_results()
    svm_by = {d: [r for r in svm if r["dataset"] == d] for d in datasets}
    fig, axes = figure(max(6.0, 2.2 * len(datasets) * 2), 4, ncols=2)
    width = 0.8 / max(len(models), 1)
    data = []
    for ax, metric in zip(axes, ("rmse", "rmse_cliff")):
        for m, (encoder, objective) in enumerate(models):
            x = np.arange(len(datasets)) + (m - (len(models) - 1) / 2) * width
            mean = [_mean(scores, metric, dataset=d, encoder=encoder, objective=objective) for d in datasets]
            ax.bar(x, mean, width=width, label=model_name(encoder, objective))
            for i, d in enumerate(datasets):
                seeds = [r[metric] for r in of(scores, d, encoder, objective)]
                ax.scatter([x[i]] * len(seeds), seeds, s=6, color="black", zorder=3)
                if metric == "rmse_cliff":
                    data.append(
                        {
                            "dataset": d,
                            "model": model_name(encoder, objective),
                            "rmse_cliff": mean[i],
                            "rmse": _mean(scores, "rmse", dataset=d, encoder=encoder, objective=objective),
                        }
                    )
        for i, d in enumerate(datasets):
            rows = svm_by[d]
            if rows:
                y, p, c = (np.array([r[k] for r in rows]) for k in ("y", "pred", "cliff_mol"))
                sel = c == 1 if metric == "rmse_cliff" else np.ones_like(c, dtype=bool)
                ours = float(np.sqrt(np.mean((y[sel] - p[sel]) ** 2))) if sel.any() else float("nan")
                ax.hlines(
                    ours, i - 0.45, i + 0.45, color="black", linewidth=1.5, label="SVM+ECFP (ours)" if i == 0 else None
                )
            for key, style in (("svm", ":"), ("ecfp_mlp", "--")):
                row = published.get((d, *PUBLISHED_ROW[key]))
                if row is not None:
                    ax.hlines(
                        row[metric == "rmse_cliff"],
                        i - 0.45,
                        i + 0.45,
                        color="grey",
                        linestyle=style,
                        linewidth=1.2,
                        label=f"MoleculeACE {'+'.join(PUBLISHED_ROW[key])}" if i == 0 else None,
                    )
        ax.set_xticks(range(len(datasets)), datasets, fontsize=7)
        ax.set_ylabel("RMSE_cliff (test cliff molecules)" if metric == "rmse_cliff" else "RMSE (all test molecules)")
        ax.set_title(metric.upper().replace("_CLIFF", "_cliff"), fontsize=9)
    axes[1].legend(fontsize=6, ncol=2)
    save_figure(fig, png)
    save_csv(data, csv, columns=["dataset", "model", "rmse_cliff", "rmse"])


def plot_loss_ratio(scores: Rows, per_molecule: Rows, png: Path, csv: Path) -> None:
    """Left: training loss cliff / non-cliff per target and encoder x objective (seeds as dots, 1 = no gap);
    right: per-molecule training losses under plain MSE, cliff vs non-cliff molecules (log bins)."""
    datasets = list(dict.fromkeys(r["dataset"] for r in scores))
    models = list(dict.fromkeys((r["encoder"], r["objective"]) for r in scores))
    fig, axes = figure(12, 4, ncols=2)
    width = 0.8 / max(len(models), 1)
    data = []
    for m, (encoder, objective) in enumerate(models):
        x = np.arange(len(datasets)) + (m - (len(models) - 1) / 2) * width
        mean = [_mean(scores, "train_loss_ratio", dataset=d, encoder=encoder, objective=objective) for d in datasets]
        axes[0].bar(x, mean, width=width, label=model_name(encoder, objective))
        for i, d in enumerate(datasets):
            seeds = [r["train_loss_ratio"] for r in of(scores, d, encoder, objective)]
            axes[0].scatter([x[i]] * len(seeds), seeds, s=6, color="black", zorder=3)
            data.append({"dataset": d, "model": model_name(encoder, objective), "ratio": mean[i]})
    axes[0].axhline(1.0, color="grey", linestyle=":")
    axes[0].set_xticks(range(len(datasets)), datasets, fontsize=7)
    axes[0].set_ylabel("mean training loss: cliff / non-cliff molecules")
    axes[0].legend(fontsize=6, ncol=2)
    if per_molecule:
        logs = np.log10(np.array([r["loss"] for r in per_molecule], dtype=float) + 1e-12)
        bins = np.linspace(logs.min(), logs.max() + 1e-9, 40)
        for k, encoder in enumerate(dict.fromkeys(r["encoder"] for r in per_molecule)):
            for flag, style in ((0, "--"), (1, "-")):
                sel = np.array([r["encoder"] == encoder and r["cliff_mol"] == flag for r in per_molecule])
                if sel.any():
                    axes[1].hist(
                        logs[sel],
                        bins=bins,
                        weights=np.full(sel.sum(), 1 / sel.sum()),
                        histtype="step",
                        linestyle=style,
                        linewidth=1.4,
                        color=f"C{k}",
                        label=f"{LABELS[encoder]}: {'cliff' if flag else 'non-cliff'} molecules",
                    )
        axes[1].legend(fontsize=7)
    axes[1].set_xlabel("log10 per-molecule training loss (squared error, plain MSE models, all seeds)")
    axes[1].set_ylabel("share of molecules")
    save_figure(fig, png)
    save_csv(data, csv, columns=["dataset", "model", "ratio"])


def plot_parity(predictions: Mapping[str, Rows], svm: Rows, png: Path) -> None:
    """Predicted vs measured potency on the test molecules: one panel per dataset and model (first seed),
    the SVM in the first column; cliff molecules in red."""
    panels: list[tuple[str, str, Rows]] = []
    datasets = list(dict.fromkeys(r["dataset"] for r in svm))
    for d in datasets:
        panels.append((d, "SVM+ECFP", [r for r in svm if r["dataset"] == d]))
        for encoder, rows in predictions.items():
            first = min((r["seed"] for r in rows), default=0)
            for objective in dict.fromkeys(r["objective"] for r in rows):
                panels.append(
                    (
                        d,
                        f"{LABELS[encoder]} / {objective}",
                        [
                            r
                            for r in rows
                            if r["dataset"] == d
                            and r["objective"] == objective
                            and r["seed"] == first
                            and r["split"] == "test"
                        ],
                    )
                )
    ncols = max(1, len(panels) // max(len(datasets), 1))
    fig, axes = figure(2.6 * ncols, 2.6 * len(datasets), ncols=ncols, nrows=len(datasets), squeeze=False)
    for k, (d, title, rows) in enumerate(panels):
        ax = axes[k // ncols][k % ncols]
        y, p, c = (np.array([r[key] for r in rows]) for key in ("y", "pred", "cliff_mol"))
        if y.size:
            ax.scatter(y[c == 0], p[c == 0], s=5, color="tab:grey", alpha=0.6, label="non-cliff")
            ax.scatter(y[c == 1], p[c == 1], s=5, color="tab:red", alpha=0.8, label="cliff")
            low, high = float(min(y.min(), p.min())), float(max(y.max(), p.max()))
            ax.plot([low, high], [low, high], color="black", linewidth=0.7)
        ax.set_title(f"{d}\n{title}", fontsize=7)
        ax.tick_params(labelsize=6)
    axes[0][0].legend(fontsize=6)
    axes[-1][0].set_xlabel("measured y (-log10 nM)", fontsize=7)
    axes[-1][0].set_ylabel("predicted y", fontsize=7)
    save_figure(fig, png)
