"""bc_pmi's data wiring (one paper's helpers, kept out of ``pipeline.py`` so that it reads like the method): the
chosen environment, the demonstration and PMI tables' rows (one state-action tuple each) and their arrays, the
seeded order of a user's episodes within each style, and the tensors behavioural cloning trains on."""

from __future__ import annotations

import numpy as np
import torch

from components.imitation.bc import Demonstrations
from components.imitation.envs import ENVS, StyleEnv
from pipelines.bc_pmi.params import BcPmiParams


def make_env(p: BcPmiParams, horizon: int | None = None, *, experts: bool = True) -> StyleEnv:
    """The chosen environment with its experts' noise and, in the gridworld, its start cells (``experts=False``:
    for stages that run no episode), and the rollouts' horizon (None: the environment's)."""
    starts = {"random_starts": p.data.random_starts} if p.data.env == "gridworld" and experts else {}
    return ENVS[p.data.env](p.data.noise if experts else 0.0, horizon, **starts)


def arrays(rows: list[dict], env: StyleEnv) -> dict[str, np.ndarray]:
    """Table rows (``obs_*``, ``action`` / ``action_*`` columns) back to ``obs``, ``action``, ``style`` arrays."""
    obs = np.array([[r[f"obs_{i}"] for i in range(env.obs_dim)] for r in rows], dtype=np.float64)
    action = (
        np.array([[r[f"action_{i}"] for i in range(env.action_dim)] for r in rows], dtype=np.float64)
        if env.action_dim
        else np.array([r["action"] for r in rows], dtype=np.int64)
    )
    return {
        "obs": obs.reshape(-1, env.obs_dim),
        "action": action,
        **{k: np.array([r[k] for r in rows], dtype=np.int64) for k in ("style", "episode", "t")},
    }


def step_columns(env: StyleEnv, obs: np.ndarray, action: np.ndarray) -> dict[str, float | int]:
    """One state-action tuple as table columns: ``obs_<i>``, and ``action_<i>`` (continuous) or ``action``."""
    out: dict[str, float | int] = {f"obs_{i}": float(v) for i, v in enumerate(obs)}
    if env.action_dim:
        return {**out, **{f"action_{i}": float(v) for i, v in enumerate(action)}}
    return {**out, "action": int(action)}


def file_ranks(pool: dict[str, np.ndarray], n_styles: int, rng: np.random.Generator) -> np.ndarray:
    """Each step's episode rank within its style, in a seeded order of the file's episodes of that style (the
    data sizes take the first ranks)."""
    rank = np.zeros(len(pool["episode"]), dtype=np.int64)
    for style in range(n_styles):
        episodes = np.unique(pool["episode"][pool["style"] == style])
        order = dict(zip(rng.permutation(episodes).tolist(), range(len(episodes))))
        mask = pool["style"] == style
        rank[mask] = [order[e] for e in pool["episode"][mask].tolist()]
    return rank


def pmi_table_rows(
    seed: int,
    size: int,
    env: StyleEnv,
    data: dict[str, np.ndarray],
    zone: np.ndarray,
    pmi: np.ndarray,
    exact: np.ndarray,
    weight: np.ndarray,
) -> list[dict]:
    """The PMI table's rows of one (seed, data size): every tuple with its style, episode, step, whether it lies in
    the style zone, MINE's PMI, the exact PMI (NaN where none) and its weight."""
    return [
        {
            "seed": seed,
            "size": size,
            "style": int(z),
            "episode": int(e),
            "t": int(t),
            "in_zone": bool(i),
            **step_columns(env, s, a),
            "pmi": float(p),
            "pmi_exact": float(x),
            "weight": float(w),
        }
        for s, a, z, e, t, i, p, x, w in zip(
            data["obs"], data["action"], data["style"], data["episode"], data["t"], zone, pmi, exact, weight
        )
    ]


def zone_log_weights(rows: list[dict]) -> np.ndarray:
    """The zone control's log-weights: ``log r`` inside the style zone and 0 outside it, where ``r`` is the ratio of
    MINE's mean weight inside the zone to outside it in these rows; so the control moves as much weight into the
    zone as BC-PMI does on average, but evenly over the zone's tuples."""
    zone = np.array([r["in_zone"] for r in rows], dtype=bool)
    weight = np.array([r["weight"] for r in rows], dtype=np.float64)
    if zone.all() or not zone.any():
        return np.zeros(len(rows))
    return np.log(weight[zone].mean() / weight[~zone].mean()) * zone


# per method, the log-weight of each tuple that BC-PMI's weighting (exp, mean 1 per batch, clip) is applied to;
# None: plain conditional BC (every tuple weighs 1)
LOG_WEIGHTS = {
    "bc": None,
    "bc_pmi": lambda rows: np.array([r["pmi"] for r in rows]),
    "bc_count_pmi": lambda rows: np.array([r["pmi_exact"] for r in rows]),
    "bc_zone": zone_log_weights,
}


def trainer_of(method: str) -> str:
    """The trainer of :data:`components.imitation.bc.TRAINERS` a method runs: plain BC, or the weighted one."""
    return "bc" if LOG_WEIGHTS[method] is None else "bc_pmi"


def demonstrations(rows: list[dict], env: StyleEnv, method: str = "bc_pmi") -> Demonstrations:
    """The PMI table's rows of one (seed, data size) as the tensors behavioural cloning reads: policy features,
    actions (float torques or move indices), styles and the log-weights of ``method`` (:data:`LOG_WEIGHTS`;
    zeros for plain BC)."""
    data = arrays(rows, env)
    log_weight = LOG_WEIGHTS[method]
    values = log_weight(rows) if log_weight else np.zeros(len(rows))
    if not np.isfinite(values).all():
        raise ValueError(f"{method}: non-finite log-weights in the PMI table (a tuple without an exact PMI?)")
    actions = torch.from_numpy(data["action"]).float() if env.action_dim else torch.from_numpy(data["action"])
    return Demonstrations(
        torch.from_numpy(env.features(data["obs"])),
        actions,
        torch.from_numpy(data["style"]),
        torch.tensor(values, dtype=torch.float32),
    )
