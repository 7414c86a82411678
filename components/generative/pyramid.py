"""Pyramidal flow matching (Pyramid Flow, Jin et al., ICLR 2025, arXiv 2410.05954) on the shared core.

**Conventions.** The paper (SD3 style) writes ``x = sigma * noise + (1 - sigma) * data`` with sigma going
1 -> 0 and a model that predicts ``start - end``. The core (:mod:`components.generative`) has t = 0 at the
source and t = 1 at the data. Inside stage k the path between its noisier ``start`` and cleaner ``end``
is, in core terms, the linear interpolant with ``x0 = start`` and ``x1 = end``::

    x_t = (1 - t) * start + t * end,     target = end - start    (the paper's target with the sign flipped)

so a stage is trained with ``flow_matching_loss(stage_field(model, schedule, k), start, end, t)`` and
sampled with the core :func:`~components.generative.samplers.sample` from t = 0 to 1. The network sees the
*global* time ``tau_k(t) = a_k + t (b_k - a_k)`` (0 = pure noise, 1 = data), see :class:`PyramidSchedule`.

**Schedule** (K stages, ``stage_range = [0, 1/K, ..., 1]``, shift 1): stage k runs from the original start
sigma ``1 - k/K`` to the end sigma ``e_k = 1 - (k+1)/K`` (0 for the last). For k > 0 the start is corrected
because the jump adds noise (below): with ``o = 1 - sigma_orig`` (the signal coefficient there),

    1 - s_k = o / (sqrt(1 + 1/gamma) (1 - o) + o).

The official scheduler indexes a 1000-step grid (``int(1/3 * 1000) = 333`` -> sigma 0.667); here the
boundaries are the exact fractions (a 5e-4 difference).

**Pyramids.** Levels are numbered 0 (coarsest, ``full / 2^(K-1)``) to K-1 (full resolution).
Data: ``x_k = bilinear_down(x_{k+1})`` (a 2x2 mean). Noise: ``n_k = 2 * bilinear_down(n_{k+1})``; the mean of
four unit-variance values has variance 1/4, so the factor 2 keeps unit variance (official code).

**Training pair of stage k** (at level k)::

    start = n_0                                   k = 0
          = s_k n_k + (1 - s_k) Up(x_{k-1})       k > 0, Up = nearest-neighbour x2
    end   = e_k n_k + (1 - e_k) x_k               (= x_{K-1} for the last stage)

**Jump renoising** (inference, end of stage k-1 -> start of stage k), with ``o = 1 - e_{k-1}``::

    x <- alpha Up(x) + beta n_blk,   alpha = 1 / (sqrt(1 + 1/gamma)(1 - o) + o),   beta = alpha (1 - o) / sqrt(gamma)

where ``n_blk`` is drawn per 2x2 block from ``N(0, (1 + gamma) I - gamma 11^T)``. Why it is continuous in
distribution: the end of stage k-1 is ``e n + o x`` (e = 1 - o). After Up, each 2x2 block carries the same
noise value, i.e. block covariance ``e^2 11^T``. The jumped state is ``alpha o Up(x) + noise`` with block
covariance ``alpha^2 e^2 11^T + beta^2 ((1 + gamma) I - gamma 11^T) = alpha^2 e^2 (1 + 1/gamma) I`` (the
``11^T`` terms cancel because ``beta^2 gamma = alpha^2 e^2``): isotropic, with standard deviation
``alpha e sqrt(1 + 1/gamma) = s_k`` and signal coefficient ``alpha o = 1 - s_k``: exactly the law of the
stage-k start ``s_k n + (1 - s_k) Up(x_{k-1})``. At gamma = 1/3 the block noise sums to zero in every block.
:data:`JUMPS` also holds the ablations "iid" (same alpha, beta, i.i.d. noise: right variance, but the
pixels of a block stay correlated by ``gamma / (1 + gamma)``) and "none" (plain Up, no renoising). The
un-renoised state ``e Up(n) + o Up(x)`` has noise level e = e_{k-1}, less than the corrected start s_k;
stage k passes that level at local time ``(s_k - e) / (s_k - e_k)``
(:meth:`PyramidSchedule.unrenoised_entry_time`), so "none" enters the stage there (:data:`JUMP_ENTRY`),
with the same number of steps over the shorter span. Its state then has the noise level and signal
coefficient the stage expects at that time; what still differs is the noise itself, constant on every
2x2 block instead of independent per pixel: the defect the renoising corrects.

**Temporal pyramid** (autoregressive video): frames are generated one at a time under a causal temporal
mask. The history of a frame generated at stage k is compressed: the frame at lag d (1 = most recent)
is given at level ``max(k - d + 1, 0)`` (official ``generate`` / ``add_pyramid_noise_with_temporal_pyramid``),
and during training every history frame is corrupted as ``c <- r eps + (1 - r) c`` with ``r ~ U(0,
corrupt_ratio)`` per sample. Only the newest frame is in the loss.

**Unified training** (:func:`pyramid_batches`, :func:`pyramid_loss`): each batch is split into columns, one
per stage (``sample_ratios = [1, 1, 1]``); a column draws clip prefixes whose length follows
:func:`unit_lengths`, and its loss is the flow-matching loss of its stage on the newest frame.

**Compute** (:class:`ComputeCounter`): the exact tokens, newest-frame tokens and training FLOPs of every
optimiser step (``flop_factor`` forwards per sample, backward ~ 2 forwards), summed over steps, and the
model FLOPs to sample one clip, all from :func:`sequence_layout` and a FLOP count of one forward pass.

What needs no tensors (the schedule, batch columns, history levels, sequence layouts and the compute) lives
in :mod:`components.generative.pyramid_schedule`, re-exported here; parameter models import that module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from components.generative.flow_matching import flow_matching_loss
from components.generative.pyramid_schedule import (
    HISTORY_MODES,
    ComputeCounter,
    Cost,
    PyramidSchedule,
    batch_columns,
    history_levels,
    sequence_layout,
    unit_lengths,
)
from components.generative.samplers import sample
from components.generative.time import sample_time

__all__ = [
    "HISTORY_MODES",
    "JUMPS",
    "JUMP_ENTRY",
    "ClipSampleResult",
    "ComputeCounter",
    "Cost",
    "PyramidSampleResult",
    "PyramidSchedule",
    "autoregressive_sample",
    "batch_columns",
    "block_noise",
    "block_noise_covariance",
    "compress_history",
    "corrupt_history",
    "data_pyramid",
    "downsample",
    "guided_velocity",
    "history_levels",
    "jump",
    "noise_pyramid",
    "pyramid_batches",
    "pyramid_loss",
    "pyramid_sample",
    "sequence_layout",
    "stage_field",
    "stage_pair",
    "unit_lengths",
    "upsample_nearest",
]


# --------------------------------------------------------------------------------------------------
# resampling and pyramids (over the last two dims; any leading dims)
# --------------------------------------------------------------------------------------------------
def _spatial(fn: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    lead = x.shape[:-2]
    y = fn(x.reshape(-1, 1, *x.shape[-2:]))
    return y.reshape(*lead, *y.shape[-2:])


def downsample(x: Tensor) -> Tensor:
    """Bilinear x1/2 over the last two dims (even sizes): exactly the mean of each 2x2 block."""
    if x.shape[-1] % 2 or x.shape[-2] % 2:
        raise ValueError(f"downsample needs even spatial sizes, got {tuple(x.shape[-2:])}")
    return _spatial(
        lambda y: F.interpolate(y, size=(y.shape[-2] // 2, y.shape[-1] // 2), mode="bilinear", align_corners=False), x
    )


def upsample_nearest(x: Tensor) -> Tensor:
    """Nearest-neighbour x2 over the last two dims: every value becomes a constant 2x2 block."""
    return _spatial(lambda y: F.interpolate(y, scale_factor=2, mode="nearest"), x)


def data_pyramid(x: Tensor, n_levels: int) -> list[Tensor]:
    """``[x_0, ..., x_{K-1}]`` coarse to fine, ``x_{K-1} = x`` and ``x_k = downsample(x_{k+1})``."""
    levels = [x]
    for _ in range(n_levels - 1):
        levels.append(downsample(levels[-1]))
    return levels[::-1]


def noise_pyramid(noise: Tensor, n_levels: int) -> list[Tensor]:
    """``[n_0, ..., n_{K-1}]`` coarse to fine, ``n_k = 2 * downsample(n_{k+1})`` (unit variance kept)."""
    levels = [noise]
    for _ in range(n_levels - 1):
        levels.append(2.0 * downsample(levels[-1]))
    return levels[::-1]


def block_noise_covariance(gamma: float) -> Tensor:
    """The 4x4 covariance ``(1 + gamma) I - gamma 11^T`` of one 2x2 block (row-major pixel order)."""
    return (1.0 + gamma) * torch.eye(4, dtype=torch.float64) - gamma * torch.ones(4, 4, dtype=torch.float64)


def block_noise(
    shape: Sequence[int], gamma: float, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float32
) -> Tensor:
    """Noise of ``shape [..., H, W]`` (H, W even), independent across 2x2 blocks, each block drawn from
    ``N(0, (1 + gamma) I - gamma 11^T)``. The covariance is singular at gamma = 1/3 (block sums are 0),
    so it is sampled with its symmetric square root, not a Cholesky factor."""
    *lead, h, w = shape
    if h % 2 or w % 2:
        raise ValueError(f"block noise needs even spatial sizes, got {(h, w)}")
    vals, vecs = torch.linalg.eigh(block_noise_covariance(gamma))
    root = ((vecs * vals.clamp_min(0).sqrt()) @ vecs.T).to(dtype)
    z = torch.randn(*lead, h // 2, w // 2, 4, generator=generator, dtype=dtype)
    blocks = z @ root.T  # [..., h/2, w/2, 4] with (p, q) row-major inside the block
    blocks = blocks.reshape(*lead, h // 2, w // 2, 2, 2).movedim(-2, -3)  # [..., h/2, 2, w/2, 2]
    return blocks.reshape(*lead, h, w)


# --------------------------------------------------------------------------------------------------
# training: the pair (start, end) of a stage, and the model seen through a stage's time
# --------------------------------------------------------------------------------------------------
def stage_pair(
    data_levels: Sequence[Tensor], noise_levels: Sequence[Tensor], stage: int, schedule: PyramidSchedule
) -> tuple[Tensor, Tensor]:
    """``(start, end)`` of ``stage`` at its level (see the module docstring); levels coarse to fine."""
    if len(data_levels) != schedule.n_stages or len(noise_levels) != schedule.n_stages:
        raise ValueError(
            f"need {schedule.n_stages} levels of data and noise, got {len(data_levels)} and {len(noise_levels)}"
        )
    s, e = schedule.start_sigma(stage), schedule.end_sigma(stage)
    noise, clean = noise_levels[stage], data_levels[stage]
    if stage == 0:
        start = noise
    else:
        start = s * noise + (1 - s) * upsample_nearest(data_levels[stage - 1])
    end = clean if stage == schedule.n_stages - 1 else e * noise + (1 - e) * clean
    return start, end


def stage_field(model: Callable[..., Tensor], schedule: PyramidSchedule, stage: int) -> Callable[..., Tensor]:
    """``f(x, t_local, **kw) = model(x, tau_stage(t_local), stage=stage, **kw)``: a stage as a core velocity model."""

    def field_(x: Tensor, t: Tensor, **kwargs: object) -> Tensor:
        return model(x, schedule.global_time(stage, t), stage=stage, **kwargs)

    return field_


def pyramid_batches(
    clips: Tensor,
    labels: Tensor,
    schedule: PyramidSchedule,
    column_sizes: Sequence[int],
    column_stages: Sequence[int],
    *,
    history_mode: str = "compressed",
    corrupt_ratio: float = 1 / 3,
    label_dropout: float = 0.0,
    null_label: int = 0,
) -> Callable[[int, torch.Generator], list[dict[str, Any]]]:
    """``batches(step, generator)`` for :func:`components.training.fit`: one group per batch column.

    Column c draws ``column_sizes[c]`` clips of ``clips [N, T, C, H, W]``, keeps the prefix of
    ``unit_lengths(step, T, n_columns)[c]`` frames and makes the training pair of stage ``column_stages[c]``
    for its newest frame (:func:`stage_pair`); the earlier frames become its history (compressed, then
    corrupted). A label is replaced by ``null_label`` with probability ``label_dropout`` (for CFG).
    Each group is ``{"x0": start, "x1": end, "t", "history", "labels", "stage"}``.
    """
    if len(column_sizes) != len(column_stages):
        raise ValueError(f"{len(column_sizes)} column sizes for {len(column_stages)} column stages")
    n_frames, k = clips.shape[1], schedule.n_stages

    def draw(step: int, gen: torch.Generator) -> list[dict[str, Any]]:
        groups = []
        for size, stage, length in zip(
            column_sizes, column_stages, unit_lengths(step, n_frames, len(column_sizes)), strict=True
        ):
            idx = torch.randint(0, clips.shape[0], (size,), generator=gen)
            clip = clips[idx, :length]
            current = clip[:, -1]
            noise = torch.randn(current.shape, generator=gen)
            start, end = stage_pair(data_pyramid(current, k), noise_pyramid(noise, k), stage, schedule)
            history: list[Tensor] = []
            if length > 1:
                history = compress_history(data_pyramid(clip[:, :-1], k), stage, history_mode)
                history = corrupt_history(history, corrupt_ratio, gen)
            y = labels[idx].clone()
            y[torch.rand(size, generator=gen) < label_dropout] = null_label
            groups.append(
                {"x0": start, "x1": end, "t": sample_time(size, gen), "history": history, "labels": y, "stage": stage}
            )
        return groups

    return draw


def pyramid_loss(schedule: PyramidSchedule) -> Callable[[nn.Module, list[dict[str, Any]]], Tensor]:
    """The loss for ``fit``: each column's flow-matching loss at its stage, averaged over all samples."""

    def loss(model: nn.Module, groups: list[dict[str, Any]]) -> Tensor:
        losses = [
            flow_matching_loss(
                stage_field(model, schedule, g["stage"]),
                g["x0"],
                g["x1"],
                g["t"],
                model_kwargs={"history": g["history"], "labels": g["labels"]},
            )
            * g["x0"].shape[0]
            for g in groups
            if g["x0"].shape[0] > 0
        ]
        return torch.stack(losses).sum() / sum(g["x0"].shape[0] for g in groups)

    return loss


def guided_velocity(
    model: Callable[..., Tensor], labels: Tensor, guidance: float = 1.0, null_label: int = 0
) -> Callable[[Tensor, Tensor, int, list[Tensor]], Tensor]:
    """``velocity(x, tau, stage, history)`` of a class-conditional model for :func:`autoregressive_sample`,
    with classifier-free guidance ``u + w (c - u)`` (one batched call of both) when ``guidance != 1``."""

    def velocity(x: Tensor, tau: Tensor, stage: int, history: list[Tensor]) -> Tensor:
        if guidance == 1:
            return model(x, tau, history=history, stage=stage, labels=labels)
        both = model(
            torch.cat([x, x]),
            torch.cat([tau, tau]),
            history=[torch.cat([h, h]) for h in history],
            stage=stage,
            labels=torch.cat([labels, torch.full_like(labels, null_label)]),
        )
        cond, uncond = both.chunk(2)
        return uncond + guidance * (cond - uncond)

    return velocity


# --------------------------------------------------------------------------------------------------
# inference: the jump between stages
# --------------------------------------------------------------------------------------------------
def _jump_block(x: Tensor, schedule: PyramidSchedule, stage: int, generator: torch.Generator | None) -> Tensor:
    alpha, beta = schedule.jump_coefficients(stage)
    up = upsample_nearest(x)
    return alpha * up + beta * block_noise(up.shape, schedule.gamma, generator, up.dtype)


def _jump_iid(x: Tensor, schedule: PyramidSchedule, stage: int, generator: torch.Generator | None) -> Tensor:
    alpha, beta = schedule.jump_coefficients(stage)
    up = upsample_nearest(x)
    return alpha * up + beta * torch.randn(up.shape, generator=generator, dtype=up.dtype)


def _jump_none(x: Tensor, schedule: PyramidSchedule, stage: int, generator: torch.Generator | None) -> Tensor:
    return upsample_nearest(x)


#: name -> jump ``(x_end_of_previous_stage, schedule, stage_entered, generator) -> x_start``.
JUMPS: dict[str, Callable[[Tensor, PyramidSchedule, int, torch.Generator | None], Tensor]] = {
    "block": _jump_block,  # the paper: corrected start sigma + anti-correlated block noise
    "iid": _jump_iid,  # ablation: same coefficients, i.i.d. noise (blocks stay correlated)
    "none": _jump_none,  # ablation: no renoising at all
}


#: name -> local time ``(schedule, stage_entered) -> t`` at which the jumped state enters the stage.
JUMP_ENTRY: dict[str, Callable[[PyramidSchedule, int], float]] = {
    "block": lambda schedule, stage: 0.0,  # the renoised state has the corrected start's law
    "iid": lambda schedule, stage: 0.0,  # the same variance (block correlation left in)
    "none": lambda schedule, stage: schedule.unrenoised_entry_time(stage),  # where the stage has noise e_{k-1}
}


def jump(
    name: str, x: Tensor, schedule: PyramidSchedule, stage: int, generator: torch.Generator | None = None
) -> Tensor:
    """Apply the jump registered as ``name`` when entering ``stage``."""
    try:
        fn = JUMPS[name]
    except KeyError:
        raise ValueError(f"unknown jump {name!r}; expected one of {sorted(JUMPS)}") from None
    return fn(x, schedule, stage, generator)


# --------------------------------------------------------------------------------------------------
# the temporal pyramid: which level each history frame is given at
# --------------------------------------------------------------------------------------------------
def compress_history(levels: Sequence[Tensor], stage: int, mode: str = "compressed") -> list[Tensor]:
    """History frames for a frame generated at ``stage``.

    Args:
        levels: data pyramid of the history, coarse to fine: ``levels[l]`` is ``[B, F, C, h_l, w_l]``
            with the F history frames oldest first.
        stage: stage of the frame being generated.
        mode: see :func:`history_levels`.

    Returns:
        F tensors ``[B, C, h, w]``, oldest first, each at its level.
    """
    n_history = levels[0].shape[1]
    chosen = history_levels(n_history, stage, len(levels), mode)
    return [levels[level][:, i] for i, level in enumerate(chosen)]


def corrupt_history(frames: Sequence[Tensor], ratio: float, generator: torch.Generator | None = None) -> list[Tensor]:
    """``c <- r eps + (1 - r) c`` with one ``r ~ U(0, ratio)`` per sample shared by its history frames."""
    if not frames or ratio == 0:
        return list(frames)
    b = frames[0].shape[0]
    r = ratio * torch.rand(b, generator=generator, dtype=frames[0].dtype)
    out = []
    for f in frames:
        rb = r.view(b, *([1] * (f.ndim - 1)))
        out.append(rb * torch.randn(f.shape, generator=generator, dtype=f.dtype) + (1 - rb) * f)
    return out


# --------------------------------------------------------------------------------------------------
# sampling: one frame through all stages, then a clip frame by frame
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PyramidSampleResult:
    """``x`` at full resolution, ``nfe`` model calls, and the end state of every stage (coarse to fine)."""

    x: Tensor
    nfe: int
    stage_ends: tuple[Tensor, ...]


def pyramid_sample(
    field: Callable[[Tensor, Tensor, int], Tensor],
    schedule: PyramidSchedule,
    noise: Tensor,
    steps: Sequence[int],
    jump_name: str = "block",
    generator: torch.Generator | None = None,
) -> PyramidSampleResult:
    """Generate through every stage: Euler steps of the core :func:`sample` inside a stage, a jump between;
    after a jump the stage is integrated from the jump's entry time (:data:`JUMP_ENTRY`) to 1.

    Args:
        field: ``field(x [B, ...], tau [B], stage) -> velocity`` with the *global* time ``tau``.
        schedule: the stages.
        noise: full-resolution unit Gaussian ``[B, ..., H, W]``; stage 0 starts from its coarsest level
            (``noise_pyramid``), as the official sampler does.
        steps: Euler steps per stage.
        jump_name: key of :data:`JUMPS`.
        generator: draws the jump noise.
    """
    if len(steps) != schedule.n_stages:
        raise ValueError(f"need one step count per stage ({schedule.n_stages}), got {list(steps)}")
    x = noise_pyramid(noise, schedule.n_stages)[0]
    nfe, ends = 0, []
    for stage in range(schedule.n_stages):
        t0 = 0.0
        if stage > 0:
            x = jump(jump_name, x, schedule, stage, generator)
            t0 = JUMP_ENTRY[jump_name](schedule, stage)
        result = sample(lambda y, t, k=stage: field(y, schedule.global_time(k, t), k), x, steps[stage], "euler", t0=t0)
        x, nfe = result.x, nfe + result.nfe
        ends.append(x)
    return PyramidSampleResult(x=x, nfe=nfe, stage_ends=tuple(ends))


@dataclass(frozen=True)
class ClipSampleResult:
    """``clips [B, T, ...]`` at full resolution and the model calls made (``nfe``, summed over frames)."""

    clips: Tensor
    nfe: int


def autoregressive_sample(
    velocity: Callable[[Tensor, Tensor, int, list[Tensor]], Tensor],
    schedule: PyramidSchedule,
    noise: Tensor,
    steps: Sequence[int],
    history_mode: str = "compressed",
    jump_name: str = "block",
    generator: torch.Generator | None = None,
    first_steps: Sequence[int] | None = None,
    first_velocity: Callable[[Tensor, Tensor, int, list[Tensor]], Tensor] | None = None,
) -> ClipSampleResult:
    """Generate clips frame by frame (temporal pyramid): frame f sees frames ``0..f-1`` as history,
    compressed per stage (:func:`compress_history`), clean (no corruption at inference).

    Args:
        velocity: ``velocity(x, tau [B], stage, history) -> v`` with history a list of ``[B, C, h, w]``.
        noise: ``[B, T, C, H, W]`` one full-resolution noise per frame.
        steps: Euler steps per stage of every frame after the first.
        first_steps, first_velocity: the first frame's steps and velocity (the paper samples the first
            frame with more steps and a larger guidance); default ``steps`` and ``velocity``.
    """
    n_frames = noise.shape[1]
    frames: list[Tensor] = []
    nfe = 0
    for f in range(n_frames):
        if frames:
            past = data_pyramid(torch.stack(frames, dim=1), schedule.n_stages)
            histories = [compress_history(past, k, history_mode) for k in range(schedule.n_stages)]
        else:
            histories = [[] for _ in range(schedule.n_stages)]
        field = first_velocity if f == 0 and first_velocity is not None else velocity
        result = pyramid_sample(
            lambda x, tau, k, hist=histories, v=field: v(x, tau, k, hist[k]),
            schedule,
            noise[:, f],
            first_steps if f == 0 and first_steps is not None else steps,
            jump_name,
            generator,
        )
        frames.append(result.x)
        nfe += result.nfe
    return ClipSampleResult(clips=torch.stack(frames, dim=1), nfe=nfe)
