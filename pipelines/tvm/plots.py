"""TVM figures: accuracy vs generated tokens per method and verifier; the three label types along a solution."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.ticker import NullFormatter

from components.io import save_csv, save_figure
from paperflows.plots import figure

COLOURS = {"none": "grey", "orm": "C0", "prm": "C2", "tvm": "C3", "oracle": "black"}
MARKERS = {"single": "o", "majority": "s", "best_of_n": "^", "beam": "D"}


def plot_accuracy_vs_tokens(rows: Sequence[Mapping[str, Any]], png: Path, csv: Path) -> None:
    """Mean accuracy over seeds against generated tokens per question, one point per (method, verifier)."""
    pairs = list(dict.fromkeys((r["method"], r["verifier"]) for r in rows))
    data = []
    fig, ax = figure(5.6, 3.8)
    for method, verifier in pairs:
        mine = [r for r in rows if r["method"] == method and r["verifier"] == verifier]
        acc, tokens = 100 * float(np.mean([r["accuracy"] for r in mine])), float(np.mean([r["tokens"] for r in mine]))
        ax.scatter(
            tokens,
            acc,
            marker=MARKERS.get(method, "o"),
            color=COLOURS.get(verifier, "C4"),
            s=40,
            label=f"{method} / {verifier}",
        )
        data.append({"method": method, "verifier": verifier, "tokens": tokens, "accuracy": acc})
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("generated tokens per question")
    ax.set_ylabel("accuracy (%)")
    ax.legend(fontsize=6, ncol=2)
    save_figure(fig, png)
    save_csv(data, csv, columns=["method", "verifier", "tokens", "accuracy"])


def plot_labels(solution: str, labels: Mapping[str, np.ndarray], png: Path) -> None:
    """The label of every solution token (one curve per label type) along one wrong training solution."""
    text = solution + "\n"
    fig, ax = figure(max(6.0, 0.16 * len(text)), 2.8)
    for k, (kind, values) in enumerate(labels.items()):
        ax.step(
            range(len(values)), np.asarray(values) + 0.012 * (k - 1), where="mid", label=kind, color=COLOURS.get(kind)
        )  # offset a little so that equal labels stay visible
    ax.set_xticks(range(len(text)), [c if c != "\n" else "⏎" for c in text], fontsize=6)
    ax.set_ylim(-0.05, 1.05)
    ax.set_ylabel("label")
    ax.legend(fontsize=7)
    save_figure(fig, png)
