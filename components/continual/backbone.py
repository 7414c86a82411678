"""Mammoth's ``MNISTMLP`` backbone: flattened input, ReLU hidden layers, a linear classifier.

seq-MNIST uses 784-100-100-10. Weights are Xavier-uniform (bound ``sqrt(6 / (fan_in + fan_out))``) and biases
zero, as mammoth initialises its MLP; ``seed`` makes the initialisation reproducible without touching the
global RNG.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

__all__ = ["MLPClassifier", "MLPClassifierConfig"]


@dataclass(frozen=True)
class MLPClassifierConfig:
    """in_features -> hidden[0] -> ... -> n_classes, ReLU between layers."""

    in_features: int = 784
    hidden: tuple[int, ...] = (100, 100)
    n_classes: int = 10

    def __post_init__(self) -> None:
        if self.in_features < 1 or self.n_classes < 2 or any(h < 1 for h in self.hidden):
            raise ValueError(f"MLPClassifierConfig needs positive sizes and >= 2 classes, got {self}")


class MLPClassifier(nn.Module):
    """``forward(x)``: x [N, ...] with ``in_features`` numbers per example -> logits [N, n_classes]."""

    def __init__(self, cfg: MLPClassifierConfig = MLPClassifierConfig(), seed: int | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        dims = [cfg.in_features, *cfg.hidden]
        layers: list[nn.Module] = []
        for a, b in itertools.pairwise(dims):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(dims[-1], cfg.n_classes)
        generator = torch.Generator().manual_seed(seed) if seed is not None else None
        with torch.no_grad():
            for module in self.modules():
                if isinstance(module, nn.Linear):
                    bound = math.sqrt(6.0 / (module.in_features + module.out_features))
                    module.weight.copy_(torch.rand(module.weight.shape, generator=generator) * 2 * bound - bound)
                    module.bias.zero_()

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x.reshape(x.shape[0], -1)))
