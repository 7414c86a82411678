"""OC-Flow's 2-D guidance runs (one paper's wiring): a method's run scored as a table row, and the step-size sweep
of the matched-reward (Pareto) comparison.

Every run of a seed starts from the same x0 and the same frozen flow; fidelity is the sliced-W2 distance of the
guided samples to held-out two-moons data (the same random directions for every run of a seed).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from components.generative.guidance import (
    GuidanceConfig,
    GuidanceResult,
    Reward,
    control_energy,
    guide,
    logistic_reward,
    nearest_distance,
    point_reward,
)
from components.metrics.distributions import sliced_wasserstein
from paperflows import derive_seed
from pipelines.oc_flow.params import GuidanceParams, pareto_methods


def reward_of(name: str, t: dict[str, Tensor]) -> Reward:
    """'target': -||x - c||^2; 'classifier': log p(upper moon | x) of the prepared logistic regression."""
    return point_reward(t["target"]) if name == "target" else logistic_reward(t["clf_w"], t["clf_b"])


def config(g: GuidanceParams, method: str, gamma: float, update: str, lr: float) -> GuidanceConfig:
    """The guidance settings of one run (the baselines take Alg. 1's plain update: no decay at gamma 0)."""
    return GuidanceConfig(
        n_steps=g.n_steps,
        iterations=g.iterations,
        lr=lr,
        gamma=gamma,
        update=update if method == "ocflow" else "alg1",
        clip=g.clip or None,
    )


def fidelity(x: Tensor, heldout: Tensor, g: GuidanceParams, seed: int) -> float:
    """Sliced-W2 distance of samples to the held-out data (the seed's fixed random directions)."""
    return sliced_wasserstein(
        x, heldout, g.projections, generator=torch.Generator().manual_seed(derive_seed(seed, "sw"))
    )


def scored(
    out: GuidanceResult,
    x0: Tensor,
    reward: Reward,
    data: dict[str, Tensor],
    g: GuidanceParams,
    seed: int,
    cfg: GuidanceConfig,
) -> dict[str, Any]:
    """The metrics of one guided run: reward, fidelity, distance to the nearest training point, off-data share,
    control energy, the x0 shift, NFE and the reward after each iteration."""
    dist = nearest_distance(out.x, data["train"])
    return {
        "reward": float(reward(out.x).mean()),
        "sw_to_data": fidelity(out.x, data["heldout"], g, seed),
        "dist_to_data": float(dist.mean()),
        "off_manifold": float((dist > g.off_manifold).float().mean()),
        "control_energy": float(control_energy(out.controls, cfg.h).mean()),
        "x0_shift": float((out.x0 - x0).norm(dim=-1).mean()),
        "nfe": out.nfe,
        "reward_history": out.reward_history,
    }


def pareto_sweep(
    model: torch.nn.Module, x0: Tensor, data: dict[str, Tensor], g: GuidanceParams, seed: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every Pareto method (D-Flow, FlowGrad, OC-Flow at ``claim_gamma`` per update) at every step size of
    ``g.step_sizes`` and every reward: ``(rows {reward_fn, method, seed, lr, reward, sw_to_data}, wall times)``."""
    rows, times = [], []
    for reward_name in g.rewards:
        reward = reward_of(reward_name, data)
        for label, method, update in pareto_methods(g):
            for lr in g.step_sizes:
                cfg = config(g, method, g.claim_gamma if method == "ocflow" else 0.0, update, lr)
                out = guide(method, model, x0, reward, cfg)
                point = {"reward_fn": reward_name, "method": label, "seed": seed, "lr": lr}
                rows.append(
                    {
                        **point,
                        "reward": float(reward(out.x).mean()),
                        "sw_to_data": fidelity(out.x, data["heldout"], g, seed),
                    }
                )
                times.append({**point, "seconds": out.seconds})
    return rows, times
