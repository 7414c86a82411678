"""EfficientNet-Lite0 loaded offline: known ImageNet predictions on scikit-learn's two bundled photos."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from components.models.efficientnet_lite import (
    FEATURE_DIM,
    efficientnet_lite0,
    image_features,
    imagenet_logits,
    preprocess,
)

DAISY, BELL_COTE = 985, 442  # ImageNet-1k class indices


@pytest.fixture(scope="module")
def photos() -> torch.Tensor:
    from sklearn.datasets import load_sample_images

    images = np.stack(load_sample_images().images)  # china.jpg, flower.jpg: [2, 427, 640, 3] uint8
    return torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255.0


def test_pretrained_weights_give_the_known_classes(photos: torch.Tensor) -> None:
    model = efficientnet_lite0()
    logits = imagenet_logits(model, photos, resolution=224)
    assert logits.shape == (2, 1000)
    assert logits.argmax(1).tolist() == [BELL_COTE, DAISY]  # the temple roof, the daisy
    assert float(logits.softmax(1)[1, DAISY]) > 0.1
    feats = image_features(model, photos, resolution=224)
    assert feats.shape == (2, FEATURE_DIM) and torch.isfinite(feats).all()


def test_preprocess_scales_to_minus_one_one_and_repeats_grey() -> None:
    grey = torch.tensor([[[0.0, 1.0], [0.5, 0.5]]])
    x = preprocess(grey, 2)
    assert x.shape == (1, 3, 2, 2)
    assert torch.equal(x[0, 0], torch.tensor([[-1.0, 1.0], [0.0, 0.0]])) and torch.equal(x[0, 0], x[0, 2])
    with pytest.raises(ValueError, match="expected"):
        preprocess(torch.zeros(2, 2, 4, 4), 4)


def test_random_encoder_is_frozen_and_gives_1280_features() -> None:
    model = efficientnet_lite0(pretrained=False)
    assert not any(p.requires_grad for p in model.parameters()) and not model.training
    assert image_features(model, torch.rand(3, 28, 28), resolution=32, batch_size=2).shape == (3, FEATURE_DIM)
