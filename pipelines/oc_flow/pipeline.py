"""OC-Flow: training-free guided flow matching via optimal control (arXiv 2410.18070).

Reproduces, at CPU scale, the paper's comparison of guidance methods for a pretrained flow (the shape
of its QM9 table of D-Flow, FlowGrad and OC-Flow, and the SO(3) peptide experiment) on toys that keep
the method intact: method vs reward, distance to the data, control energy and wall time, per reward (a
target point; log p(upper moon | x) of a logistic classifier), and an SO(3) table of distance to R* with
the manifold errors ``max ||R^T R - I||`` and ``max |det R - 1|``.

Method: a frozen velocity ``f(t, x)`` (rectified flow on two moons; a rotation flow on SO(3) trained
with geodesic interpolants ``R_t = R0 exp(t log(R0^T R1))``) gives the controlled ODE
``dx/dt = f(t, x) + theta_t``; OC-Flow minimises ``J = L(x_1) + (gamma / 2) int ||theta_t||^2 dt``,
``L = -reward``, by Alg. 1: costates by backward VJPs, then ``theta_k <- (1 - gamma) theta_k - eta
lambda_{k+1}``, or by default the official code's update (SGD on J over the controls and an x0 shift, each
sample's gradient clipped). D-Flow (optimise x0) and FlowGrad (controls, no decay) are the baselines; on
SO(3) the controls live in so(3) and act through the exponential map, against a naive update of matrix
entries. QM9 (:mod:`pipelines.oc_flow.qm9`): property-guided generation in a molecular descriptor space.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from components.data.toy import two_moons
from components.generative import pair_loss, sample_time
from components.generative.guidance import (
    GuidanceConfig,
    Reward,
    control_energy,
    guide,
    logistic_reward,
    nearest_distance,
    point_reward,
    rotation_reward,
)
from components.generative.so3 import (
    determinant_error,
    exp_map,
    geodesic_distance,
    geodesic_interpolant,
    hat,
    log_map,
    nearest_geodesic_distance,
    orthogonality_error,
    perturb_rotations,
    random_rotations,
    velocity_loss,
)
from components.io import load_tensors, save_json, save_table, save_tensors
from components.metrics.distributions import sliced_wasserstein
from components.models.velocity_mlp import VelocityMLP
from paperflows import Pipeline, Plot, StageContext, derive_seed, stage
from paperflows.rows import mean, values
from pipelines.oc_flow import ABOUT
from pipelines.oc_flow.params import SO3_METHODS, OcFlowParams, euclidean_methods
from pipelines.oc_flow.plots import plot_manifold, plot_samples, plot_tradeoff
from pipelines.oc_flow.pretrained import load_frozen, make_model, pretrain
from pipelines.oc_flow.qm9 import guide_qm9, prepare_qm9, pretrain_qm9

MOONS = "data/moons.safetensors"
ROTATIONS = "data/so3.safetensors"
PREPARED = "metrics/prepare.json"
FLOWS_2D = "models/euclidean/"
CURVES_2D = "tables/pretrain_euclidean.parquet"
CURVES_2D_PNG = "plots/pretrain_euclidean.png"
GUIDED_2D = "tables/guidance_euclidean.parquet"
SAMPLES_2D = "samples/euclidean.safetensors"
SUMMARY_2D = "metrics/guidance_euclidean.json"
TIMES_2D = "timings/guidance_euclidean.json"
SAMPLES_PNG = "plots/euclidean_samples.png"
TRADEOFF_PNG = "plots/gamma_tradeoff.png"
TRADEOFF_CSV = "plots/gamma_tradeoff.csv"
FLOWS_SO3 = "models/so3/"
CURVES_SO3 = "tables/pretrain_so3.parquet"
CURVES_SO3_PNG = "plots/pretrain_so3.png"
GUIDED_SO3 = "tables/guidance_so3.parquet"
MANIFOLD_CURVE = "tables/so3_manifold_curve.parquet"
SUMMARY_SO3 = "metrics/guidance_so3.json"
TIMES_SO3 = "timings/guidance_so3.json"
MANIFOLD_PNG = "plots/so3_manifold_error.png"
MANIFOLD_CSV = "plots/so3_manifold_error.csv"
REPORT = "report.json"


# ==================================================================================================
# §5 setup: the data (two moons + the reward classifier; rotation clusters + R*)
# ==================================================================================================
@stage(params=("data",), outs=(MOONS, ROTATIONS), metrics=(PREPARED,))
def prepare(ctx: StageContext) -> None:
    """Sample two moons, fit the reward's logistic classifier, and sample the SO(3) rotation clusters."""
    from sklearn.linear_model import LogisticRegression

    d = ctx.params.data
    x, moon = two_moons(d.n_train, d.noise, d.seed)
    heldout, _ = two_moons(d.n_heldout, d.noise, derive_seed(d.seed, "heldout"))
    upper = (1 - moon).numpy()  # label 0 is the upper moon
    clf = LogisticRegression().fit(x.double().numpy(), upper)
    save_tensors(
        {
            "train": x,
            "heldout": heldout,
            "upper": torch.from_numpy(upper),
            "target": torch.tensor(d.target),
            "clf_w": torch.tensor(clf.coef_[0], dtype=torch.float32),
            "clf_b": torch.tensor(clf.intercept_, dtype=torch.float32),
        },
        ctx.path(MOONS),
        metadata={"source": "sklearn.datasets.make_moons"},
    )
    gen = torch.Generator().manual_seed(d.seed)
    centers = random_rotations(d.so3_clusters, gen)
    train = perturb_rotations(centers[torch.arange(d.so3_n_train) % d.so3_clusters], d.so3_spread, gen)
    target = centers[0] @ exp_map(0.5 * log_map(centers[0].T @ centers[1]))  # geodesic midpoint of clusters 0, 1
    save_tensors(
        {"train": train, "centers": centers, "target": target},
        ctx.path(ROTATIONS),
        metadata={"source": f"{d.so3_clusters} Haar-random centres, spread {d.so3_spread} rad"},
    )
    save_json(
        {
            "classifier_accuracy": float(clf.score(x.double().numpy(), upper)),
            "so3_target_to_nearest_centre_deg": math.degrees(float(geodesic_distance(centers, target).min())),
        },
        ctx.path(PREPARED),
    )


# ==================================================================================================
# §5 setup: the pretrained 2-D flow (rectified flow, linear interpolant)
# ==================================================================================================
def _noise_pairs(x1: Tensor, gen: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
    return torch.randn(x1.shape, generator=gen), x1, sample_time(x1.shape[0], gen)


@stage(
    params=("seeds", "model", "train.steps", "train.batch_size", "train.lr"),
    deps=(MOONS,),
    outs=(FLOWS_2D, CURVES_2D),
    plots=(Plot(CURVES_2D_PNG),),
    gpu=True,
    models={"euclidean_flow": FLOWS_2D},
)
def pretrain_euclidean(ctx: StageContext) -> None:
    """Train the 2-D velocity MLP by rectified flow (noise -> two moons), one per seed."""
    p = ctx.params
    pretrain(
        ctx,
        "euclidean flow",
        load_tensors(ctx.path(MOONS))["train"],
        _noise_pairs,
        lambda: make_model(p, 2),
        pair_loss,
        p.train.steps,
        FLOWS_2D,
        CURVES_2D,
        CURVES_2D_PNG,
    )


# ==================================================================================================
# §3 Alg. 1 and §4.1: guidance in Euclidean space (unguided, D-Flow, FlowGrad, OC-Flow gamma sweep)
# ==================================================================================================
def _reward(name: str, t: dict[str, Tensor]) -> Reward:
    return point_reward(t["target"]) if name == "target" else logistic_reward(t["clf_w"], t["clf_b"])


@stage(
    params=(
        "seeds",
        "model",
        "guidance.rewards",
        "guidance.n_samples",
        "guidance.n_steps",
        "guidance.iterations",
        "guidance.update",
        "guidance.lr",
        "guidance.clip",
        "guidance.gammas",
        "guidance.off_manifold",
        "guidance.projections",
    ),
    deps=(MOONS, FLOWS_2D),
    outs=(GUIDED_2D, SAMPLES_2D),
    metrics=(SUMMARY_2D,),
    timings=(TIMES_2D,),
    plots=(
        Plot(SAMPLES_PNG),
        Plot(TRADEOFF_PNG),
        Plot(TRADEOFF_CSV, x="gamma", y="reward", title="OC-Flow reward (first reward fn) vs gamma"),
    ),
)
def guide_euclidean(ctx: StageContext) -> None:
    """Guide the pretrained 2-D flow with every method and reward; measure reward, fidelity (sliced W2 to held-out
    data, distance to the nearest training point), control energy, time."""
    p, g = ctx.params, ctx.params.guidance
    tensors = load_tensors(ctx.path(MOONS))
    data, heldout = tensors["train"], tensors["heldout"]
    rows, samples, times = [], {}, []
    for seed in p.seeds:
        model = load_frozen(p, ctx.path(FLOWS_2D) / f"seed{seed}.safetensors", 2)
        x0 = torch.randn(g.n_samples, 2, generator=torch.Generator().manual_seed(derive_seed(seed, "x0")))
        for reward_name in g.rewards:
            reward = _reward(reward_name, tensors)
            for label, method, gamma in euclidean_methods(g):
                cfg = GuidanceConfig(
                    n_steps=g.n_steps,
                    iterations=g.iterations,
                    lr=g.lr,
                    gamma=gamma,
                    update=g.update if method == "ocflow" else "alg1",
                    clip=g.clip or None,
                )
                out = guide(method, model, x0, reward, cfg)
                dist = nearest_distance(out.x, data)
                sw = sliced_wasserstein(
                    out.x, heldout, g.projections, generator=torch.Generator().manual_seed(derive_seed(seed, "sw"))
                )
                rows.append(
                    {
                        "reward_fn": reward_name,
                        "method": label,
                        "gamma": gamma,
                        "seed": seed,
                        "reward": float(reward(out.x).mean()),
                        "sw_to_data": sw,
                        "dist_to_data": float(dist.mean()),
                        "off_manifold": float((dist > g.off_manifold).float().mean()),
                        "control_energy": float(control_energy(out.controls, cfg.h).mean()),
                        "x0_shift": float((out.x0 - x0).norm(dim=-1).mean()),
                        "nfe": out.nfe,
                        "reward_history": out.reward_history,
                    }
                )
                times.append({"reward_fn": reward_name, "method": label, "seed": seed, "seconds": out.seconds})
                if seed == p.seeds[0]:
                    samples[f"{reward_name}/{label}"] = out.x
    save_table(rows, ctx.path(GUIDED_2D))
    save_tensors(samples, ctx.path(SAMPLES_2D), metadata={"seed": str(p.seeds[0])})
    save_json(
        {
            f"{r}/{label}/{key}": mean(values(rows, key, reward_fn=r, method=label))
            for r in g.rewards
            for label, _, _ in euclidean_methods(g)
            for key in ("reward", "sw_to_data", "dist_to_data", "control_energy")
        },
        ctx.path(SUMMARY_2D),
    )
    save_json({"runs": times}, ctx.path(TIMES_2D))
    plot_samples(samples, data, tensors["target"], g, ctx.path(SAMPLES_PNG))
    plot_tradeoff(rows, g, ctx.path(TRADEOFF_PNG), ctx.path(TRADEOFF_CSV))


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


PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=OcFlowParams,
    stages=(
        prepare,
        pretrain_euclidean,
        guide_euclidean,
        pretrain_so3,
        guide_so3,
        prepare_qm9,
        pretrain_qm9,
        guide_qm9,
    ),
    report="pipelines.oc_flow.report:report",
)
