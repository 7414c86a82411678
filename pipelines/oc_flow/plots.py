"""OC-Flow figures: guided samples per method, the gamma trade-off, and the SO(3) manifold error per step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from torch import Tensor

from components.io import save_csv, save_figure
from paperflows.plots import figure
from paperflows.rows import mean, values
from pipelines.oc_flow.params import SO3_METHODS, GuidanceParams, SO3Params, euclidean_methods, ocflow_label

FLOOR = 1e-17  # exact zeros (the source rotations of the Riemannian rollouts) on a log axis


def plot_samples(samples: dict[str, Tensor], data: Tensor, target: Tensor, g: GuidanceParams, path: Path) -> None:
    """One panel per (reward, method): the first seed's guided samples over the training data."""
    labels = [m[0] for m in euclidean_methods(g)]
    fig, axes = figure(2.2 * len(labels), 2.2 * len(g.rewards), ncols=len(labels), nrows=len(g.rewards))
    axes = np.asarray(axes, dtype=object).reshape(len(g.rewards), len(labels))
    for i, reward_name in enumerate(g.rewards):
        for j, label in enumerate(labels):
            ax = axes[i][j]
            ax.scatter(data[:, 0], data[:, 1], s=1, c="lightgrey")
            x = samples[f"{reward_name}/{label}"]
            ax.scatter(x[:, 0], x[:, 1], s=2, c="tab:blue")
            if reward_name == "target":
                ax.scatter([float(target[0])], [float(target[1])], marker="*", s=80, c="tab:red")
            ax.set_title(f"{reward_name}: {label}", fontsize=7)
            ax.set_xlim(-2, 3)
            ax.set_ylim(-1.5, 2.5)
    save_figure(fig, path)


def plot_tradeoff(rows: list[dict[str, Any]], g: GuidanceParams, png: Path, csv: Path) -> None:
    """Reward against the sliced-W2 distance to held-out data, means over seeds; the CSV holds the first reward's
    gamma sweep."""

    def avg(reward_name: str, label: str, key: str) -> float:
        return mean(values(rows, key, reward_fn=reward_name, method=label))

    fig, axes = figure(5.5 * len(g.rewards), 4, ncols=len(g.rewards))
    for ax, reward_name in zip(np.atleast_1d(axes), g.rewards):
        for label, _, _ in euclidean_methods(g):
            x, y = avg(reward_name, label, "sw_to_data"), avg(reward_name, label, "reward")
            ax.scatter([x], [y], marker="o" if label.startswith("ocflow") else "s")
            ax.annotate(label.replace("ocflow_g", "γ="), (x, y), fontsize=7)
        ax.set_xlabel("sliced W2 to held-out data (lower: closer to the data distribution)")
        ax.set_ylabel(f"{reward_name} reward (higher is better)")
        ax.set_title(f"reward vs fidelity, mean over seeds ({reward_name})", fontsize=9)
    fig.tight_layout()
    save_figure(fig, png)
    first = g.rewards[0]
    save_csv(
        [
            {
                "gamma": gamma,
                "reward": avg(first, ocflow_label(gamma), "reward"),
                "sw_to_data": avg(first, ocflow_label(gamma), "sw_to_data"),
            }
            for gamma in g.gammas
        ],
        csv,
    )


def plot_manifold(curve: list[dict[str, Any]], s: SO3Params, png: Path, csv: Path) -> None:
    """``max ||R^T R - I||`` per Euler step of the first seed, exp-map against naive updates."""
    labels = [m[0] for m in SO3_METHODS]
    fig, ax = figure(6, 4)
    for label in labels:
        steps = [c for c in curve if c["method"] == label]
        ax.plot(
            [r["step"] for r in steps],
            [max(r["orth_err_max"], FLOOR) for r in steps],
            label=label,
            linestyle="--" if label.startswith("naive") else "-",
        )
    ax.axhline(s.manifold_tol, color="grey", linestyle=":", label=f"tolerance {s.manifold_tol:g}")
    ax.set_yscale("log")
    ax.set_xlabel("Euler step k")
    ax.set_ylabel("max ||R^T R - I||_F over samples")
    ax.legend(fontsize=7)
    save_figure(fig, png)
    by_step = {k: {c["method"]: c["orth_err_max"] for c in curve if c["step"] == k} for k in range(s.n_steps + 1)}
    save_csv([{"step": k, **{label: by_step[k][label] for label in labels}} for k in range(s.n_steps + 1)], csv)
