"""PMI(s, a; z) of demonstrations: MINE on (state-action, style) tuples, and the exact count value (gridworld).

``x = [state features; action features]`` (one-hot for discrete actions, the action itself for continuous
ones), ``y = one-hot style``; the statistics network is trained through
:func:`components.training.fit` on the DV bound with MINE's EMA denominator, then each tuple's PMI with its
own style is read off with the empirical style prior (:func:`components.imitation.mine.pmi_from_statistics`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from components.imitation.gridworld import N_ACTIONS, GridConfig, state_features
from components.imitation.mine import (
    StatisticsConfig,
    StatisticsNetwork,
    count_pmi,
    mine_loss,
    pmi_from_statistics,
    shuffled_batches,
)
from components.training import TrainConfig, TrainResult, fit


@dataclass(frozen=True)
class MineConfig:
    """Training of the statistics network."""

    steps: int = 1000
    batch_size: int = 256
    lr: float = 1e-3
    hidden: int = 64
    ema_rate: float = 0.01


def tuple_features(cfg: GridConfig, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """``[state features; one-hot action]``: ``[N, 2 + N_ACTIONS]`` float32."""
    return np.concatenate([state_features(cfg, states), np.eye(N_ACTIONS, dtype=np.float32)[actions]], axis=1)


def cell_action_ids(cfg: GridConfig, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """One integer per (cell, action), for counting."""
    states = np.asarray(states)
    return (states[:, 0] * cfg.size + states[:, 1]) * N_ACTIONS + np.asarray(actions)


def estimate_pmi(
    features: np.ndarray,
    styles: np.ndarray,
    n_styles: int,
    mine: MineConfig,
    *,
    seed: int,
    callback: Callable[[int, dict[str, float]], None] | None = None,
    progress: bool = False,
) -> tuple[np.ndarray, StatisticsNetwork, TrainResult]:
    """MINE's PMI of every tuple ``features [N, d]`` (float32, the (s, a) part) with its own style ``styles [N]``:
    ``[N]`` float64, the trained network and its training record."""
    x = torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))
    styles = np.asarray(styles, dtype=np.int64)
    y = torch.eye(n_styles)[torch.from_numpy(styles)]
    model = StatisticsNetwork(
        StatisticsConfig(x.shape[1], n_styles, hidden=mine.hidden, ema_rate=mine.ema_rate), seed=seed
    )
    result = fit(
        model,
        mine_loss,
        shuffled_batches(x, y, mine.batch_size),
        TrainConfig(
            steps=mine.steps,
            lr=mine.lr,
            seed=seed,
            device="cpu",
            log_every=max(10, mine.steps // 20),
            progress=progress,
            desc="mine",
        ),
        callback=callback,
    )
    prior = np.bincount(styles, minlength=n_styles) / len(styles)
    table = pmi_from_statistics(model, x, torch.eye(n_styles), torch.log(torch.from_numpy(prior).float()))
    own = table[torch.arange(len(x)), torch.from_numpy(styles)]
    return own.double().numpy(), model.eval(), result


def estimate_style_pmi(
    cfg: GridConfig,
    demos: dict[str, np.ndarray],
    mine: MineConfig,
    *,
    seed: int,
    callback: Callable[[int, dict[str, float]], None] | None = None,
    progress: bool = False,
) -> tuple[np.ndarray, StatisticsNetwork, TrainResult]:
    """:func:`estimate_pmi` of gridworld demonstrations (``state``, ``action``, ``style`` arrays)."""
    return estimate_pmi(
        tuple_features(cfg, demos["state"], demos["action"]),
        demos["style"],
        cfg.n_styles,
        mine,
        seed=seed,
        callback=callback,
        progress=progress,
    )


def exact_style_pmi(cfg: GridConfig, demos: dict[str, np.ndarray]) -> np.ndarray:
    """The count-based PMI of every tuple with its own style (the tabular ground truth MINE approximates)."""
    return count_pmi(cell_action_ids(cfg, demos["state"], demos["action"]), demos["style"], cfg.n_styles)
