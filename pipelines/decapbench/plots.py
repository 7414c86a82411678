"""DeCapBench figures: each metric against the human score, the training curves, SFT vs DPO captioners."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from components.captions.evaluation import summarize
from components.io import save_csv, save_figure
from paperflows.plots import figure
from pipelines.decapbench.params import LABELS

SHOWN = ("dcscore", "capture", "bleu4", "rouge_l", "tfidf_cosine")


def _mean(values: Sequence[float | None]) -> float | None:
    finite = [v for v in values if v is not None and np.isfinite(v)]
    return float(np.mean(finite)) if finite else None


def plot_metric_vs_human(
    captions: Sequence[dict[str, Any]], meta: Sequence[dict[str, Any]], png: Path, csv: Path
) -> None:
    """One panel per metric: its score against the human score for the first seed's captions (long captions
    darker); the CSV holds the Spearman of every metric, mean over seeds, per subset."""
    fig, axes = figure(3.2 * len(SHOWN), 3.2, ncols=len(SHOWN))
    first = meta[0]["seed"] if meta else None
    mine = [r for r in captions if r["seed"] == first and r["human_score"] is not None and r["valid"]]
    words = np.array([r["words"] for r in mine], dtype=float)
    long = words >= np.median(words) if len(words) else words.astype(bool)
    for ax, metric in zip(axes, SHOWN):
        if mine and metric not in mine[0]:  # not computed for these captions (CAPTURE on real files)
            ax.set_title(f"{LABELS[metric]}\n(not computed)", fontsize=8)
            continue
        x = np.array([r["human_score"] for r in mine], dtype=float)
        y = np.array([r[metric] for r in mine], dtype=float)
        ax.scatter(x[~long], y[~long], s=6, alpha=0.5, color="tab:blue", label="shorter half")
        ax.scatter(x[long], y[long], s=6, alpha=0.5, color="tab:red", label="longer half")
        rho = [r["spearman"] for r in meta if r["metric"] == metric and r["subset"] == "all" and r["seed"] == first]
        ax.set_title(f"{LABELS[metric]}\nSpearman {rho[0]:.2f}" if rho else LABELS[metric], fontsize=8)
        ax.set_xlabel("human score")
    if len(mine):
        axes[0].legend(fontsize=6)
    else:
        axes[0].text(0.5, 0.5, "no human scores", ha="center", transform=axes[0].transAxes)
    save_figure(fig, png)
    rows = []
    for metric in LABELS:
        if metric not in {r["metric"] for r in meta}:
            continue
        rows.append(
            {
                "metric": metric,
                **{
                    f"spearman_{s}": _mean([r["spearman"] for r in meta if r["metric"] == metric and r["subset"] == s])
                    for s in ("all", "long", "short")
                },
            }
        )
    save_csv(rows, csv, columns=["metric", "spearman_all", "spearman_long", "spearman_short"])


def plot_training(sft: Sequence[dict[str, Any]], dpo: Sequence[dict[str, Any]], png: Path, csv: Path) -> None:
    """SFT loss and DPO loss / reward accuracy per seed; the CSV: the first seed's curves."""
    fig, axes = figure(12, 3.5, ncols=3)
    for seed in dict.fromkeys(r["seed"] for r in sft):
        rows = [r for r in sft if r["seed"] == seed]
        axes[0].plot([r["step"] for r in rows], [r["loss"] for r in rows], label=f"seed {seed}")
    for seed in dict.fromkeys(r["seed"] for r in dpo):
        rows = [r for r in dpo if r["seed"] == seed]
        axes[1].plot([r["step"] for r in rows], [r["loss"] for r in rows], label=f"seed {seed}")
        axes[2].plot([r["step"] for r in rows], [r["reward_accuracy"] for r in rows], label=f"seed {seed}")
    for ax, title in zip(axes, ("SFT token NLL", "DPO loss", "DPO implicit reward accuracy")):
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.legend(fontsize=7)
    save_figure(fig, png)
    first = sft[0]["seed"] if sft else None
    rows = [{"phase": "sft", "step": r["step"], "loss": r["loss"]} for r in sft if r["seed"] == first]
    rows += [{"phase": "dpo", "step": r["step"], "loss": r["loss"]} for r in dpo if r["seed"] == first]
    save_csv(rows, csv, columns=["phase", "step", "loss"])


def plot_feedquill(rows: Sequence[dict[str, Any]], png: Path, csv: Path) -> None:
    """Per seed, hallucination rate, recall and DCScore of the SFT and DPO captions."""
    seeds = list(dict.fromkeys(r["seed"] for r in rows))
    stats = {
        (n, s): summarize([r for r in rows if r["seed"] == s and r["captioner"] == n])
        for n in ("sft", "dpo")
        for s in seeds
    }
    fig, axes = figure(12, 3.5, ncols=3)
    width = 0.38
    for ax, key, title in zip(
        axes, ("hallucination", "recall", "dcscore"), ("hallucination rate", "recall (oracle facts)", "DCScore")
    ):
        for k, name in enumerate(("sft", "dpo")):
            ax.bar(
                np.arange(len(seeds)) + (k - 0.5) * width,
                [stats[(name, s)][key] for s in seeds],
                width,
                label=name.upper(),
            )
        ax.set_xticks(range(len(seeds)), [f"seed {s}" for s in seeds])
        ax.set_title(title)
        ax.legend(fontsize=7)
    save_figure(fig, png)
    columns = [f"{n}_{k}" for n in ("sft", "dpo") for k in ("hallucination", "recall", "dcscore")]
    save_csv(
        [
            {
                "seed": s,
                **{
                    f"{n}_{k}": stats[(n, s)][k] for n in ("sft", "dpo") for k in ("hallucination", "recall", "dcscore")
                },
                "hallucination_change": stats[("dpo", s)]["hallucination"] - stats[("sft", s)]["hallucination"],
            }
            for s in seeds
        ],
        csv,
        columns=["seed", "hallucination_change", *columns],
    )
