"""The shape of :class:`components.models.dit.TinyDiT` and its FLOP accounting, without torch.

:func:`forward_flops` counts the multiply-adds (x2) of one forward pass; training costs
``TRAIN_FLOP_FACTOR = 3`` forwards (backward ~ 2 forwards, the usual convention). Parameter models use both
to derive each method's compute while validating; the network itself lives in :mod:`components.models.dit`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["TRAIN_FLOP_FACTOR", "DiTConfig", "forward_flops"]

TRAIN_FLOP_FACTOR = 3


@dataclass(frozen=True)
class DiTConfig:
    """Shape of the model. The defaults are test-sized (16x16 frames, patch 2, d = 64, 3 blocks); a pipeline
    sets its own sizes from its parameters."""

    frame_size: int = 16
    channels: int = 1
    patch_size: int = 2
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 3
    mlp_ratio: int = 4
    max_frames: int = 4
    n_stages: int = 3
    n_classes: int = 10  # 0: unconditional; else labels 0..n_classes-1 and n_classes = "no label"
    causal: bool = True

    def __post_init__(self) -> None:
        if self.frame_size % self.patch_size:
            raise ValueError(f"frame_size {self.frame_size} is not a multiple of patch_size {self.patch_size}")
        if self.d_model % self.n_heads or self.d_model % 2:
            raise ValueError(f"d_model {self.d_model} must be even and divisible by n_heads {self.n_heads}")
        if min(self.channels, self.max_frames, self.n_stages, self.n_layers, self.mlp_ratio) < 1 or self.n_classes < 0:
            raise ValueError(f"invalid DiTConfig {self}")

    @property
    def grid(self) -> int:
        return self.frame_size // self.patch_size


def forward_flops(cfg: DiTConfig, frame_tokens: Sequence[int]) -> int:
    """FLOPs (2 x multiply-adds of every matmul) of one forward pass for ONE sample whose input sequence
    has ``frame_tokens[i]`` tokens in frame i (the generated frame last).

    Counted: patch embedding ``2 L (C p^2) d``; per block qkv ``6 L d^2``, scores and weighted values
    ``4 L^2 d`` (the full L x L product; the causal mask does not skip work), projection ``2 L d^2``,
    MLP ``4 r L d^2``, adaLN ``12 d^2``; the time MLP ``4 d^2``; the final adaLN ``4 d^2`` and output
    ``2 L_last d (C p^2)``. Norms, softmax and activations are not counted (elementwise).
    """
    if not frame_tokens or any(n < 1 for n in frame_tokens):
        raise ValueError(f"frame_tokens must be positive counts, got {list(frame_tokens)}")
    d, r, io = cfg.d_model, cfg.mlp_ratio, cfg.channels * cfg.patch_size**2
    length, last = sum(frame_tokens), frame_tokens[-1]
    per_block = 6 * length * d * d + 4 * length * length * d + 2 * length * d * d + 4 * r * length * d * d + 12 * d * d
    return 2 * length * io * d + cfg.n_layers * per_block + 4 * d * d + 4 * d * d + 2 * last * d * io
