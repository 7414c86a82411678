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

import torch
from torch import Tensor

from components.data.toy import two_moons
from components.generative import pair_loss, sample_time
from components.generative.guidance import guide
from components.generative.so3 import exp_map, geodesic_distance, log_map, perturb_rotations, random_rotations
from components.io import load_tensors, save_json, save_table, save_tensors
from paperflows import Pipeline, Plot, StageContext, derive_seed, stage
from paperflows.rows import mean, values
from pipelines.oc_flow import ABOUT
from pipelines.oc_flow.euclidean import config, pareto_sweep, reward_of, scored
from pipelines.oc_flow.params import OcFlowParams, euclidean_methods
from pipelines.oc_flow.plots import plot_samples, plot_tradeoff
from pipelines.oc_flow.pretrained import load_frozen, make_model, pretrain
from pipelines.oc_flow.qm9 import guide_qm9, prepare_qm9, pretrain_qm9
from pipelines.oc_flow.so3 import ROTATIONS, guide_so3, pretrain_so3

MOONS = "data/moons.safetensors"
PREPARED = "metrics/prepare.json"
FLOWS_2D = "models/euclidean/"
CURVES_2D = "tables/pretrain_euclidean.parquet"
CURVES_2D_PNG = "plots/pretrain_euclidean.png"
GUIDED_2D = "tables/guidance_euclidean.parquet"
SAMPLES_2D = "samples/euclidean.safetensors"
SUMMARY_2D = "metrics/guidance_euclidean.json"
TIMES_2D = "timings/guidance_euclidean.json"
PARETO_2D = "tables/pareto_euclidean.parquet"
PARETO_TIMES = "timings/pareto_euclidean.json"
SAMPLES_PNG = "plots/euclidean_samples.png"
TRADEOFF_PNG = "plots/gamma_tradeoff.png"
TRADEOFF_CSV = "plots/gamma_tradeoff.csv"
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
    rows, samples, times = [], {}, []
    for seed in p.seeds:
        model = load_frozen(p, ctx.path(FLOWS_2D) / f"seed{seed}.safetensors", 2)
        x0 = torch.randn(g.n_samples, 2, generator=torch.Generator().manual_seed(derive_seed(seed, "x0")))
        for reward_name in g.rewards:
            reward = reward_of(reward_name, tensors)
            for label, method, gamma in euclidean_methods(g):
                cfg = config(g, method, gamma, g.update, g.lr)
                out = guide(method, model, x0, reward, cfg)
                point = {"reward_fn": reward_name, "method": label, "seed": seed}
                rows.append({**point, "gamma": gamma, **scored(out, x0, reward, tensors, g, seed, cfg)})
                times.append({**point, "seconds": out.seconds})
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
    plot_samples(samples, tensors["train"], tensors["target"], g, ctx.path(SAMPLES_PNG))
    plot_tradeoff(rows, g, ctx.path(TRADEOFF_PNG), ctx.path(TRADEOFF_CSV))


# ==================================================================================================
# §4.1 reward and fidelity together: each guided method's step-size sweep (the matched-reward comparison)
# ==================================================================================================
@stage(
    params=(
        "seeds",
        "model",
        "guidance.rewards",
        "guidance.n_samples",
        "guidance.n_steps",
        "guidance.iterations",
        "guidance.clip",
        "guidance.claim_gamma",
        "guidance.step_sizes",
        "guidance.pareto_updates",
        "guidance.projections",
    ),
    deps=(MOONS, FLOWS_2D),
    outs=(PARETO_2D,),
    timings=(PARETO_TIMES,),
)
def pareto_euclidean(ctx: StageContext) -> None:
    """Sweep the step size of D-Flow, FlowGrad and OC-Flow (per update) on every reward: each method's (reward,
    SW2) curve, so fidelity is compared at matched reward (the same x0 and flow per seed as the main table)."""
    p, g = ctx.params, ctx.params.guidance
    tensors, rows, times = load_tensors(ctx.path(MOONS)), [], []
    for seed in p.seeds:
        model = load_frozen(p, ctx.path(FLOWS_2D) / f"seed{seed}.safetensors", 2)
        x0 = torch.randn(g.n_samples, 2, generator=torch.Generator().manual_seed(derive_seed(seed, "x0")))
        found, clock = pareto_sweep(model, x0, tensors, g, seed)
        rows, times = rows + found, times + clock
    save_table(rows, ctx.path(PARETO_2D))
    save_json({"runs": times}, ctx.path(PARETO_TIMES))


PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=OcFlowParams,
    stages=(
        prepare,
        pretrain_euclidean,
        guide_euclidean,
        pareto_euclidean,
        pretrain_so3,
        guide_so3,
        prepare_qm9,
        pretrain_qm9,
        guide_qm9,
    ),
    report="pipelines.oc_flow.report:report",
)
