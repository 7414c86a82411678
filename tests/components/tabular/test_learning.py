"""The hypernetwork learns what MotherNet's claims need: after a short pretraining on the prior, the child it
writes in one forward pass classifies unseen tables (linearly separable Gaussian classes) well, while the
untrained hypernetwork's child does not; and the held-out cross-entropy on the prior falls below that of a
uniform guess. A regression to "never learns" fails here."""

from __future__ import annotations

import math

import numpy as np
import torch

from components.tabular.benchmark import roc_auc
from components.tabular.classifier import MotherNetClassifier
from components.tabular.mothernet import MotherNet, MotherNetConfig, prior_loss
from components.tabular.prior import PriorConfig, pool_batch, sample_pool
from components.training import TrainConfig, fit

CFG = MotherNetConfig(
    max_features=4, max_classes=2, emsize=32, layers=1, heads=2, ff=64, decoder_hidden=64, child_hidden=16, rank=4
)
PRIOR = PriorConfig(
    max_features=4, max_classes=2, min_train=32, max_train=48, n_test=32, generators=("classification",)
)


def _pretrained(steps: int) -> tuple[MotherNet, float]:
    pool = {k: torch.from_numpy(v) for k, v in sample_pool(PRIOR, 400, np.random.default_rng(0)).items()}
    model = MotherNet(CFG, seed=0)
    result = fit(
        model,
        prior_loss,
        lambda step, gen: pool_batch(pool, 8, 48, 48, gen),
        TrainConfig(steps=steps, lr=3e-3, warmup_steps=10, seed=0, device="cpu", progress=False, log_every=steps),
    )
    return model, result.final_loss


def _separable_auc(model: MotherNet, seed: int) -> float:
    rng = np.random.default_rng(seed)
    y = (np.arange(80) // 2) % 2  # both classes on both sides of the even/odd split
    x = rng.standard_normal((80, 3)) + 1.5 * y[:, None] * rng.choice([-1.0, 1.0], 3)
    clf = MotherNetClassifier(model).fit(x[::2], y[::2])
    return roc_auc(y[1::2], clf.predict_proba(x[1::2]))


def test_a_pretrained_hypernetwork_writes_children_that_classify_unseen_tables() -> None:
    model, loss = _pretrained(200)
    assert loss < 0.8 * math.log(2)  # below a uniform guess over 2 classes
    trained = [_separable_auc(model, seed) for seed in range(5)]
    untrained = [_separable_auc(MotherNet(CFG, seed=0), seed) for seed in range(5)]
    assert np.mean(trained) >= 0.9, trained
    assert np.mean(trained) - np.mean(untrained) >= 0.1, (trained, untrained)
