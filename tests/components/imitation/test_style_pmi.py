"""MINE's PMI on gridworld demonstrations: ~0 where the styles agree, high at the zone's fork, close to counts."""

from __future__ import annotations

import numpy as np

from components.imitation.gridworld import GridConfig, expert_demonstrations, in_zone
from components.imitation.style_pmi import MineConfig, estimate_style_pmi, exact_style_pmi


def test_pmi_is_zero_where_styles_agree_and_tracks_the_counts() -> None:
    cfg = GridConfig()
    demos = expert_demonstrations(cfg, 20, np.random.default_rng(0))
    pmi, model, result = estimate_style_pmi(cfg, demos, MineConfig(steps=600, lr=3e-3), seed=0)
    exact = exact_style_pmi(cfg, demos)
    # on the shared path outside the zone (centre column, moving up) every style acts alike: PMI ~0
    shared = ~in_zone(cfg, demos["state"][:, 0]) & (demos["state"][:, 1] == cfg.mid) & (demos["action"] == 0)
    assert shared.sum() > 200
    assert abs(exact[shared].mean()) < 0.05 and abs(pmi[shared].mean()) < 0.1
    # at the fork (zone entry, centre column) the action names the style: PMI near log 3
    fork = (demos["state"][:, 0] == cfg.zone_bottom) & (demos["state"][:, 1] == cfg.mid) & (demos["action"] != 4)
    assert pmi[fork].mean() > 0.6 and exact[fork].mean() > 0.9
    assert np.corrcoef(pmi, exact)[0, 1] > 0.7
    assert result.history[-1]["dv"] > 0.3 and np.isfinite(float(model.log_ema))
