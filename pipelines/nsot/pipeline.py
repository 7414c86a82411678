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

import time

import torch

from components.data.shapes import read_pc15k, sample_shapes
from components.generative import couple, pair_loss, sample, sample_time
from components.io import load_tensors, save_json, save_model, save_table, save_tensors
from components.metrics.pointcloud import PAIRWISE_DISTANCES, point_cloud_metrics
from components.models.point_transformer import PointTransformer, PointTransformerConfig
from components.ot import hybrid_coupling, pair_cost, precompute_superset_ot, subsample_pairs
from components.training import TrainConfig, fit, random_batches
from paperflows.contract import Pipeline, Plot, StageContext, stage
from paperflows.rows import mean, values
from paperflows.seeds import derive_seed
from pipelines.nsot import ABOUT
from pipelines.nsot.params import TIMED, NsotParams, beta_of, method_names
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
# the couplings (§3.3, §3.4): how each method pairs noise with a batch of shapes
# --------------------------------------------------------------------------------------------------
def draw_pairs(
    method: str, x0_sup: torch.Tensor, x1_sup: torch.Tensor, n_points: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Training pairs ``(x0 [B,N,3], x1 [B,N,3])`` of the chosen shapes' supersets ``[B,M,3]`` under ``method``."""
    if method.startswith("nsot"):  # the stored OT pairs at one random index subset, then the hybrid blend
        x0, x1 = subsample_pairs(x0_sup, x1_sup, torch.arange(x1_sup.shape[0]), n_points, gen)
        return hybrid_coupling(x0, beta_of(method), gen), x1
    # independent / online OT: a random N-subset of the shape, fresh Gaussian noise
    keys = torch.rand(x1_sup.shape[0], x1_sup.shape[1], generator=gen).argsort(1)[:, :n_points]
    x1 = x1_sup.gather(1, keys[..., None].expand(-1, -1, 3))
    x0 = torch.randn(x1.shape, generator=gen)
    return couple("pointwise_ot" if method == "online_ot" else "independent", x0, x1, gen)


def _model(params: NsotParams, seed: int) -> PointTransformer:
    """The velocity network with the initial weights of ``seed`` (shared by every coupling of the seed)."""
    torch.manual_seed(derive_seed(seed, "init"))
    m = params.model
    return PointTransformer(PointTransformerConfig(d_model=m.d_model, n_layers=m.n_layers, n_heads=m.n_heads))


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
                model = _model(p, seed)

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
def _timed_step(
    method: str,
    model: PointTransformer,
    opt: torch.optim.Optimizer,
    x0_sup: torch.Tensor,
    x1_sup: torch.Tensor,
    n: int,
    gen: torch.Generator,
) -> tuple[float, float]:
    """``(step ms, of which drawing the pairs ms)`` of one training step at N = ``n``."""
    started = time.perf_counter()
    x0, x1 = draw_pairs(method, x0_sup, x1_sup, n, gen)
    drawn = time.perf_counter()
    loss = pair_loss(model, (x0, x1, sample_time(x0.shape[0], gen)))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return 1000 * (time.perf_counter() - started), 1000 * (drawn - started)


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
    p = ctx.params
    pairs = load_tensors(ctx.path(SUPERSET_OT))
    costs = []
    for category in p.data.used_categories():
        shapes = random_batches(pairs[f"{category}/x0"], pairs[f"{category}/x1"], size=p.train.batch_size)
        for seed in p.seeds:
            for method in ("independent", "online_ot", "nsot", *[f"nsot_b{b:g}" for b in p.train.betas]):
                # the same shapes for every method
                pick = torch.Generator().manual_seed(derive_seed(seed, "pair_cost", "shapes", category))
                gen = torch.Generator().manual_seed(derive_seed(seed, "pair_cost", "pairs", category))
                batch_costs = [
                    pair_cost(*draw_pairs(method, *shapes(0, pick), p.data.n_points, gen)).mean().item()
                    for _ in range(p.eval.pair_batches)
                ]
                costs.append(
                    {
                        "category": category,
                        "method": method,
                        "seed": seed,
                        "pair_cost": sum(batch_costs) / len(batch_costs),
                    }
                )
    save_table(costs, ctx.path(PAIR_COSTS))
    methods = dict.fromkeys(r["method"] for r in costs)
    save_json(
        {"pair_cost": {m: mean(values(costs, "pair_cost", method=m)) for m in methods}}, ctx.path(COUPLING_METRICS)
    )
    # step time: the couplings timed one after the other in each round, so a round shares the machine's load
    model = _model(p, p.seeds[0])
    opt = torch.optim.AdamW(model.parameters(), lr=p.train.lr)
    gen = torch.Generator().manual_seed(derive_seed(p.data.seed, "timing"))
    chosen = torch.arange(p.eval.timing_batch) % 4  # four shapes, repeated to the timed batch
    timings = []
    for n in p.eval.timing_points:
        few = sample_shapes("ellipsoid", 4, 2 * n, seed=derive_seed(p.data.seed, "timing_shapes", n))
        x0_sup, x1_sup, _ = precompute_superset_ot(few, seed=derive_seed(p.data.seed, "timing_noise", n))
        x0_sup, x1_sup = x0_sup[chosen], x1_sup[chosen]  # the offline OT is not part of the step time
        for method in TIMED:  # warm-up: one untimed step (first-call allocations, optimiser state)
            _timed_step(method, model, opt, x0_sup, x1_sup, n, gen)
        for rnd in range(p.eval.timing_steps):
            for method in TIMED:
                step_ms, coupling_ms = _timed_step(method, model, opt, x0_sup, x1_sup, n, gen)
                timings.append(
                    {"method": method, "n_points": n, "round": rnd, "step_ms": step_ms, "coupling_ms": coupling_ms}
                )
    save_json({"steps": timings}, ctx.path(STEP_TIMINGS))


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
                model = _model(p, seed)
                model.load_state_dict(load_tensors(ctx.path(model_file(category, method, seed))))
                model.eval()
                noise = torch.randn(
                    p.eval.n_generated,
                    p.data.n_points,
                    3,  # the same noise for every coupling
                    generator=torch.Generator().manual_seed(derive_seed(seed, "eval_noise", category)),
                )
                for steps in p.eval.euler_steps:
                    with torch.no_grad():
                        result = sample(model, noise, steps, "euler")
                    row = {
                        "category": category,
                        "method": method,
                        "seed": seed,
                        "euler_steps": steps,
                        "nfe": result.nfe,
                    }
                    for d in ("cd", "emd"):
                        scores = (
                            point_cloud_metrics(result.x, ref, metric=d, d_ref_ref=d_ref_ref[d])
                            if d == "cd" or steps == p.eval.metric_steps
                            else {}
                        )
                        row.update(
                            {
                                f"1nna_{d}": _percent(scores.get(f"1nna_{d}")),
                                f"cov_{d}": _percent(scores.get(f"cov_{d}")),
                                f"mmd_{d}": scores.get(f"mmd_{d}"),
                            }
                        )
                    rows.append(row)
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


def _percent(fraction: float | None) -> float | None:
    return None if fraction is None else 100 * fraction


PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=NsotParams,
    stages=(prepare, ot_precompute, train, couplings, evaluate),
    report="pipelines.nsot.report:report",
)
