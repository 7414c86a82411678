"""Moving-MNIST clips synthesised from digit images, seeded (Srivastava et al. 2015, reduced).

A clip is ``n_frames`` frames of ``canvas x canvas`` pixels. Each of its ``n_digits`` digits is a source
image resized to ``digit_size x digit_size`` (area averaging), placed at an integer position drawn
uniformly in ``[0, canvas - digit_size]^2`` and moved by an integer velocity ``v in {-speed..speed}^2 \\ {0}``
per frame; a coordinate that would leave the canvas bounces (its velocity component flips sign):

    p_{f+1} = p_f + v_f,   v_{f+1} = v_f with every component whose step leaves [0, canvas - digit_size]
    reflected before the step.

Digits are composited with a pixel-wise max, so values stay in [0, 1]. Everything random (which
digits, positions, velocities) comes from one ``torch.Generator`` seeded with ``seed``: the same
arguments always give the same clips.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["MovingMnist", "MovingMnistConfig", "moving_mnist", "resize_digits"]


@dataclass(frozen=True)
class MovingMnistConfig:
    """Geometry of the clips. Defaults: the Pyramid Flow CPU reduction (4 frames of 16x16, one digit)."""

    canvas: int = 16
    digit_size: int = 12
    n_frames: int = 4
    n_digits: int = 1
    speed: int = 1

    def __post_init__(self) -> None:
        checks = [
            ("canvas", self.canvas >= 2),
            ("digit_size", 1 <= self.digit_size <= self.canvas),
            ("n_frames", self.n_frames >= 1),
            ("n_digits", self.n_digits >= 1),
            ("speed", self.speed >= 1),
        ]
        for name, ok in checks:
            if not ok:
                raise ValueError(
                    f"MovingMnistConfig.{name} is invalid: {getattr(self, name)!r} "
                    f"(need canvas >= 2, 1 <= digit_size <= canvas, n_frames, n_digits, speed >= 1)"
                )
        if self.speed > self.canvas - self.digit_size and self.n_frames > 1:
            raise ValueError(
                f"MovingMnistConfig.speed {self.speed} exceeds the free range "
                f"canvas - digit_size = {self.canvas - self.digit_size}; digits could not move"
            )


@dataclass(frozen=True)
class MovingMnist:
    """Clips and what made them.

    Attributes:
        clips: ``[N, n_frames, canvas, canvas]`` float32 in [0, 1].
        labels: ``[N, n_digits]`` int64 class of each digit.
        positions: ``[N, n_digits, n_frames, 2]`` int64 top-left ``(row, col)`` of each digit per frame.
        sources: ``[N, n_digits]`` int64 index of each digit in the source image set.
    """

    clips: Tensor
    labels: Tensor
    positions: Tensor
    sources: Tensor


def resize_digits(images: Tensor, size: int) -> Tensor:
    """``[N, H, W]`` images -> ``[N, size, size]`` by area averaging (antialiased for downscaling)."""
    if images.ndim != 3:
        raise ValueError(f"digit images must be [N, H, W], got {tuple(images.shape)}")
    if images.shape[-1] == size and images.shape[-2] == size:
        return images.clone()
    out = F.interpolate(images[:, None].float(), size=(size, size), mode="area")
    return out[:, 0].clamp(0, 1)


def _trajectories(n: int, cfg: MovingMnistConfig, gen: torch.Generator) -> Tensor:
    """``[n, n_frames, 2]`` bouncing integer positions."""
    free = cfg.canvas - cfg.digit_size
    pos = torch.randint(0, free + 1, (n, 2), generator=gen)
    choices = torch.tensor(
        [
            (dy, dx)
            for dy in range(-cfg.speed, cfg.speed + 1)
            for dx in range(-cfg.speed, cfg.speed + 1)
            if (dy, dx) != (0, 0)
        ]
    )
    vel = choices[torch.randint(0, len(choices), (n,), generator=gen)]
    if free == 0:
        vel = torch.zeros_like(vel)
    frames = [pos]
    for _ in range(cfg.n_frames - 1):
        nxt = pos + vel
        vel = torch.where((nxt < 0) | (nxt > free), -vel, vel)
        pos = pos + vel
        frames.append(pos)
    return torch.stack(frames, dim=1)


def moving_mnist(
    images: Tensor, labels: Tensor, n_clips: int, cfg: MovingMnistConfig = MovingMnistConfig(), seed: int = 0
) -> MovingMnist:
    """Synthesise ``n_clips`` Moving-MNIST clips from ``images [M, H, W]`` in [0, 1] with ``labels [M]``.

    Returns a :class:`MovingMnist` (clips ``[n_clips, n_frames, canvas, canvas]``).
    """
    if images.ndim != 3 or labels.shape != (images.shape[0],):
        raise ValueError(
            f"images must be [M, H, W] with labels [M], got {tuple(images.shape)} and {tuple(labels.shape)}"
        )
    if images.shape[0] == 0 or n_clips < 1:
        raise ValueError(f"need at least one source image and one clip, got {images.shape[0]} and {n_clips}")
    gen = torch.Generator().manual_seed(seed)
    sources = torch.randint(0, images.shape[0], (n_clips, cfg.n_digits), generator=gen)
    digits = resize_digits(images[sources.flatten()], cfg.digit_size).view(
        n_clips, cfg.n_digits, cfg.digit_size, cfg.digit_size
    )
    positions = _trajectories(n_clips * cfg.n_digits, cfg, gen).view(n_clips, cfg.n_digits, cfg.n_frames, 2)
    clips = torch.zeros(n_clips, cfg.n_frames, cfg.canvas, cfg.canvas)
    # scatter every digit into a padded canvas by index arithmetic (no python loop over clips)
    rows = torch.arange(cfg.digit_size)
    for d in range(cfg.n_digits):
        for f in range(cfg.n_frames):
            r = positions[:, d, f, 0, None] + rows  # [N, s]
            c = positions[:, d, f, 1, None] + rows
            layer = torch.zeros(n_clips, cfg.canvas, cfg.canvas)
            idx_r = r[:, :, None].expand(-1, -1, cfg.digit_size)
            idx_c = c[:, None, :].expand(-1, cfg.digit_size, -1)
            batch = torch.arange(n_clips)[:, None, None].expand_as(idx_r)
            layer[batch, idx_r, idx_c] = digits[:, d]
            clips[:, f] = torch.maximum(clips[:, f], layer)
    return MovingMnist(clips=clips, labels=labels[sources], positions=positions, sources=sources)
