"""Pyramid Flow's schedule and bookkeeping, in plain Python (no torch): what parameter models derive.

The stage boundaries and jump coefficients (:class:`PyramidSchedule`), the split of a batch into columns
(:func:`batch_columns`, :func:`unit_lengths`), the level of each history frame (:func:`history_levels`) and
the token layout of a sequence (:func:`sequence_layout`), and the exact compute of training and sampling
(:class:`ComputeCounter`). The formulas are those of :mod:`components.generative.pyramid` (its docstring
derives them), which holds the tensor code and re-exports every name here.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from torch import Tensor

__all__ = [
    "HISTORY_MODES",
    "ComputeCounter",
    "Cost",
    "PyramidSchedule",
    "batch_columns",
    "history_levels",
    "sequence_layout",
    "unit_lengths",
]


# --------------------------------------------------------------------------------------------------
# the schedule
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PyramidSchedule:
    """Stage boundaries (SD3 sigmas), corrected starts, the global time of each stage and the jump.

    ``n_stages = 1`` is plain rectified flow at full resolution: ``s_0 = 1, e_0 = 0, tau(t) = t``.
    """

    n_stages: int = 3
    gamma: float = 1.0 / 3.0
    _spans: tuple[tuple[float, float], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.n_stages, int) or self.n_stages < 1:
            raise ValueError(f"n_stages must be an int >= 1, got {self.n_stages!r}")
        if not 0 < self.gamma <= 1 / 3 + 1e-12:
            raise ValueError(
                f"gamma must lie in (0, 1/3] so that the block-noise covariance "
                f"(1 + gamma) I - gamma 11^T is positive semi-definite, got {self.gamma}"
            )
        lengths = [self.start_sigma(k) - self.end_sigma(k) for k in range(self.n_stages)]
        total, acc, spans = sum(lengths), 0.0, []
        for length in lengths:
            spans.append((acc / total, (acc + length) / total))
            acc += length
        spans[-1] = (spans[-1][0], 1.0)
        object.__setattr__(self, "_spans", tuple(spans))

    def original_start_sigma(self, stage: int) -> float:
        """Start sigma of ``stage`` before the correction: ``1 - stage / K``."""
        self._check(stage)
        return 1.0 - stage / self.n_stages

    def end_sigma(self, stage: int) -> float:
        """``e_k = 1 - (k + 1) / K``; exactly 0 for the last stage."""
        self._check(stage)
        return 0.0 if stage == self.n_stages - 1 else 1.0 - (stage + 1) / self.n_stages

    def start_sigma(self, stage: int) -> float:
        """Corrected start sigma ``s_k`` (1 for stage 0)."""
        if stage == 0:
            self._check(stage)
            return 1.0
        o = 1.0 - self.original_start_sigma(stage)
        return 1.0 - o / (math.sqrt(1.0 + 1.0 / self.gamma) * (1.0 - o) + o)

    def jump_coefficients(self, stage: int) -> tuple[float, float]:
        """``(alpha, beta)`` of the jump into ``stage`` (>= 1)."""
        if stage < 1:
            raise ValueError(f"a jump enters a stage >= 1, got {stage}")
        o = 1.0 - self.original_start_sigma(stage)
        alpha = 1.0 / (math.sqrt(1.0 + 1.0 / self.gamma) * (1.0 - o) + o)
        return alpha, alpha * (1.0 - o) / math.sqrt(self.gamma)

    def sigma(self, stage: int, t: float) -> float:
        """Noise level of ``stage`` at local time ``t``: ``(1 - t) s_k + t e_k`` (the signal coefficient is
        ``1 - sigma``, since the path mixes ``s_k n + (1 - s_k) ...`` and ``e_k n + (1 - e_k) ...``)."""
        return (1.0 - t) * self.start_sigma(stage) + t * self.end_sigma(stage)

    def unrenoised_entry_time(self, stage: int) -> float:
        """Local time of ``stage`` (>= 1) whose noise level is the previous stage's end sigma ``e_{k-1}``:
        ``(s_k - e_{k-1}) / (s_k - e_k)``. Upsampled without renoising, the end of stage k-1 has exactly
        that noise level and signal coefficient, so a sampler that skips the renoising enters stage k there
        (at its corrected start the stage expects more noise than the state carries)."""
        if stage < 1:
            raise ValueError(f"a jump enters a stage >= 1, got {stage}")
        s, e = self.start_sigma(stage), self.end_sigma(stage)
        return (s - self.end_sigma(stage - 1)) / (s - e)

    def time_span(self, stage: int) -> tuple[float, float]:
        """``(a_k, b_k)``: the part of the global time axis [0, 1] stage k covers, in proportion to the
        stage's length ``s_k - e_k`` (official ``timestep_ratios``)."""
        self._check(stage)
        return self._spans[stage]

    def global_time(self, stage: int, t: Tensor) -> Tensor:
        """Stage-local core time ``t [B]`` in [0, 1] -> the network's global time ``a_k + t (b_k - a_k)``."""
        a, b = self.time_span(stage)
        return a + t * (b - a)

    def level_size(self, full: int, stage: int) -> int:
        """Side of level ``stage``: ``full / 2^(K - 1 - stage)`` (must divide exactly)."""
        self._check(stage)
        factor = 2 ** (self.n_stages - 1 - stage)
        if full % factor:
            raise ValueError(f"size {full} is not divisible by 2^{self.n_stages - 1} for {self.n_stages} stages")
        return full // factor

    def _check(self, stage: int) -> None:
        if not 0 <= stage < self.n_stages:
            raise ValueError(f"stage must be in [0, {self.n_stages}), got {stage}")


# --------------------------------------------------------------------------------------------------
# batch columns: the samples and frames of each stage's column
# --------------------------------------------------------------------------------------------------
def batch_columns(batch_size: int, n_columns: int) -> list[int]:
    """Samples per batch column, coarse to fine: the batch split equally (official ``sample_ratios =
    [1, 1, 1]``), a remainder going to the finest columns. ``batch_columns(7, 3) == [2, 2, 3]``."""
    if n_columns < 1 or batch_size < n_columns:
        raise ValueError(f"a batch of {batch_size} cannot fill {n_columns} columns")
    extra = batch_size % n_columns
    return [batch_size // n_columns + (1 if c >= n_columns - extra else 0) for c in range(n_columns)]


def unit_lengths(step: int, n_frames: int, n_columns: int) -> list[int]:
    """Frames per training sample (history + the newest) of each batch column, coarse to fine.

    The finest column cycles through ``1..n_frames`` with the 1-based ``step``; the others take
    ``n_frames + 1 - that``, so long high-resolution sequences pair with short low-resolution ones and the
    token count per step stays even (the official ``sample_stage_length`` with one sync group).
    """
    high = 1 + (step - 1) % n_frames
    return [n_frames + 1 - high] * (n_columns - 1) + [high]


# --------------------------------------------------------------------------------------------------
# the temporal pyramid: the level of each history frame, the tokens of each frame
# --------------------------------------------------------------------------------------------------
HISTORY_MODES = ("compressed", "full")


def history_levels(n_history: int, stage: int, n_stages: int, mode: str = "compressed") -> list[int]:
    """Level of each history frame, oldest first. "compressed": lag d at ``max(stage - d + 1, 0)``;
    "full": every frame at full resolution (level ``n_stages - 1``)."""
    if mode not in HISTORY_MODES:
        raise ValueError(f"history mode must be one of {HISTORY_MODES}, got {mode!r}")
    if mode == "full":
        return [n_stages - 1] * n_history
    return [max(stage - lag + 1, 0) for lag in range(n_history, 0, -1)]


def sequence_layout(
    n_frames: int, stage: int, schedule: PyramidSchedule, full_size: int, patch: int, mode: str = "compressed"
) -> tuple[int, ...]:
    """Tokens of each frame in the model's input sequence for a frame generated at ``stage`` with
    ``n_frames - 1`` history frames (oldest first, the generated frame last)."""
    levels = history_levels(n_frames - 1, stage, schedule.n_stages, mode) + [stage]
    return tuple((schedule.level_size(full_size, level) // patch) ** 2 for level in levels)


# --------------------------------------------------------------------------------------------------
# compute: exact tokens and FLOPs of training and sampling
# --------------------------------------------------------------------------------------------------
class Cost(NamedTuple):
    """Tokens of every input sequence, tokens of the generated frames alone, and FLOPs."""

    tokens: int
    newest_tokens: int
    flops: int


@dataclass(frozen=True)
class ComputeCounter:
    """Exact compute of one unified model trained in ``column_sizes`` columns at ``column_stages``.

    ``forward_flops(layout)`` is the FLOP count of one forward pass for one sample whose sequence has
    ``layout[i]`` tokens in frame i (e.g. ``functools.partial(components.models.dit.forward_flops, cfg)``).
    A full-resolution model is a one-stage schedule with every column at stage 0.
    """

    schedule: PyramidSchedule
    full_size: int
    patch: int
    n_frames: int
    forward_flops: Callable[[Sequence[int]], int]
    column_sizes: tuple[int, ...]
    column_stages: tuple[int, ...]
    history: str = "compressed"
    flop_factor: int = 3
    _cycle: tuple[Cost, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.column_sizes) != len(self.column_stages):
            raise ValueError(f"{len(self.column_sizes)} column sizes for {len(self.column_stages)} column stages")
        # the cost of a step depends on the step only through unit_lengths, which repeats every n_frames
        object.__setattr__(self, "_cycle", tuple(self._step(s) for s in range(1, self.n_frames + 1)))

    def layout(self, n_frames: int, stage: int) -> tuple[int, ...]:
        return sequence_layout(n_frames, stage, self.schedule, self.full_size, self.patch, self.history)

    def _step(self, step: int) -> Cost:
        tokens = newest = flops = 0
        lengths = unit_lengths(step, self.n_frames, len(self.column_sizes))
        for size, stage, length in zip(self.column_sizes, self.column_stages, lengths, strict=True):
            layout = self.layout(length, stage)
            tokens += size * sum(layout)
            newest += size * layout[-1]
            flops += size * self.flop_factor * self.forward_flops(layout)
        return Cost(tokens, newest, flops)

    def step(self, step: int) -> Cost:
        """Cost of optimiser step ``step`` (1-based)."""
        if step < 1:
            raise ValueError(f"steps are 1-based, got {step}")
        return self._cycle[(step - 1) % self.n_frames]

    def total(self, steps: int) -> Cost:
        """Cost of steps ``1..steps``, summed."""
        if steps < 0:
            raise ValueError(f"steps must be >= 0, got {steps}")
        cycles, rest = divmod(steps, self.n_frames)
        return Cost(*(cycles * sum(column) + sum(column[:rest]) for column in zip(*self._cycle, strict=True)))

    def closest_step(self, flops: float, max_steps: int) -> int:
        """The step count in ``1..max_steps`` whose total training FLOPs are closest to ``flops`` (the
        smaller one on a tie): the matched-compute point of another model."""
        first_above = bisect.bisect_left(range(1, max_steps + 1), flops, key=lambda s: self.total(s).flops) + 1
        candidates = [s for s in (first_above - 1, first_above) if 1 <= s <= max_steps]
        return min(candidates, key=lambda s: (abs(self.total(s).flops - flops), s))

    def sampling_flops(
        self,
        steps_per_stage: Sequence[int],
        calls_per_step: int = 1,
        first_frame_steps: Sequence[int] | None = None,
        first_frame_calls: int | None = None,
    ) -> int:
        """Model FLOPs to generate one clip of ``n_frames`` frames: every frame, every stage, every Euler
        step, ``calls_per_step`` forwards per step (2 with classifier-free guidance). The first frame may
        take its own steps and calls (the paper samples it with more steps and a larger guidance)."""
        first = list(steps_per_stage if first_frame_steps is None else first_frame_steps)
        for steps in (steps_per_stage, first):
            if len(steps) != self.schedule.n_stages:
                raise ValueError(f"need one step count per stage ({self.schedule.n_stages}), got {list(steps)}")
        first_calls = calls_per_step if first_frame_calls is None else first_frame_calls

        def frame(length: int, steps: Sequence[int]) -> int:
            return sum(n * self.forward_flops(self.layout(length, stage)) for stage, n in enumerate(steps))

        later = sum(frame(length, steps_per_stage) for length in range(2, self.n_frames + 1))
        return frame(1, first) * first_calls + later * calls_per_step
