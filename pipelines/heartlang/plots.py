"""HeartLang figures: an example ECG with its detected R peaks and its token sentence; macro AUC against the label
fraction per method and task; VQ-HBR and pretraining curves with the codebook usage."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from components.ecg.tokenizer import Sentences
from components.io import save_csv, save_figure
from paperflows.plots import figure
from paperflows.rows import mean
from pipelines.heartlang.params import LABELS


def plot_example(x: np.ndarray, peaks: np.ndarray, sentence: Sentences, leads: Sequence[str], png: Path) -> None:
    """Lead I with the detected R peaks (top) and the first tokens of its sentence, coloured by lead (bottom)."""
    fig, axes = figure(10, 5.2, nrows=2, squeeze=False)
    t = np.arange(x.shape[-1]) / 100
    ax = axes[0][0]
    ax.plot(t, x[0], lw=0.8)
    ax.plot(peaks / 100, x[0][peaks], "rv", ms=5, label="R peaks (lead I)")
    ax.set_xlabel("s")
    ax.set_ylabel("lead I (mV)")
    ax.legend(fontsize=7)
    ax = axes[0][1] if len(axes[0]) > 1 else axes[1][0]
    chans, data = sentence.in_chans[0], sentence.data[0]
    real = np.flatnonzero(chans > 0)[:24]
    for k, i in enumerate(real):
        ax.plot(np.arange(96) + 100 * k, data[i], lw=0.8, color=f"C{int(chans[i]) % 10}")
        ax.axvline(100 * k + 48, color="grey", lw=0.3)
    ax.set_title(
        f"first {len(real)} tokens of the sentence (96 samples, R at 48; colour = lead, leads {', '.join(leads)})",
        fontsize=8,
    )
    ax.set_xticks([])
    save_figure(fig, png)


def plot_auc(rows: Sequence[dict[str, Any]], png: Path, csv: Path) -> None:
    """Mean macro AUC over seeds against the label fraction, one panel per task, one line per method."""
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    fig, axes = figure(4.2 * len(tasks), 3.4, ncols=len(tasks), squeeze=False)
    points = []
    for ax, task in zip(axes[0], tasks):
        for method in methods:
            fr = sorted({r["fraction"] for r in rows if r["task"] == task and r["method"] == method})
            ys = [
                mean([r["auc"] for r in rows if (r["task"], r["method"], r["fraction"]) == (task, method, f)])
                for f in fr
            ]
            ax.plot(fr, ys, marker="o", label=LABELS.get(method, method))
            points += [{"task": task, "method": method, "fraction": f, "auc": y} for f, y in zip(fr, ys)]
        ax.set_xscale("log")
        ax.set_xlabel("label fraction")
        ax.set_ylabel("macro ROC-AUC")
        ax.set_title(task, fontsize=9)
        ax.legend(fontsize=7)
    save_figure(fig, png)
    save_csv(points, csv)


def plot_training(
    vq: Sequence[dict[str, Any]], pre: Sequence[dict[str, Any]], usage: Sequence[dict[str, Any]], png: Path, csv: Path
) -> None:
    """VQ-HBR reconstruction MSE, masked-pretraining loss (per tokenizer, seed) and the codebook usage histogram."""
    fig, axes = figure(13, 3.4, ncols=3, squeeze=False)
    for ax, curves, key, title in (
        (axes[0][0], vq, "mse", "VQ-HBR reconstruction MSE"),
        (axes[0][1], pre, "loss", "masked pretraining cross-entropy"),
    ):
        for tok, seed in sorted({(c["tokenizer"], c["seed"]) for c in curves}):
            mine = [c for c in curves if (c["tokenizer"], c["seed"]) == (tok, seed)]
            ax.plot(
                [c["step"] for c in mine],
                [c[key] for c in mine],
                color="C0" if tok == "qrs" else "C1",
                lw=0.8,
                label=tok if seed == min(c["seed"] for c in curves) else None,
            )
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("step")
        ax.legend(fontsize=7)
    ax = axes[0][2]
    for k, tok in enumerate(sorted({u["tokenizer"] for u in usage})):
        seed = min(u["seed"] for u in usage if u["tokenizer"] == tok)
        counts = np.array(sorted([u["count"] for u in usage if (u["tokenizer"], u["seed"]) == (tok, seed)])[::-1])
        ax.bar(np.arange(len(counts)) + 0.4 * k, counts / max(counts.sum(), 1), width=0.4, label=f"{tok} (seed {seed})")
    ax.set_title("codebook usage, codes sorted by frequency", fontsize=9)
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    save_figure(fig, png)
    save_csv([{"tokenizer": c["tokenizer"], "seed": c["seed"], "step": c["step"], "loss": c["loss"]} for c in pre], csv)
