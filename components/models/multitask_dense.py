"""MTSAM's multi-task dense model on a frozen ViT: the encoder's last blocks, task-specific no-mask
embeddings and one mask decoder per task; the task losses and their weighting.

    h      = encoder.hidden(x, start)              frozen prefix, computed once (a cache)
    tokens = norm(blocks[start:](h))[:, 1:]        the adapted tail: ToRA / LoRA / full fine-tuning act here
    y_t    = up(decoder_t(tokens, E[slice_t]))     E: nn.Embedding(sum_t C_t, dim), task t reads rows slice_t;
                                                   up: bilinear to the label size (SAM's post-processing)

Losses (official ``model_fit``), with task weights w = [1, 1, 4] for seg / depth / normal:

    seg     NLL of log_softmax(y_seg) against the label, pixels labelled -1 ignored
    depth   mean |y_depth - gt| over pixels with gt != 0
    normal  1 - mean <y_normal / ||y_normal||, gt> over pixels with gt != 0 (any component)
    total   sum_t w_t L_t / sum_t w_t

With ToRA (``components.models.tora``) the multi-task forward runs the tail once on the batch repeated T
times, task-major, and task t's decoder reads rows [t B, (t + 1) B) of its output (:func:`predict`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from components.models.pretrained_vit import ViTS14
from components.models.sam_decoder import DecoderConfig, MaskDecoder
from components.models.tora import MULTI_TASK, tora_tensors, use_task

TASKS = ("seg", "depth", "normal")
TASK_WEIGHTS = {"seg": 1.0, "depth": 1.0, "normal": 4.0}  # the official run's weights [1, 1, 4]


@dataclass(frozen=True)
class DenseConfig:
    """Shape of the dense model: classes of the seg task, the decoder, the output size and the first adapted
    block (blocks [start, n_layers) of the encoder are part of the model; the ones before are frozen)."""

    n_classes: int
    out_size: tuple[int, int]
    start: int
    decoder: DecoderConfig = DecoderConfig()

    def channels(self, task: str) -> int:
        return {"seg": self.n_classes, "depth": 1, "normal": 3}[task]


class MultiTaskDense(nn.Module):
    """The encoder tail (copies of ``encoder.blocks[start:]`` and ``encoder.norm``), the no-mask embeddings
    and one :class:`MaskDecoder` per task of ``TASKS``. Decoder weights come from ``seed`` alone."""

    def __init__(self, encoder: ViTS14, cfg: DenseConfig, seed: int = 0) -> None:
        super().__init__()
        if not 0 <= cfg.start < len(encoder.blocks):
            raise ValueError(f"start must be in [0, {len(encoder.blocks)}), got {cfg.start}")
        self.cfg = cfg
        self.blocks = copy.deepcopy(encoder.blocks[cfg.start :])
        self.norm = copy.deepcopy(encoder.norm)
        width = encoder.cfg.d_model
        self.slices: dict[str, slice] = {}
        start = 0
        for task in TASKS:
            self.slices[task] = slice(start, start + cfg.channels(task))
            start += cfg.channels(task)
        generator = torch.Generator().manual_seed(seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.no_mask_embed = nn.Embedding(start, cfg.decoder.dim)
            self.decoders = nn.ModuleDict({t: MaskDecoder(width, cfg.decoder, generator) for t in TASKS})

    def tokens(self, h: Tensor) -> Tensor:
        """Prefix tokens [B, 1 + N, d] -> normalised patch tokens [B, N, d] after the tail."""
        for block in self.blocks:
            h = block(h)
        return self.norm(h)[:, 1:]

    def decode(self, tokens: Tensor, task: str) -> Tensor:
        """Patch tokens -> task prediction [B, C_task, *out_size] (raw: logits, depth, unnormalised normal)."""
        out = self.decoders[task](tokens, self.no_mask_embed.weight[self.slices[task]])
        return F.interpolate(out, size=self.cfg.out_size, mode="bilinear", align_corners=False)

    def task_parameters(self, task: str) -> int:
        """Numbers the task's own decoder and no-mask rows hold."""
        return sum(p.numel() for p in self.decoders[task].parameters()) + self.cfg.channels(task) * self.cfg.decoder.dim

    def tail_norm_parameters(self) -> list[nn.Parameter]:
        """The LayerNorm weights and biases of the tail (MTSAM trains every norm of the encoder)."""
        return [p for name, p in self.blocks.named_parameters() if ".norm" in f".{name}"] + list(self.norm.parameters())


def base_model(model: nn.Module) -> MultiTaskDense:
    """The MultiTaskDense inside a peft wrapper (or the model itself)."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    if not isinstance(inner, MultiTaskDense):
        raise TypeError(f"expected a MultiTaskDense (possibly peft-wrapped), got {type(inner).__name__}")
    return inner


def predict(model: nn.Module, h: Tensor, tasks: Sequence[str]) -> dict[str, Tensor]:
    """Raw predictions {task: [B, C_task, *out_size]} from prefix tokens ``h`` [B, 1 + N, d].

    A model with ToRA layers runs its tail once on ``h`` repeated for each of its tasks (task-major; the
    multi-task forward, all of ``TASKS`` in order); any other model runs the tail once and every decoder
    reads the same tokens.
    """
    inner = base_model(model)
    if tora_tensors(inner):
        n = tora_tensors(inner)[0].n_tasks
        if n != len(TASKS):
            raise ValueError(f"the ToRA layers have {n} tasks, the model {len(TASKS)}")
        with use_task(inner, MULTI_TASK):
            tokens = inner.tokens(h.repeat(n, 1, 1)).chunk(n)
        return {t: inner.decode(tokens[TASKS.index(t)], t) for t in tasks}
    tokens = inner.tokens(h)
    return {t: inner.decode(tokens, t) for t in tasks}


def valid_mask(target: Tensor) -> Tensor:
    """[B, H, W] True where a depth [B, 1, H, W] or normal [B, 3, H, W] target is present (any channel != 0)."""
    return (target != 0).any(dim=1)


def normalise(normal: Tensor, eps: float = 1e-12) -> Tensor:
    """Unit vectors along dim 1 (a zero vector stays zero)."""
    return normal / normal.norm(dim=1, keepdim=True).clamp_min(eps)


def seg_loss(logits: Tensor, label: Tensor) -> Tensor:
    """NLL of log_softmax(logits) [B, C, H, W] against label [B, H, W] (long), -1 ignored."""
    return F.nll_loss(F.log_softmax(logits, dim=1), label, ignore_index=-1)


def depth_loss(pred: Tensor, depth: Tensor) -> Tensor:
    """Mean |pred - depth| over pixels with depth != 0 (pred, depth: [B, 1, H, W])."""
    mask = valid_mask(depth)
    return (pred - depth).abs()[:, 0][mask].sum() / mask.sum().clamp_min(1)


def normal_loss(pred: Tensor, normal: Tensor) -> Tensor:
    """1 - mean cosine between normalised pred and the target over pixels with a target (both [B, 3, H, W])."""
    mask = valid_mask(normal)
    return 1 - (normalise(pred) * normal).sum(dim=1)[mask].sum() / mask.sum().clamp_min(1)


TASK_LOSSES = {"seg": seg_loss, "depth": depth_loss, "normal": normal_loss}


def task_losses(preds: dict[str, Tensor], targets: dict[str, Tensor]) -> dict[str, Tensor]:
    """{task: L_task} for every task predicted."""
    return {t: TASK_LOSSES[t](p, targets[t]) for t, p in preds.items()}


def weighted_loss(losses: dict[str, Tensor], weights: dict[str, float] = TASK_WEIGHTS) -> Tensor:
    """sum_t w_t L_t / sum_t w_t over the tasks in ``losses``."""
    total = sum(weights[t] for t in losses)
    return sum(weights[t] * loss for t, loss in losses.items()) / total


__all__ = [
    "DenseConfig",
    "MultiTaskDense",
    "TASKS",
    "TASK_LOSSES",
    "TASK_WEIGHTS",
    "base_model",
    "depth_loss",
    "normal_loss",
    "normalise",
    "predict",
    "seg_loss",
    "task_losses",
    "valid_mask",
    "weighted_loss",
]
