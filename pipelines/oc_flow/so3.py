"""OC-Flow §4.2 at CPU scale: a rotation flow on SO(3) guided toward a target rotation R*.

The flow is trained with geodesic interpolants ``R_t = R0 exp(t log(R0^T R1))`` from Haar noise to a mixture of
rotation clusters; guidance acts in so(3) through the exponential map (PepFlow's update, costates pulled back to
the Lie algebra), against a naive update of the matrix entries in the ambient 3 x 3 space, which leaves SO(3).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from components.generative import sample_time
from components.generative.guidance import GuidanceConfig, control_energy, guide, rotation_reward
from components.generative.so3 import (
    determinant_error,
    geodesic_interpolant,
    hat,
    nearest_geodesic_distance,
    orthogonality_error,
    random_rotations,
    velocity_loss,
)
from components.io import load_tensors, save_json, save_table
from components.models.velocity_mlp import VelocityMLP
from paperflows import Plot, StageContext, derive_seed, stage
from paperflows.rows import mean, values
from pipelines.oc_flow.params import SO3_METHODS
from pipelines.oc_flow.plots import plot_manifold
from pipelines.oc_flow.pretrained import load_frozen, make_model, pretrain

ROTATIONS = "data/so3.safetensors"
FLOWS_SO3 = "models/so3/"
CURVES_SO3 = "tables/pretrain_so3.parquet"
CURVES_SO3_PNG = "plots/pretrain_so3.png"
GUIDED_SO3 = "tables/guidance_so3.parquet"
MANIFOLD_CURVE = "tables/so3_manifold_curve.parquet"
SUMMARY_SO3 = "metrics/guidance_so3.json"
TIMES_SO3 = "timings/guidance_so3.json"
MANIFOLD_PNG = "plots/so3_manifold_error.png"
MANIFOLD_CSV = "plots/so3_manifold_error.csv"


# ==================================================================================================
# §4.2 setup: the pretrained SO(3) flow (geodesic interpolant, body-frame velocity)
# ==================================================================================================
def _rotation_pairs(r1: Tensor, gen: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
    t = sample_time(r1.shape[0], gen)
    r_t, v = geodesic_interpolant(random_rotations(r1.shape[0], gen), r1, t.double())
    return r_t.float(), t, v.float()  # geometry in float64, the network in float32


@stage(
    params=("seeds", "model", "train.so3_steps", "train.batch_size", "train.lr"),
    deps=(ROTATIONS,),
    outs=(FLOWS_SO3, CURVES_SO3),
    plots=(Plot(CURVES_SO3_PNG),),
    gpu=True,
    models={"so3_flow": FLOWS_SO3},
)
def pretrain_so3(ctx: StageContext) -> None:
    """Train the rotation flow: Haar noise -> clusters along R_t = R0 exp(t log(R0^T R1)), one per seed."""
    p = ctx.params
    pretrain(
        ctx,
        "so3 flow",
        load_tensors(ctx.path(ROTATIONS))["train"],
        _rotation_pairs,
        lambda: make_model(p, 9, 3),
        velocity_loss,
        p.train.so3_steps,
        FLOWS_SO3,
        CURVES_SO3,
        CURVES_SO3_PNG,
    )


# ==================================================================================================
# §4.2: guidance on SO(3): so(3) controls through exp vs the naive Euclidean update of matrix entries
# ==================================================================================================
@stage(
    params=("seeds", "model", "so3"),
    deps=(ROTATIONS, FLOWS_SO3),
    outs=(GUIDED_SO3, MANIFOLD_CURVE),
    metrics=(SUMMARY_SO3,),
    timings=(TIMES_SO3,),
    plots=(
        Plot(MANIFOLD_PNG),
        Plot(
            MANIFOLD_CSV, x="step", y="naive_ocflow", title="max ||R^T R - I|| per Euler step (naive Euclidean OC-Flow)"
        ),
    ),
)
def guide_so3(ctx: StageContext) -> None:
    """Guide the rotation flow toward R*; measure distance to R*, manifold errors, energy and time."""
    p, s = ctx.params, ctx.params.so3
    tensors = load_tensors(ctx.path(ROTATIONS))
    data, reward = tensors["train"], rotation_reward(tensors["target"])
    rows, curve, times = [], [], []
    for seed in p.seeds:
        net = load_frozen(p, ctx.path(FLOWS_SO3) / f"seed{seed}.safetensors", 9, 3)

        def omega(r: Tensor, t: Tensor, net: VelocityMLP = net) -> Tensor:  # body frame; states in float64
            return net(r.float(), t.float()).double()

        def ambient(r: Tensor, t: Tensor, omega: Callable[..., Tensor] = omega) -> Tensor:  # dR/dt = R hat(w)
            return r @ hat(omega(r, t))

        r0 = random_rotations(s.n_samples, torch.Generator().manual_seed(derive_seed(seed, "r0")))
        for label, method, dynamics in SO3_METHODS:
            cfg = GuidanceConfig(
                n_steps=s.n_steps,
                iterations=s.iterations,
                lr=s.lr,
                gamma=s.gamma if method == "ocflow" else 0.0,
                dynamics=dynamics,
            )
            on_group = dynamics == "so3"
            out = guide(method, omega if on_group else ambient, r0, reward, cfg)
            states = torch.cat([out.x0[None], out.trajectory])
            orth = orthogonality_error(states)  # [N + 2, B]
            rows.append(
                {
                    "method": label,
                    "update": "exp map (so(3))" if on_group else "Euclidean entries",
                    "seed": seed,
                    "dist_to_target_deg": math.degrees(float(-reward(out.x).mean())),
                    "dist_to_data_deg": math.degrees(float(nearest_geodesic_distance(out.x, data).mean()))
                    if on_group
                    else None,
                    "orth_err_max": float(orth.max()),
                    "det_err_max": float(determinant_error(states).max()),
                    "control_energy": float(control_energy(out.controls, cfg.h).mean()),
                    "nfe": out.nfe,
                    "reward_history": out.reward_history,
                }
            )
            times.append({"method": label, "seed": seed, "seconds": out.seconds})
            if seed == p.seeds[0]:
                curve += [
                    {"method": label, "step": k, "orth_err_max": float(orth[k + 1].max())} for k in range(s.n_steps + 1)
                ]
    save_table(rows, ctx.path(GUIDED_SO3))
    save_table(curve, ctx.path(MANIFOLD_CURVE))
    summary: dict[str, float] = {}
    for label, _, _ in SO3_METHODS:
        summary[f"{label}/dist_to_target_deg"] = mean(values(rows, "dist_to_target_deg", method=label))
        summary[f"{label}/orth_err_max"] = max(values(rows, "orth_err_max", method=label))
        summary[f"{label}/det_err_max"] = max(values(rows, "det_err_max", method=label))
    save_json(summary, ctx.path(SUMMARY_SO3))
    save_json({"runs": times}, ctx.path(TIMES_SO3))
    plot_manifold(curve, s, ctx.path(MANIFOLD_PNG), ctx.path(MANIFOLD_CSV))
