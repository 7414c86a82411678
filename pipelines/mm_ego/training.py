"""mm_ego's model wiring (one paper's helper, kept out of ``pipeline.py`` so that it reads like the method): the
video QA network of the params, built the same way for training and for loading trained weights."""

from __future__ import annotations

from components.egovideo.mpp import EgoQAModel, MPPConfig, Vocab
from components.egovideo.synthetic import FrameConfig
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
