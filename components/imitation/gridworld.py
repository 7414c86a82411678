"""A corridor gridworld where several experts share start and goal and differ in style only inside a zone.

The grid is ``size x size`` cells, ``(row, col)`` with row 0 at the top. Every episode starts at the bottom
centre ``(size-1, mid)`` and succeeds on reaching the goal at the top centre ``(0, mid)``. Actions::

    0 up (row - 1)   1 down (row + 1)   2 left (col - 1)   3 right (col + 1)   4 noop

moves are clipped at the border. With ``random_starts`` every episode (demonstration or rollout) starts instead
at a uniformly drawn cell below the zone's middle row, zone rows included: a start inside the zone puts the
agent where the styles' paths cross, in states one style's demonstrations rarely visit.

Rows ``zone_top .. zone_bottom`` form the bifurcation zone. Outside it every expert walks the centre column
(returning to it first when displaced), whatever its style. Inside it, style ``k`` first walks sideways to its
corridor column ``corridors[k]`` (left, centre, right by default), climbs to the zone's top row, and walks back to
the centre column there. So a state-action pair says nothing about the style outside the zone, and nearly everything
inside it. With probability ``epsilon`` an expert takes a uniformly random action instead of its own.

A rollout's *style* is read where it first reaches the middle row of the zone, ``cross_row``: the corridor
whose column range holds its column there (columns split halfway between neighbouring corridors); a rollout
that never reaches it has no style (-1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ACTIONS = ("up", "down", "left", "right", "noop")
N_ACTIONS = len(ACTIONS)
MOVES = np.array([[-1, 0], [1, 0], [0, -1], [0, 1], [0, 0]], dtype=np.int64)
STYLE_NAMES = ("left", "centre", "right")


@dataclass(frozen=True)
class GridConfig:
    """The gridworld: ``size`` cells a side, the bifurcation zone's rows, each style's corridor column,
    the expert's action noise and the episode horizon."""

    size: int = 11
    zone_top: int = 3
    zone_bottom: int = 7
    corridors: tuple[int, ...] = (2, 5, 8)
    epsilon: float = 0.1
    horizon: int = 40
    random_starts: bool = False

    def __post_init__(self) -> None:
        if not (5 <= self.size <= 101 and self.size % 2 == 1):
            raise ValueError(f"GridConfig.size must be an odd int in [5, 101], got {self.size!r}")
        if not (0 < self.zone_top < self.zone_bottom < self.size - 1):
            raise ValueError(
                f"GridConfig zone rows must satisfy 0 < zone_top < zone_bottom < size - 1, got "
                f"{self.zone_top}, {self.zone_bottom}"
            )
        if (
            len(self.corridors) < 2
            or list(self.corridors) != sorted(set(self.corridors))
            or not all(0 <= c < self.size for c in self.corridors)
        ):
            raise ValueError(
                f"GridConfig.corridors must be >= 2 increasing columns inside the grid, got {self.corridors!r}"
            )
        if not 0.0 <= self.epsilon <= 1.0:
            raise ValueError(f"GridConfig.epsilon must be in [0, 1], got {self.epsilon!r}")
        if self.horizon < 1:
            raise ValueError(f"GridConfig.horizon must be >= 1, got {self.horizon!r}")

    @property
    def mid(self) -> int:
        return self.size // 2

    @property
    def n_styles(self) -> int:
        return len(self.corridors)

    @property
    def start(self) -> tuple[int, int]:
        return (self.size - 1, self.mid)

    @property
    def goal(self) -> tuple[int, int]:
        return (0, self.mid)

    @property
    def cross_row(self) -> int:
        return (self.zone_top + self.zone_bottom) // 2


def start_states(cfg: GridConfig, n: int, rng: np.random.Generator | None = None) -> np.ndarray:
    """``[n, 2]`` start cells: the bottom centre, or with ``cfg.random_starts`` uniform cells of the rows below the
    zone's middle row (``rng`` required then)."""
    if not cfg.random_starts:
        return np.tile(np.asarray(cfg.start), (n, 1))
    if rng is None:
        raise ValueError("random starts need an rng")
    rows = rng.integers(cfg.cross_row + 1, cfg.size, n)
    return np.stack([rows, rng.integers(0, cfg.size, n)], axis=1).astype(np.int64)


def in_zone(cfg: GridConfig, rows: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows inside the bifurcation zone."""
    rows = np.asarray(rows)
    return (rows >= cfg.zone_top) & (rows <= cfg.zone_bottom)


def step(cfg: GridConfig, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """Next states ``[B, 2]`` of ``states [B, 2]`` under ``actions [B]`` (moves clipped at the border)."""
    return np.clip(np.asarray(states) + MOVES[np.asarray(actions)], 0, cfg.size - 1)


def _toward(col: np.ndarray, target: np.ndarray | int) -> np.ndarray:
    """Left (2) or right (3) toward ``target``; -1 where already there."""
    return np.where(col > target, 2, np.where(col < target, 3, -1))


def expert_actions(cfg: GridConfig, states: np.ndarray, styles: np.ndarray) -> np.ndarray:
    """The noiseless expert's action for each ``(state, style)``: ``states [B, 2]``, ``styles [B]`` -> ``[B]``."""
    states, styles = np.asarray(states), np.asarray(styles)
    row, col = states[:, 0], states[:, 1]
    corridor = np.asarray(cfg.corridors)[styles]
    up = np.zeros_like(row)
    to_mid, to_corridor = _toward(col, cfg.mid), _toward(col, corridor)
    outside = np.where(to_mid >= 0, to_mid, up)
    lower = np.where(to_corridor >= 0, to_corridor, up)  # zone, below its top row: corridor, then up
    top = np.where(to_mid >= 0, to_mid, up)  # zone's top row: back to the centre, then up
    inside = np.where(row == cfg.zone_top, top, lower)
    return np.where(in_zone(cfg, row), inside, outside).astype(np.int64)


def noisy_expert(cfg: GridConfig, rng: np.random.Generator):
    """``act(states, styles)``: the expert's action, replaced by a uniformly random one with probability epsilon."""

    def act(states: np.ndarray, styles: np.ndarray) -> np.ndarray:
        own = expert_actions(cfg, states, styles)
        noisy = rng.random(len(own)) < cfg.epsilon
        return np.where(noisy, rng.integers(0, N_ACTIONS, len(own)), own)

    return act


def expert_demonstrations(cfg: GridConfig, per_style: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``per_style`` noisy expert episodes of every style, stopped at the goal or the horizon.

    Returns flat arrays over all steps: ``state [N, 2]`` (int), ``action [N]``, ``style [N]``, ``episode [N]``
    (episodes numbered style-major: style k holds episodes ``k*per_style .. (k+1)*per_style - 1``), ``t [N]``.
    """
    n = per_style * cfg.n_styles
    styles = np.repeat(np.arange(cfg.n_styles), per_style)
    states = start_states(cfg, n, rng)
    alive = np.ones(n, dtype=bool)
    act = noisy_expert(cfg, rng)
    out: dict[str, list[np.ndarray]] = {"state": [], "action": [], "style": [], "episode": [], "t": []}
    for t in range(cfg.horizon):
        if not alive.any():
            break
        idx = np.flatnonzero(alive)
        acts = act(states[idx], styles[idx])
        for key, value in (
            ("state", states[idx].copy()),
            ("action", acts),
            ("style", styles[idx]),
            ("episode", idx),
            ("t", np.full(len(idx), t)),
        ):
            out[key].append(value)
        states[idx] = step(cfg, states[idx], acts)
        alive[idx] = ~np.all(states[idx] == np.asarray(cfg.goal), axis=1)
    flat = {k: np.concatenate(v) for k, v in out.items()}
    order = np.lexsort((flat["t"], flat["episode"]))
    return {k: v[order].astype(np.int64) for k, v in flat.items()}


def corridor_of(cfg: GridConfig, cols: np.ndarray) -> np.ndarray:
    """The style whose corridor column range holds each column (ranges split halfway between corridors)."""
    bounds = [(a + b) / 2 for a, b in zip(cfg.corridors[:-1], cfg.corridors[1:])]
    return np.searchsorted(np.asarray(bounds), np.asarray(cols), side="left").astype(np.int64)


def state_features(cfg: GridConfig, states: np.ndarray) -> np.ndarray:
    """Cell coordinates scaled to [-1, 1]: ``states [B, 2]`` int -> ``[B, 2]`` float32."""
    return (np.asarray(states, dtype=np.float32) / (cfg.size - 1) * 2.0 - 1.0).astype(np.float32)


def rollout(
    cfg: GridConfig, policy, styles: np.ndarray, rng: np.random.Generator | None = None
) -> dict[str, np.ndarray]:
    """Run one episode per entry of ``styles`` under ``policy(states [B, 2], styles [B]) -> actions [B]`` (from
    :func:`start_states`; ``rng`` draws random starts).

    Returns ``success [B]`` (reached the goal within the horizon), ``crossed [B]`` (the style whose
    corridor holds the column where the episode first reached ``cfg.cross_row``; -1 if it never did) and
    ``steps [B]`` (steps taken).
    """
    styles = np.asarray(styles, dtype=np.int64)
    n = len(styles)
    states = start_states(cfg, n, rng)
    alive, success = np.ones(n, dtype=bool), np.zeros(n, dtype=bool)
    crossed, steps = np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64)

    def mark_crossings() -> None:
        first = (crossed < 0) & (states[:, 0] == cfg.cross_row)
        crossed[first] = corridor_of(cfg, states[first, 1])

    for _ in range(cfg.horizon):
        mark_crossings()
        idx = np.flatnonzero(alive)
        if len(idx) == 0:
            break
        states[idx] = step(cfg, states[idx], np.asarray(policy(states[idx], styles[idx]), dtype=np.int64))
        steps[idx] += 1
        reached = np.all(states[idx] == np.asarray(cfg.goal), axis=1)
        success[idx[reached]] = True
        alive[idx[reached]] = False
    mark_crossings()
    return {"success": success, "crossed": crossed, "steps": steps}
