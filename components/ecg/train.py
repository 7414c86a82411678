"""Training of VQ-HBR and of the masked ECG-sentence model through the shared loop (`components.training.fit`).

Masks are drawn per batch from the loop's generator, so a resumed run draws the same masks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from components.ecg.models import (
    VQHBR,
    MaskedConfig,
    MaskedSentenceModel,
    VQHBRConfig,
    masked_loss,
    random_mask,
    vqhbr_loss,
)
from components.ecg.tokenizer import Sentences
from components.training import TrainConfig, TrainResult, fit
from components.training.batches import random_batches


@dataclass(frozen=True)
class Schedule:
    steps: int = 200
    batch: int = 32
    lr: float = 1e-3
    warmup_steps: int = 20
    weight_decay: float = 1e-4
    grad_clip: float = 3.0


def _tensors(s: Sentences) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (
        torch.from_numpy(s.data),
        torch.from_numpy(s.in_chans.astype("int64")),
        torch.from_numpy(s.in_times.astype("int64")),
    )


def _config(sch: Schedule, seed: int, desc: str, progress: bool) -> TrainConfig:
    return TrainConfig(
        steps=sch.steps,
        lr=sch.lr,
        weight_decay=sch.weight_decay,
        grad_clip=sch.grad_clip,
        seed=seed,
        warmup_steps=min(sch.warmup_steps, sch.steps),
        log_every=max(1, sch.steps // 20),
        progress=progress,
        desc=desc,
    )


def train_vqhbr(
    sentences: Sentences,
    cfg: VQHBRConfig,
    sch: Schedule,
    *,
    seed: int,
    desc: str = "vqhbr",
    callback: Callable[[int, dict[str, float]], None] | None = None,
    progress: bool = False,
) -> tuple[VQHBR, TrainResult]:
    torch.manual_seed(seed)
    model = VQHBR(cfg)
    result = fit(
        model,
        vqhbr_loss,
        random_batches(*_tensors(sentences), size=sch.batch),
        _config(sch, seed, desc, progress),
        callback=callback,
    )
    return model.eval(), result


def train_masked(
    sentences: Sentences,
    codes: torch.Tensor,
    cfg: MaskedConfig,
    sch: Schedule,
    *,
    seed: int,
    desc: str = "pretrain",
    callback: Callable[[int, dict[str, float]], None] | None = None,
    progress: bool = False,
) -> tuple[MaskedSentenceModel, TrainResult]:
    """Masked pretraining on ``sentences`` with target ``codes`` (N, L) from a frozen VQ-HBR."""
    torch.manual_seed(seed)
    model = MaskedSentenceModel(cfg)
    draw = random_batches(*_tensors(sentences), codes.long(), size=sch.batch)

    def batches(step: int, generator: torch.Generator):
        data, chans, times, target = draw(step, generator)
        return data, chans, times, target, random_mask(chans, cfg.mask_ratio, generator)

    result = fit(model, masked_loss, batches, _config(sch, seed, desc, progress), callback=callback)
    return model.eval(), result


def random_init(cfg: MaskedConfig, seed: int) -> MaskedSentenceModel:
    """The same model at its (seeded) random initialisation: the probe's control."""
    torch.manual_seed(seed)
    return MaskedSentenceModel(cfg).eval()
