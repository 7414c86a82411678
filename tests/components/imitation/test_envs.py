"""The environment registry: every environment answers the same calls with the same shapes, and its experts show
their styles in its own rollouts."""

from __future__ import annotations

import numpy as np
import pytest

from components.imitation.envs import ENVS


@pytest.mark.parametrize("name", sorted(ENVS))
def test_every_environment_has_one_signature(name: str) -> None:
    if name == "reacher":
        pytest.importorskip("mujoco")
    env = ENVS[name](0.0)
    rng = np.random.default_rng(0)
    demos = env.demonstrations(2, rng)
    n = len(demos["t"])
    assert set(demos) == {"obs", "action", "style", "episode", "t"} and demos["obs"].shape == (n, env.obs_dim)
    assert demos["action"].shape == ((n,) if env.action_dim == 0 else (n, env.action_dim))
    assert sorted(set(demos["style"].tolist())) == list(range(env.n_styles))
    features, pairs = env.features(demos["obs"]), env.tuple_features(demos["obs"], demos["action"])
    assert features.dtype == np.float32 and pairs.shape == (n, features.shape[1] + (env.action_dim or env.n_actions))
    zone, shared = env.in_zone(demos["obs"]), env.shared(demos["obs"], demos["action"])
    assert zone.dtype == bool and 0 < zone.mean() < 1 and not (zone & shared).any()
    cells = env.cell(demos["obs"])
    assert cells.shape == (n, 2) and cells.min() >= 0 and cells.max() < env.map_size
    styles = np.arange(env.n_styles)
    out = env.rollout(env.expert(rng), styles, rng)
    assert out["success"].all() and np.array_equal(out["style"], styles) and out["return"].shape == styles.shape
    if env.exact_pmi is not None:
        exact = env.exact_pmi(demos["obs"], demos["action"], demos["style"])
        prior = np.bincount(demos["style"]) / n  # noiseless experts walk the shared path once per episode:
        assert np.allclose(exact[shared], np.log(1 / env.n_styles) - np.log(prior[demos["style"][shared]]))
