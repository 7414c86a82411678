"""Not-so-optimal transport flows for 3-D point clouds (NSOT, arXiv 2502.12456).

Reproduces the paper's comparison of couplings for point-cloud flow matching (its table of 1-NNA on
ShapeNet at small inference budgets) at CPU scale:

* §3.2 offline superset OT: for each training shape, a dense surface superset (M points) is paired
  with a Gaussian superset of the same size by one exact OT solve, stored once (``ot_precompute``);
* §3.3 online subsampling: each training pair is a random N-subset taken at the same indices on both
  sides, so the pairing is approximately optimal at the online cost of random pairing;
* §3.4 hybrid coupling: ``x0 <- sqrt(1 - beta) x0 + sqrt(beta) eps`` pulls the pairs back toward the
  independent coupling;
* flow matching with the linear interpolant and few-step Euler sampling; 1-NNA (Chamfer), COV, MMD.

Baselines: independent coupling, and online per-sample (equivariant) OT solved by the Hungarian
algorithm at every step. Offline data: procedural ShapeNet-like shapes from trimesh primitives; set
``data.pc15k_root`` to a ShapeNetCore.v2.PC15k folder to use the real clouds.
"""

from __future__ import annotations

import time

import torch

from components.data.shapes import read_pc15k, sample_shapes
from components.generative import couple, pair_loss, sample, sample_time
from components.io import load_json, load_table, load_tensors, save_json, save_model, save_table, save_tensors
from components.metrics.pointcloud import pairwise_chamfer, point_cloud_metrics
from components.models.point_transformer import PointTransformer, PointTransformerConfig
from components.ot import hybrid_coupling, pair_cost, precompute_superset_ot, subsample_pairs
from components.training import TrainConfig, fit, random_batches
from paperflows.runtime import Pipeline, Plot, StageContext, stage
from paperflows.seeds import derive_seed
from pipelines.nsot import ABOUT
from pipelines.nsot.params import TIMED, DataParams, NsotParams, beta_of, method_names
from pipelines.nsot.plots import nna_vs_steps, training_curves
from pipelines.nsot.report import build_report

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
REPORT, REPORT_MD = "report.json", "report.md"


def model_file(method: str, seed: int) -> str:
    return f"{MODELS}{method}_seed{seed}.safetensors"


# --------------------------------------------------------------------------------------------------
# stage 1: data (procedural ShapeNet-like shapes, or ShapeNetCore.v2.PC15k)
# --------------------------------------------------------------------------------------------------
def _procedural(data: DataParams, n_shapes: int, split: str) -> torch.Tensor:
    per = [n_shapes // len(data.categories) + (i < n_shapes % len(data.categories))
           for i in range(len(data.categories))]
    parts = [sample_shapes(cat, n, data.superset_points, seed=derive_seed(data.seed, "shapes", split, cat))
             for cat, n in zip(data.categories, per) if n > 0]
    return torch.cat(parts)


@stage(params=("data",), outs=(SHAPES,))
def prepare(ctx: StageContext) -> None:
    """Sample training supersets (M points per shape) and test clouds (N points)."""
    data = ctx.params.data
    if data.pc15k_root:
        root = ctx.data_path(data.pc15k_root)
        train, test_full = (read_pc15k(root, data.pc15k_category, split, data.superset_points,
                                       derive_seed(data.seed, "pc15k", split), max_shapes=n)
                            for split, n in (("train", data.n_train), ("test", data.n_test)))
        source = f"PC15k {data.pc15k_category} at {root}"
    else:
        train, test_full = _procedural(data, data.n_train, "train"), _procedural(data, data.n_test, "test")
        source = f"procedural {data.categories}"
    gen = torch.Generator().manual_seed(derive_seed(data.seed, "test_subset"))
    # test clouds: the same superset-then-subset sampling as training targets, so both follow one law
    keep = torch.rand(test_full.shape[0], test_full.shape[1], generator=gen).argsort(1)[:, :data.n_points]
    test = test_full.gather(1, keep[..., None].expand(-1, -1, 3))
    save_tensors({"train_superset": train, "test": test}, ctx.path(SHAPES), metadata={"source": source})
    ctx.log_metrics({"n_train": train.shape[0], "n_test": test.shape[0]})


# --------------------------------------------------------------------------------------------------
# stage 2: offline superset OT (§3.2)
# --------------------------------------------------------------------------------------------------
@stage(params=("data.seed", "ot"), deps=(SHAPES,), outs=(SUPERSET_OT,), metrics=(OT_METRICS,), timings=(OT_TIMINGS,))
def ot_precompute(ctx: StageContext) -> None:
    """Pair every training superset with a Gaussian superset by one exact OT solve."""
    shapes = load_tensors(ctx.path(SHAPES))["train_superset"]
    x0, x1, stats = precompute_superset_ot(shapes, seed=derive_seed(ctx.params.data.seed, "superset_noise"),
                                           solver=ctx.params.ot.solver)
    save_tensors({"x0": x0, "x1": x1}, ctx.path(SUPERSET_OT))
    save_json({"solve_seconds": stats.pop("solve_seconds")}, ctx.path(OT_TIMINGS))
    save_json(stats, ctx.path(OT_METRICS))


# --------------------------------------------------------------------------------------------------
# the couplings (§3.3, §3.4): how each method pairs noise with a batch of shapes
# --------------------------------------------------------------------------------------------------
def draw_pairs(method: str, x0_sup: torch.Tensor, x1_sup: torch.Tensor, n_points: int,
               gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
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
# stage 3: flow-matching training, one model per coupling and seed
# --------------------------------------------------------------------------------------------------
@stage(gpu=True, params=("seeds", "data.n_points", "model", "train"), deps=(SUPERSET_OT,),
       outs=(MODELS, TRAIN_CURVES), plots=(Plot(TRAIN_PLOT),), models={"flow": MODELS})
def train(ctx: StageContext) -> None:
    """Train one flow-matching model per coupling and seed."""
    p = ctx.params
    pairs = load_tensors(ctx.path(SUPERSET_OT))
    shapes = random_batches(pairs["x0"], pairs["x1"], size=p.train.batch_size)
    curves = []
    for method in method_names(p.train.couplings, p.train.betas):
        for seed in p.seeds:
            model = _model(p, seed)

            def batches(step: int, gen: torch.Generator, method: str = method) -> tuple[torch.Tensor, ...]:
                x0, x1 = draw_pairs(method, *shapes(step, gen), p.data.n_points, gen)
                return x0, x1, sample_time(x0.shape[0], gen)

            cfg = TrainConfig(steps=p.train.steps, lr=p.train.lr, seed=derive_seed(seed, "batches"),
                              log_every=max(1, p.train.steps // 50), progress=ctx.progress,
                              desc=f"nsot {method} seed {seed}", grad_clip=1.0)
            result = fit(model, pair_loss, batches, cfg, callback=ctx.metric_callback(f"train/{method}/seed{seed}"))
            save_model(model, ctx.path(model_file(method, seed)))
            curves += result.curve(method=method, seed=seed)
    save_table(curves, ctx.path(TRAIN_CURVES))
    training_curves(curves, ctx.path(TRAIN_PLOT))


# --------------------------------------------------------------------------------------------------
# stage 4: the couplings measured: mean pair cost per seed, and training step time against N
# --------------------------------------------------------------------------------------------------
def _timed_step(method: str, model: PointTransformer, opt: torch.optim.Optimizer, x0_sup: torch.Tensor,
                x1_sup: torch.Tensor, n: int, gen: torch.Generator) -> tuple[float, float]:
    """``(step ms, of which drawing the pairs ms)`` of one training step at N = ``n``."""
    started = time.perf_counter()
    x0, x1 = draw_pairs(method, x0_sup, x1_sup, n, gen)
    drawn = time.perf_counter()
    loss = pair_loss(model, (x0, x1, sample_time(x0.shape[0], gen)))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return 1000 * (time.perf_counter() - started), 1000 * (drawn - started)


@stage(params=("seeds", "data.categories", "data.n_points", "data.seed", "model", "train.batch_size", "train.betas",
               "train.lr", "eval.pair_batches", "eval.timing_points", "eval.timing_steps"),
       deps=(SUPERSET_OT,), outs=(PAIR_COSTS,),
       metrics=(COUPLING_METRICS,), timings=(STEP_TIMINGS,))
def couplings(ctx: StageContext) -> None:
    """Measure mean pair cost per coupling, and training step time against N."""
    p = ctx.params
    pairs = load_tensors(ctx.path(SUPERSET_OT))
    shapes = random_batches(pairs["x0"], pairs["x1"], size=p.train.batch_size)
    costs = []
    for seed in p.seeds:
        for method in ("independent", "online_ot", "nsot", *[f"nsot_b{b:g}" for b in p.train.betas]):
            pick = torch.Generator().manual_seed(derive_seed(seed, "pair_cost", "shapes"))  # same for every method
            gen = torch.Generator().manual_seed(derive_seed(seed, "pair_cost", "pairs"))
            batch_costs = [pair_cost(*draw_pairs(method, *shapes(0, pick), p.data.n_points, gen)).mean().item()
                           for _ in range(p.eval.pair_batches)]
            costs.append({"method": method, "seed": seed, "pair_cost": sum(batch_costs) / len(batch_costs)})
    save_table(costs, ctx.path(PAIR_COSTS))
    methods = dict.fromkeys(r["method"] for r in costs)
    save_json({"pair_cost": {m: sum(r["pair_cost"] for r in costs if r["method"] == m) / len(p.seeds)
                             for m in methods}}, ctx.path(COUPLING_METRICS))
    # step time: the couplings timed one after the other in each round, so a round shares the machine's load
    model = _model(p, p.seeds[0])
    opt = torch.optim.AdamW(model.parameters(), lr=p.train.lr)
    gen = torch.Generator().manual_seed(derive_seed(p.data.seed, "timing"))
    chosen = torch.arange(p.train.batch_size) % 4  # four shapes, repeated to a full batch
    timings = []
    for n in p.eval.timing_points:
        few = sample_shapes(p.data.categories[0], 4, 2 * n, seed=derive_seed(p.data.seed, "timing_shapes", n))
        x0_sup, x1_sup, _ = precompute_superset_ot(few, seed=derive_seed(p.data.seed, "timing_noise", n))
        x0_sup, x1_sup = x0_sup[chosen], x1_sup[chosen]  # the offline OT is not part of the step time
        for method in TIMED:  # warm-up: one untimed step (first-call allocations, optimiser state)
            _timed_step(method, model, opt, x0_sup, x1_sup, n, gen)
        for rnd in range(p.eval.timing_steps):
            for method in TIMED:
                step_ms, coupling_ms = _timed_step(method, model, opt, x0_sup, x1_sup, n, gen)
                timings.append({"method": method, "n_points": n, "round": rnd, "step_ms": step_ms,
                                "coupling_ms": coupling_ms})
    save_json({"steps": timings}, ctx.path(STEP_TIMINGS))


# --------------------------------------------------------------------------------------------------
# stage 5: evaluation, 1-NNA / COV / MMD at few Euler steps
# --------------------------------------------------------------------------------------------------
@stage(params=("seeds", "data.n_points", "model", "train.couplings", "train.betas", "eval.n_generated",
               "eval.euler_steps"), deps=(SHAPES, MODELS), outs=(EVAL,),
       metrics=(EVAL_METRICS,), plots=(Plot(NNA_PLOT), Plot(NNA_DATA, x="euler_steps", y="nsot",
                                                               title="1-NNA-CD (%) of NSOT vs Euler steps")))
def evaluate(ctx: StageContext) -> None:
    """Generate clouds with 1-20 Euler steps and score them against the test set."""
    p = ctx.params
    ref = load_tensors(ctx.path(SHAPES))["test"][: p.eval.n_generated]
    d_ref_ref = pairwise_chamfer(ref, ref)  # shared by every model and step count
    methods = method_names(p.train.couplings, p.train.betas)
    rows = []
    for method in methods:
        for seed in p.seeds:
            model = _model(p, seed)
            model.load_state_dict(load_tensors(ctx.path(model_file(method, seed))))
            model.eval()
            noise = torch.randn(p.eval.n_generated, p.data.n_points, 3,  # the same noise for every coupling
                                generator=torch.Generator().manual_seed(derive_seed(seed, "eval_noise")))
            for steps in p.eval.euler_steps:
                with torch.no_grad():
                    result = sample(model, noise, steps, "euler")
                scores = point_cloud_metrics(result.x, ref, metric="cd", d_ref_ref=d_ref_ref)
                rows.append({"method": method, "seed": seed, "euler_steps": steps, "nfe": result.nfe,
                             "1nna_cd": 100 * scores["1nna_cd"], "cov_cd": 100 * scores["cov_cd"],
                             "mmd_cd": scores["mmd_cd"]})
    save_table(rows, ctx.path(EVAL))
    save_json({f"{m}/1nna_cd_at{s}": sum(r["1nna_cd"] for r in rows if r["method"] == m and r["euler_steps"] == s)
               / len(p.seeds) for m in methods for s in p.eval.euler_steps}, ctx.path(EVAL_METRICS))
    nna_vs_steps(rows, methods, p.eval.euler_steps, ctx.path(NNA_PLOT), ctx.path(NNA_DATA))


# --------------------------------------------------------------------------------------------------
# stage 6: the paper-shaped table and the claims
# --------------------------------------------------------------------------------------------------
@stage(params=("seeds", "ot", "train", "eval"), deps=(EVAL, PAIR_COSTS, STEP_TIMINGS, OT_METRICS, OT_TIMINGS),
       outs=(REPORT, REPORT_MD))
def report(ctx: StageContext) -> None:
    """Build the result table (methods x 1-NNA at each step count) and evaluate the claims."""
    ot_stats = {**load_json(ctx.path(OT_METRICS)), "ot_seconds": load_json(ctx.path(OT_TIMINGS))["solve_seconds"]}
    build_report(load_table(ctx.path(EVAL)), load_table(ctx.path(PAIR_COSTS)),
                 load_json(ctx.path(STEP_TIMINGS))["steps"], ot_stats, ctx.params).save(ctx.path(REPORT))


PIPELINE = Pipeline(paper=ABOUT, params_model=NsotParams,
                    stages=(prepare, ot_precompute, train, couplings, evaluate, report))
