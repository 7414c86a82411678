"""bc_pmi's evaluation helpers (one paper's, kept out of ``pipeline.py`` so that it reads like the method): the
scores of a batch of rollouts, the uniform random policy the learning gates compare against, the map of the PMI
weights per grid cell, and each policy row's mean weight inside and outside the style zone."""

from __future__ import annotations

import math

import numpy as np

from components.imitation.envs import StyleEnv
from pipelines.bc_pmi.data import arrays


def scores_of(result: dict[str, np.ndarray], styles: np.ndarray) -> dict[str, float]:
    """Success, return and style accuracy (overall and per style) of rollouts asked for ``styles``."""
    return {
        "success": float(result["success"].mean()),
        "return": float(np.mean(result["return"])),
        "style_accuracy": float((result["style"] == styles).mean()),
        **{f"style_accuracy_{z}": float((result["style"][styles == z] == z).mean()) for z in np.unique(styles)},
    }


def random_policy(env: StyleEnv, rng: np.random.Generator):
    """The learning gates' trivial reference: uniform random actions, blind to the state and the style."""
    if env.action_dim == 0:
        return lambda obs, styles: rng.integers(0, env.n_actions, len(obs))
    return lambda obs, styles: rng.uniform(-1.0, 1.0, (len(obs), env.action_dim))


def weight_map_rows(pmi_rows: list[dict], env: StyleEnv) -> list[dict]:
    """Per (data size, seed, grid cell): the mean PMI weight of the tuples there, their number, and whether the
    cell lies in the style zone (most of its tuples do)."""
    cells: dict[tuple, list] = {}
    for r, (row, col) in zip(pmi_rows, env.cell(arrays(pmi_rows, env)["obs"])):
        cells.setdefault((r["size"], r["seed"], int(row), int(col)), []).append((r["weight"], r["in_zone"]))
    return [
        {
            "size": k[0],
            "seed": k[1],
            "row": k[2],
            "col": k[3],
            "weight": float(np.mean([w for w, _ in v])),
            "visits": len(v),
            "in_zone": bool(np.mean([z for _, z in v]) > 0.5),
        }
        for k, v in sorted(cells.items())
    ]


def add_zone_weights(rows: list[dict], pmi_rows: list[dict]) -> None:
    """Give every result row the mean PMI weight of its (seed, data size) inside and outside the style zone and
    their ratio; the experts and the random policy carry no weights (NaN), so every row has the same columns."""
    for row in rows:
        row.update(zone_weight=math.nan, outside_weight=math.nan, zone_ratio=math.nan)
        if row["method"] not in ("expert", "random"):
            mine = [r for r in pmi_rows if r["seed"] == row["seed"] and r["size"] == row["size"]]
            zone, w = np.array([r["in_zone"] for r in mine], dtype=bool), np.array([r["weight"] for r in mine])
            row.update(
                zone_weight=float(w[zone].mean()),
                outside_weight=float(w[~zone].mean()),
                zone_ratio=float(w[zone].mean() / w[~zone].mean()),
            )
