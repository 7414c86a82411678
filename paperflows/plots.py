"""The one figure set-up of every plot (figures are saved atomically as PNG by components.io.save_figure).

matplotlib loads on the first figure, with the file-only Agg backend: importing a paper costs nothing for
stages that draw nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from components.io import save_figure


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (files only, never a window)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure(width: float = 6, height: float = 4, ncols: int = 1, nrows: int = 1, **kwargs: Any) -> tuple[Any, Any]:
    """A new figure and its axes (``plt.subplots``; extra keyword arguments are passed on)."""
    return pyplot().subplots(nrows, ncols, figsize=(width, height), **kwargs)


def plot_loss_curves(
    curves: list[dict[str, Any]], path: Path, ylabel: str, xlabel: str = "step", log_y: bool = False
) -> None:
    """One line per method (first seed only) from rows ``{"method", "seed", "step", "loss"}``."""
    fig, ax = figure()
    first_seed = curves[0]["seed"]
    for method in dict.fromkeys(c["method"] for c in curves):
        rows = [c for c in curves if c["method"] == method and c["seed"] == first_seed]
        ax.plot([r["step"] for r in rows], [r["loss"] for r in rows], label=method)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if log_y:
        ax.set_yscale("log")
    ax.legend()
    save_figure(fig, path)
