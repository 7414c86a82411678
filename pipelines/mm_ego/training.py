"""mm_ego's model wiring (one paper's helper, kept out of ``pipeline.py`` so that it reads like the method): the
video QA network of the params, built the same way for training and for loading trained weights."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor

from components.egovideo.mpp import EgoQAModel, MPPConfig, Vocab, make_loss
from components.egovideo.pretrain import CaptionTask, caption_accuracy, caption_loss, word_codes
from components.egovideo.synthetic import FrameConfig
from components.training import TrainConfig, TrainResult, fit
from paperflows import derive_seed
from pipelines.mm_ego.params import MmEgoParams


def qa_model(p: MmEgoParams, vocab: Vocab, seed: int) -> EgoQAModel:
    """The QA network (frame features of ``p.frames``, transformer of ``p.model``, ``k`` pointed frames) over
    ``vocab``, initialised from ``seed``."""
    m = p.model
    return EgoQAModel(
        MPPConfig(
            vocab_size=len(vocab.tokens),
            d_feat=p.frames.d_feat,
            patches=p.frames.patches,
            d_model=m.d_model,
            n_layers=m.n_layers,
            n_heads=m.n_heads,
            d_ff=m.d_ff,
            k=m.k,
        ),
        seed=seed,
    )


def frame_config(p: MmEgoParams) -> FrameConfig:
    """The frame features of ``p`` (the same codes and noise the narrations stage synthesises)."""
    f = p.frames
    return FrameConfig(
        d_feat=f.d_feat, patches=f.patches, noise=f.noise, pooled_detail=f.pooled_detail, seed=p.data.seed
    )


def pretrain_base(
    p: MmEgoParams, vocab: Vocab, progress: bool, callback: Callable | None
) -> tuple[EgoQAModel, list[dict[str, float]], float, int]:
    """The base network: the aligned initialisation (``pretrain.align``) and ``pretrain.steps`` of frame ->
    caption cloze questions over ``k`` frames; returns it with its training history, its caption accuracy on
    fresh samples and the number of aligned words."""
    pt = p.pretrain
    model = qa_model(p, vocab, pt.seed)
    cfg = frame_config(p)
    aligned = model.align_codes(vocab, word_codes(cfg), pt.align, derive_seed(pt.seed, "align")) if pt.align else 0
    history: list[dict[str, float]] = []
    if pt.steps:
        task = CaptionTask(vocab, cfg, p.model.k, pt.batch_size)
        train = TrainConfig(
            steps=pt.steps,
            lr=pt.lr,
            warmup_steps=min(30, pt.steps // 4),
            seed=pt.seed,
            log_every=max(1, pt.steps // 20),
            progress=progress,
            desc="mm_ego pretrain",
        )
        history = fit(model, caption_loss(), task.draw, train, callback=callback).history
    accuracy = caption_accuracy(model, CaptionTask(vocab, cfg, p.model.k, 64), derive_seed(pt.seed, "caption_eval"))
    return model, history, accuracy, aligned


def finetune(
    p: MmEgoParams,
    method: str,
    vocab: Vocab,
    seed: int,
    base: dict[str, Tensor] | None,
    sampler: Callable[..., Any],
    progress: bool,
    callback: Callable | None,
) -> tuple[EgoQAModel, TrainResult]:
    """One seed of ``method`` fine-tuned from the ``base`` weights (from its own initialisation without them)
    for ``train.steps`` on batches of ``sampler``."""
    t = p.train
    model = qa_model(p, vocab, seed)
    if base is not None:
        model.load_state_dict(base)
    cfg = TrainConfig(
        steps=t.steps,
        lr=t.lr,
        warmup_steps=t.warmup_steps,
        seed=seed,
        log_every=max(1, t.steps // 40),
        progress=progress,
        desc=f"mm_ego {method} seed {seed}",
    )
    loss = make_loss(method, t.pointer_weight, t.teacher_forcing, derive_seed(seed, "teacher_forcing"))
    return model, fit(model, loss, sampler, cfg, callback=callback)
