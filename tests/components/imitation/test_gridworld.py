"""The corridor gridworld: noiseless experts follow their corridor, agree outside the zone, and the rollout
scorer reads the corridor where an episode crosses the zone's middle row."""

from __future__ import annotations

import numpy as np
import pytest

from components.imitation.gridworld import (
    GridConfig,
    corridor_of,
    expert_actions,
    expert_demonstrations,
    in_zone,
    rollout,
    state_features,
    step,
)

CFG = GridConfig()


def test_noiseless_experts_reach_the_goal_through_their_corridor() -> None:
    cfg = GridConfig(epsilon=0.0)
    styles = np.arange(cfg.n_styles)
    result = rollout(cfg, lambda s, z: expert_actions(cfg, s, z), styles)
    assert result["success"].all()
    assert result["crossed"].tolist() == [0, 1, 2]
    # centre: 10 steps straight up; left/right: 3 sideways and 3 back on top of that
    assert result["steps"].tolist() == [16, 10, 16]


def test_styles_act_identically_outside_the_zone_and_differ_at_its_entry() -> None:
    cells = np.array([(r, c) for r in range(CFG.size) for c in range(CFG.size)])
    acts = np.stack([expert_actions(CFG, cells, np.full(len(cells), z)) for z in range(CFG.n_styles)])
    outside = ~in_zone(CFG, cells[:, 0])
    assert (acts[:, outside] == acts[0, outside]).all()
    entry = np.flatnonzero((cells[:, 0] == CFG.zone_bottom) & (cells[:, 1] == CFG.mid))[0]
    assert acts[:, entry].tolist() == [2, 0, 3]  # left, up, right


def test_demonstrations_shapes_noise_and_episode_order() -> None:
    demos = expert_demonstrations(CFG, 30, np.random.default_rng(0))
    n = len(demos["action"])
    assert demos["state"].shape == (n, 2) and set(np.unique(demos["style"])) == {0, 1, 2}
    assert (np.diff(demos["episode"]) >= 0).all() and (demos["style"] == demos["episode"] // 30).all()
    noiseless = expert_actions(CFG, demos["state"], demos["style"])
    off = float((demos["action"] != noiseless).mean())  # epsilon = 0.1, 4/5 of random draws differ
    assert off == pytest.approx(0.08, abs=0.03)
    # consecutive steps of an episode follow the dynamics
    same = demos["episode"][1:] == demos["episode"][:-1]
    assert (step(CFG, demos["state"][:-1], demos["action"][:-1])[same] == demos["state"][1:][same]).all()


def test_corridor_ranges_and_features() -> None:
    assert corridor_of(CFG, np.arange(11)).tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2]
    assert state_features(CFG, np.array([[0, 10]])).tolist() == [[-1.0, 1.0]]
    stuck = rollout(CFG, lambda s, z: np.full(len(s), 4), np.array([0, 1]))  # noop forever
    assert not stuck["success"].any() and stuck["crossed"].tolist() == [-1, -1]
    with pytest.raises(ValueError, match="corridors"):
        GridConfig(corridors=(5, 2))


def test_random_starts_lie_below_the_crossing_and_noiseless_experts_still_show_their_style() -> None:
    cfg = GridConfig(epsilon=0.0, random_starts=True)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="rng"):
        rollout(cfg, lambda s, z: expert_actions(cfg, s, z), np.arange(3))
    styles = np.repeat(np.arange(cfg.n_styles), 200)
    result = rollout(cfg, lambda s, z: expert_actions(cfg, s, z), styles, np.random.default_rng(1))
    assert result["success"].all() and (result["crossed"] == styles).all()
    demos = expert_demonstrations(cfg, 50, rng)
    starts = demos["state"][demos["t"] == 0]
    assert starts[:, 0].min() == cfg.cross_row + 1 and starts[:, 0].max() == cfg.size - 1
    assert len({tuple(s) for s in starts}) > 20 and in_zone(cfg, starts[:, 0]).any()  # some start inside the zone
