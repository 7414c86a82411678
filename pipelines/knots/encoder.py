"""KnOTS's encoder (the small ViT pretrained on held-out classes, or the ViT-S/14), on its own: what the params
check builds on the meta device to check a user's adapters against, without the training and merging code."""

from __future__ import annotations

from torch import nn

from components.models.pretrained_vit import ViTS14, ViTS14Config
from components.models.vit import TinyViT, TinyViTConfig
from pipelines.knots.params import KnotsParams

IMAGE_SIZE = 28


def make_encoder(p: KnotsParams) -> nn.Module:
    """The encoder of ``base.encoder`` with its initial weights."""
    if p.base.encoder == "vit_s14":
        return ViTS14(ViTS14Config(input_size=p.base.input_size))
    return TinyViT(
        TinyViTConfig(
            image_size=IMAGE_SIZE,
            patch_size=7,
            d_model=p.base.d_model,
            n_heads=p.base.n_heads,
            n_layers=p.base.n_layers,
            n_classes=len(p.data.tasks) * (10 - p.data.task_classes),
        ),
        seed=p.base.seed,
    )
