"""Reacher-v5 styles: kinematics round-trip, the experts reach the target in their own sweep direction, the
style zone is where (and only where) their torques differ, and a rollout reports success, style and return."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco")

from components.imitation.reacher import (  # noqa: E402
    ReacherConfig,
    before_sweep,
    expert_actions,
    expert_demonstrations,
    forward_kinematics,
    in_zone,
    inverse_kinematics,
    rollout,
    sweep_style,
)


def test_inverse_kinematics_inverts_forward_kinematics() -> None:
    rng = np.random.default_rng(0)
    q1, q2 = rng.uniform(-np.pi, np.pi, 50), rng.uniform(0.05, 2.9, 50)
    back1, back2 = inverse_kinematics(forward_kinematics(q1, q2))
    assert np.allclose(back2, q2, atol=1e-6)
    assert np.allclose(np.cos(back1), np.cos(q1), atol=1e-6) and np.allclose(np.sin(back1), np.sin(q1), atol=1e-6)


def test_sweep_style_reads_the_direction_of_the_shoulder() -> None:
    q1 = np.stack([np.linspace(0, 3.0, 20), np.linspace(0, -3.0, 20), np.linspace(0, 0.3, 20)], axis=1)  # [T, B]
    obs = np.zeros(q1.shape + (10,))
    obs[..., 0], obs[..., 2] = np.cos(q1), np.sin(q1)
    assert sweep_style(obs).tolist() == [0, 1, -1]


def test_experts_reach_in_their_style_and_differ_only_in_the_zone() -> None:
    cfg = ReacherConfig()
    rng = np.random.default_rng(0)
    demos = expert_demonstrations(cfg, 6, rng)
    assert demos["obs"].shape == (12 * cfg.horizon, 10) and demos["action"].shape == (12 * cfg.horizon, 2)
    assert np.abs(demos["action"]).max() <= 1.0
    obs = demos["obs"]
    zone, start = in_zone(cfg, obs), before_sweep(cfg, obs)
    assert 0.2 < zone.mean() < 0.6 and start.any() and not (zone & start).any()
    mine, other = expert_actions(cfg, obs, demos["style"]), expert_actions(cfg, obs, 1 - demos["style"])
    differs = np.abs(mine - other).max(1) > 1e-9
    assert not differs[~zone].any()  # outside the zone both styles would act alike
    assert differs[zone].mean() > 0.9  # inside the zone the styles push the shoulder apart
    styles = np.repeat([0, 1], 4)
    noiseless = rollout(ReacherConfig(noise=0.0), lambda o, z: expert_actions(cfg, o, z), styles, rng)
    assert noiseless["success"].all() and np.array_equal(noiseless["style"], styles)
    assert noiseless["obs"].shape == (8, cfg.horizon, 10) and np.all(noiseless["return"] < 0)
    idle = rollout(cfg, lambda o, z: np.zeros((len(z), 2)), styles, rng)
    assert not idle["success"].any() and (idle["style"] == -1).all()
