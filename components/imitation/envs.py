"""Environments of styled experts behind one signature: the corridor gridworld and MuJoCo ``Reacher-v5``.

A :class:`StyleEnv` gives what BC-PMI needs of an environment: noisy expert demonstrations per style, the
policy's state features, the style zone (the states where the experts of different styles act
differently), a rollout that reports success, the rollout's style and its return, a 2-D map cell of each
state (for the weight maps) and, where the state-action space is tabular, the exact PMI from counts.
Observations are float arrays ``obs [N, obs_dim]`` (the gridworld's are its ``(row, col)`` cells); actions
are ints ``[N]`` (``action_dim = 0``, ``n_actions`` values) or floats ``[N, action_dim]``.
:data:`ENVS` maps a name to ``make(noise, horizon=None) -> StyleEnv``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from components.imitation import gridworld, reacher
from components.imitation.mine import count_pmi
from components.imitation.trajectories import TrajectorySpec

Act = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class StyleEnv:
    """One environment: its sizes, and functions of ``obs`` / ``action`` arrays (see the module docstring).

    ``demonstrations(per_style, rng)`` returns ``obs, action, style, episode, t`` (style-major episodes);
    ``rollout(act, styles, rng)`` returns per episode ``success`` (bool), ``style`` (the style the rollout
    shows, -1 none) and ``return`` (NaN where the environment defines no reward).
    """

    name: str
    style_names: tuple[str, ...]
    obs_dim: int
    action_dim: int
    n_actions: int
    map_size: int
    demonstrations: Callable[[int, np.random.Generator], dict[str, np.ndarray]]
    expert: Callable[[np.random.Generator], Act]
    features: Callable[[np.ndarray], np.ndarray]
    in_zone: Callable[[np.ndarray], np.ndarray]
    shared: Callable[[np.ndarray, np.ndarray], np.ndarray]
    rollout: Callable[[Act, np.ndarray, np.random.Generator], dict[str, np.ndarray]]
    cell: Callable[[np.ndarray], np.ndarray]
    exact_pmi: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None
    zone_rows: tuple[int, int] | None = None

    @property
    def n_styles(self) -> int:
        return len(self.style_names)

    def tuple_features(self, obs: np.ndarray, action: np.ndarray) -> np.ndarray:
        """MINE's ``x = [state features; action]`` (one-hot for discrete actions): ``[N, d]`` float32."""
        action = np.asarray(action)
        part = (
            np.eye(self.n_actions, dtype=np.float32)[action.astype(np.int64)]
            if self.action_dim == 0
            else action.reshape(len(action), self.action_dim).astype(np.float32)
        )
        return np.concatenate([self.features(obs), part], axis=1)

    def trajectory_spec(self) -> TrajectorySpec:
        return TrajectorySpec(
            obs_dim=self.obs_dim,
            action_dim=self.action_dim,
            n_styles=self.n_styles,
            n_actions=self.n_actions,
            action_bounds=(-1.0, 1.0),
        )


def make_gridworld(noise: float, horizon: int | None = None, random_starts: bool = False) -> StyleEnv:
    """The 11 x 11 corridor gridworld (:mod:`components.imitation.gridworld`); ``noise`` is epsilon, and
    ``random_starts`` draws each episode's start cell below the zone's middle row."""
    cfg = gridworld.GridConfig(
        epsilon=noise, horizon=horizon or gridworld.GridConfig.horizon, random_starts=random_starts
    )

    def cells(obs: np.ndarray) -> np.ndarray:
        return np.asarray(obs).reshape(-1, 2).astype(np.int64)

    def demonstrations(per_style: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        demos = gridworld.expert_demonstrations(cfg, per_style, rng)
        return {"obs": demos.pop("state").astype(np.float64), **demos}

    def rollout(act: Act, styles: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        out = gridworld.rollout(cfg, lambda s, z: act(s.astype(np.float64), z), styles, rng)
        return {"success": out["success"], "style": out["crossed"], "return": np.full(len(styles), math.nan)}

    def expert(rng: np.random.Generator) -> Act:
        act = gridworld.noisy_expert(cfg, rng)
        return lambda obs, styles: act(cells(obs), styles)

    def shared(obs: np.ndarray, action: np.ndarray) -> np.ndarray:
        state = cells(obs)
        return ~gridworld.in_zone(cfg, state[:, 0]) & (state[:, 1] == cfg.mid) & (np.asarray(action) == 0)

    def exact(obs: np.ndarray, action: np.ndarray, style: np.ndarray) -> np.ndarray:
        state = cells(obs)
        ids = (state[:, 0] * cfg.size + state[:, 1]) * gridworld.N_ACTIONS + np.asarray(action)
        return count_pmi(ids, np.asarray(style), cfg.n_styles)

    return StyleEnv(
        name="gridworld",
        style_names=gridworld.STYLE_NAMES[: cfg.n_styles],
        obs_dim=2,
        action_dim=0,
        n_actions=gridworld.N_ACTIONS,
        map_size=cfg.size,
        demonstrations=demonstrations,
        expert=expert,
        features=lambda obs: gridworld.state_features(cfg, cells(obs)),
        in_zone=lambda obs: gridworld.in_zone(cfg, cells(obs)[:, 0]),
        shared=shared,
        rollout=rollout,
        cell=cells,
        exact_pmi=exact,
        zone_rows=(cfg.zone_top, cfg.zone_bottom),
    )


MAP_BINS, MAP_REACH = 23, 0.23  # the Reacher's fingertip plane [-0.23, 0.23]^2 in 23 x 23 cells


def make_reacher(noise: float, horizon: int | None = None) -> StyleEnv:
    """Two sweep styles on MuJoCo ``Reacher-v5`` (:mod:`components.imitation.reacher`); ``noise`` is the std
    of the experts' Gaussian action noise."""
    cfg = reacher.ReacherConfig(noise=noise, horizon=horizon or reacher.ReacherConfig.horizon)
    pool: list = []  # simulators shared by this environment's rollouts (built lazily)

    def cell(obs: np.ndarray) -> np.ndarray:
        tip = reacher.fingertip(obs)
        scaled = np.floor((tip + MAP_REACH) / (2 * MAP_REACH) * MAP_BINS).astype(np.int64).clip(0, MAP_BINS - 1)
        return np.stack([MAP_BINS - 1 - scaled[:, 1], scaled[:, 0]], axis=1)  # (row, col), row 0 at the top

    def rollout(act: Act, styles: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        out = reacher.rollout(cfg, act, styles, rng, pool=pool)
        return {"success": out["success"], "style": out["style"], "return": out["return"]}

    return StyleEnv(
        name="reacher",
        style_names=reacher.STYLE_NAMES,
        obs_dim=reacher.OBS_DIM,
        action_dim=reacher.ACTION_DIM,
        n_actions=0,
        map_size=MAP_BINS,
        demonstrations=lambda n, rng: reacher.expert_demonstrations(cfg, n, rng, pool),
        expert=lambda rng: reacher.noisy_expert(cfg, rng),
        features=reacher.state_features,
        in_zone=lambda obs: reacher.in_zone(cfg, obs),
        shared=lambda obs, action: reacher.before_sweep(cfg, obs),
        rollout=rollout,
        cell=cell,
    )


ENVS: dict[str, Callable[..., StyleEnv]] = {"gridworld": make_gridworld, "reacher": make_reacher}
