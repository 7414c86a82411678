"""Not-so-optimal transport flows for 3-D point clouds (NSOT, arXiv 2502.12456).

Reproduces the paper's comparison of couplings for point-cloud flow matching (its table of 1-NNA on
ShapeNet at small inference budgets) at CPU scale:

* §3.2 offline superset OT: for each training shape, a dense surface superset (M points) is paired
  with a Gaussian superset of the same size by one exact OT solve, stored once (``ot_precompute``);
* §3.3 online subsampling: each training pair is a random N-subset taken at the same indices on both
  sides, so the pairing is approximately optimal at the online cost of random pairing;
* §3.4 hybrid coupling: ``x0 <- sqrt(1 - beta) x0 + sqrt(beta) eps`` pulls the pairs back toward the
  independent coupling;
* flow matching with the linear interpolant and few-step Euler sampling, one model per category;
  1-NNA-CD at every step count, and 1-NNA / COV / MMD under both CD and EMD at one step count.

Baselines: independent coupling, and online per-sample (equivariant) OT solved by the Hungarian
algorithm at every step. Offline data: part-based ShapeNet-like shapes (chair, table, lamp) built from
trimesh primitives; set ``data.pc15k_root`` to a ShapeNetCore.v2.PC15k folder to use the real clouds
(airplane, chair, car).
"""

from __future__ import annotations

import torch

from components.data.shapes import read_pc15k, sample_shapes
from components.generative import pair_loss, sample_time
from components.io import load_tensors, save_json, save_model, save_table, save_tensors
from components.metrics.pointcloud import PAIRWISE_DISTANCES
from components.ot import precompute_superset_ot
from components.training import TrainConfig, fit, random_batches
from paperflows.contract import Pipeline, Plot, StageContext, stage
from paperflows.rows import mean, values
from paperflows.seeds import derive_seed
from pipelines.nsot import ABOUT
from pipelines.nsot.couplings import draw_pairs, pair_costs, score_clouds, step_timings, velocity_model
from pipelines.nsot.params import NsotParams, method_names
from pipelines.nsot.plots import nna_vs_steps, training_curves

# every artifact, named once
SHAPES = "data/shapes.safetensors"
SUPERSET_OT = "data/superset_ot.safetensors"
OT_METRICS = "metrics/ot_precompute.json"
OT_TIMINGS = "timings/ot_precompute.json"
MODELS = "models/"
TRAIN_CURVES = "tables/train_curves.parquet"
TRAIN_PLOT = "plots/train_loss.png"
PAIR_COSTS = "tables/pair_cost.parquet"
COUPLING_METRICS = "metrics/couplings.json"
STEP_TIMINGS = "timings/couplings.json"
EVAL = "tables/eval.parquet"
EVAL_METRICS = "metrics/eval.json"
NNA_PLOT = "plots/1nna_vs_steps.png"
NNA_DATA = "plots/1nna_vs_steps.csv"
REPORT = "report.json"
#: the parameters that name the categories (procedural families, or PC15k categories)
CATEGORIES = ("data.categories", "data.pc15k_root", "data.pc15k_categories")


def model_file(category: str, method: str, seed: int) -> str:
    return f"{MODELS}{category}/{method}_seed{seed}.safetensors"


# --------------------------------------------------------------------------------------------------
# stage 1: data (part-based ShapeNet-like shapes, or ShapeNetCore.v2.PC15k), per category
# --------------------------------------------------------------------------------------------------
def _clouds(ctx: StageContext, category: str, split: str, n_shapes: int) -> torch.Tensor:
    """``[n_shapes, M, 3]`` surface supersets of one category and split."""
    data = ctx.params.data
    seed = derive_seed(data.seed, "shapes", split, category)
    if data.pc15k_root:
        return read_pc15k(
            ctx.data_path(data.pc15k_root), category, split, data.superset_points, seed, max_shapes=n_shapes
        )
    return sample_shapes(category, n_shapes, data.superset_points, seed=seed)


@stage(params=("data",), outs=(SHAPES,))
def prepare(ctx: StageContext) -> None:
    """Per category: training supersets (M points per shape) and test clouds (N points)."""
    data = ctx.params.data
    tensors = {}
    for category in data.used_categories():
        train, test_full = _clouds(ctx, category, "train", data.n_train), _clouds(ctx, category, "test", data.n_test)
        gen = torch.Generator().manual_seed(derive_seed(data.seed, "test_subset", category))
        # test clouds: the same superset-then-subset sampling as training targets, so both follow one law
        keep = torch.rand(test_full.shape[0], test_full.shape[1], generator=gen).argsort(1)[:, : data.n_points]
        tensors[f"{category}/train_superset"] = train
        tensors[f"{category}/test"] = test_full.gather(1, keep[..., None].expand(-1, -1, 3))
    source = f"PC15k at {data.pc15k_root}" if data.pc15k_root else "procedural"
    save_tensors(tensors, ctx.path(SHAPES), metadata={"source": f"{source} {data.used_categories()}"})
    ctx.log_metrics({"n_train_per_category": data.n_train, "n_test_per_category": data.n_test})


# --------------------------------------------------------------------------------------------------
# stage 2: offline superset OT (§3.2)
# --------------------------------------------------------------------------------------------------
@stage(
    params=(*CATEGORIES, "data.seed", "ot"),
    deps=(SHAPES,),
    outs=(SUPERSET_OT,),
    metrics=(OT_METRICS,),
    timings=(OT_TIMINGS,),
)
def ot_precompute(ctx: StageContext) -> None:
    """Pair every training superset with a Gaussian superset by one exact OT solve."""
    shapes, pairs, per = load_tensors(ctx.path(SHAPES)), {}, []
    for category in ctx.params.data.used_categories():
        seed = derive_seed(ctx.params.data.seed, "superset_noise", category)
        pairs[f"{category}/x0"], pairs[f"{category}/x1"], stats = precompute_superset_ot(
            shapes[f"{category}/train_superset"], seed=seed, solver=ctx.params.ot.solver
        )
        per.append(stats)
    save_tensors(pairs, ctx.path(SUPERSET_OT))
    save_json({"solve_seconds": sum(st["solve_seconds"] for st in per)}, ctx.path(OT_TIMINGS))
    n = sum(st["n_shapes"] for st in per)  # the shape-weighted means over categories
    save_json(
        {
            "mean_pair_cost": sum(st["mean_pair_cost"] * st["n_shapes"] for st in per) / n,
            "mean_independent_cost": sum(st["mean_independent_cost"] * st["n_shapes"] for st in per) / n,
            "n_shapes": n,
            "n_points": per[0]["n_points"],
        },
        ctx.path(OT_METRICS),
    )


# --------------------------------------------------------------------------------------------------
# stage 3: flow-matching training, one model per category, coupling and seed
# --------------------------------------------------------------------------------------------------
@stage(
    gpu=True,
    params=("seeds", *CATEGORIES, "data.n_points", "model", "train"),
    deps=(SUPERSET_OT,),
    outs=(MODELS, TRAIN_CURVES),
    plots=(Plot(TRAIN_PLOT),),
    models={"flow": MODELS},
)
def train(ctx: StageContext) -> None:
    """Train one flow-matching model per category, coupling and seed (a seed's models share their
    initial weights and, within a category, their sequence of shape batches)."""
    p = ctx.params
    pairs = load_tensors(ctx.path(SUPERSET_OT))
    curves = []
    for category in p.data.used_categories():
        shapes = random_batches(pairs[f"{category}/x0"], pairs[f"{category}/x1"], size=p.train.batch_size)
        for method in method_names(p.train.couplings, p.train.betas):
            for seed in p.seeds:
                model = velocity_model(p, seed)

                def batches(step: int, gen: torch.Generator, method: str = method) -> tuple[torch.Tensor, ...]:
                    x0, x1 = draw_pairs(method, *shapes(step, gen), p.data.n_points, gen)
                    return x0, x1, sample_time(x0.shape[0], gen)

                name = f"{category}/{method}/seed{seed}"
                cfg = TrainConfig(
                    steps=p.train.steps,
                    lr=p.train.lr,
                    seed=derive_seed(seed, "batches", category),
                    log_every=max(1, p.train.steps // 50),
                    progress=ctx.progress,
                    desc=f"nsot {name}",
                    grad_clip=1.0,
                )
                result = fit(model, pair_loss, batches, cfg, callback=ctx.metric_callback(f"train/{name}"))
                save_model(model, ctx.path(model_file(category, method, seed)))
                curves += result.curve(category=category, method=method, seed=seed)
    save_table(curves, ctx.path(TRAIN_CURVES))
    training_curves(curves, ctx.path(TRAIN_PLOT))


# --------------------------------------------------------------------------------------------------
# stage 4: the couplings measured: mean pair cost per category and seed, and training step time against N
# --------------------------------------------------------------------------------------------------
@stage(
    params=(
        "seeds",
        *CATEGORIES,
        "data.n_points",
        "data.seed",
        "model",
        "train.batch_size",
        "train.betas",
        "train.lr",
        "eval.pair_batches",
        "eval.timing_points",
        "eval.timing_batch",
        "eval.timing_steps",
    ),
    deps=(SUPERSET_OT,),
    outs=(PAIR_COSTS,),
    metrics=(COUPLING_METRICS,),
    timings=(STEP_TIMINGS,),
)
def couplings(ctx: StageContext) -> None:
    """Measure mean pair cost per coupling, category and seed, and training step time against N."""
    costs = pair_costs(ctx.params, load_tensors(ctx.path(SUPERSET_OT)))
    save_table(costs, ctx.path(PAIR_COSTS))
    methods = dict.fromkeys(r["method"] for r in costs)
    save_json(
        {"pair_cost": {m: mean(values(costs, "pair_cost", method=m)) for m in methods}}, ctx.path(COUPLING_METRICS)
    )
    save_json({"steps": step_timings(ctx.params)}, ctx.path(STEP_TIMINGS))


# --------------------------------------------------------------------------------------------------
# stage 5: evaluation, per category: 1-NNA-CD at every step count, 1-NNA / COV / MMD (CD, EMD) at one
# --------------------------------------------------------------------------------------------------
@stage(
    params=(
        "seeds",
        *CATEGORIES,
        "data.n_points",
        "model",
        "train.couplings",
        "train.betas",
        "eval.n_generated",
        "eval.euler_steps",
        "eval.metric_steps",
    ),
    deps=(SHAPES, MODELS),
    outs=(EVAL,),
    metrics=(EVAL_METRICS,),
    plots=(Plot(NNA_PLOT), Plot(NNA_DATA, x="euler_steps", y="nsot", title="1-NNA-CD (%) of NSOT vs Euler steps")),
)
def evaluate(ctx: StageContext) -> None:
    """Generate clouds with 1-20 Euler steps and score them against the category's test set."""
    p = ctx.params
    shapes, methods, rows = load_tensors(ctx.path(SHAPES)), method_names(p.train.couplings, p.train.betas), []
    for category in p.data.used_categories():
        ref = shapes[f"{category}/test"][: p.eval.n_generated]
        d_ref_ref = {d: PAIRWISE_DISTANCES[d](ref, ref, 256) for d in ("cd", "emd")}  # shared by every model
        for method in methods:
            for seed in p.seeds:
                model = velocity_model(p, seed)
                model.load_state_dict(load_tensors(ctx.path(model_file(category, method, seed))))
                model.eval()
                noise = torch.randn(  # the same noise for every coupling
                    (p.eval.n_generated, p.data.n_points, 3),
                    generator=torch.Generator().manual_seed(derive_seed(seed, "eval_noise", category)),
                )
                scored = score_clouds(model, noise, ref, d_ref_ref, p.eval.euler_steps, p.eval.metric_steps)
                rows += [{"category": category, "method": method, "seed": seed, **r} for r in scored]
    save_table(rows, ctx.path(EVAL))
    save_json(
        {
            f"{m}/1nna_cd_at{s}": sum(r["1nna_cd"] for r in rows if r["method"] == m and r["euler_steps"] == s)
            / (len(p.seeds) * len(p.data.used_categories()))
            for m in methods
            for s in p.eval.euler_steps
        },
        ctx.path(EVAL_METRICS),
    )
    nna_vs_steps(rows, methods, p.eval.euler_steps, ctx.path(NNA_PLOT), ctx.path(NNA_DATA))


PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=NsotParams,
    stages=(prepare, ot_precompute, train, couplings, evaluate),
    report="pipelines.nsot.report:report",
)
