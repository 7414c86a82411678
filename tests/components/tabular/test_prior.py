"""The synthetic prior: shapes, label ranges, standardisation and padding, every generator, the pool."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from components.tabular.prior import (
    GENERATORS,
    PriorConfig,
    pad_features,
    pool_batch,
    sample_batch,
    sample_dataset,
    sample_pool,
    standardise,
)


@pytest.mark.parametrize("generator", GENERATORS)
def test_every_generator_draws_valid_datasets(generator: str) -> None:
    cfg = PriorConfig(max_features=6, max_classes=5, min_train=40, max_train=40, n_test=20, generators=(generator,))
    rng = np.random.default_rng(1)
    for _ in range(8):
        x_train, y_train, x_test, y_test, k = sample_dataset(cfg, 40, rng)
        assert x_train.shape == (40, 6) and x_test.shape == (20, 6) and x_train.dtype == np.float32
        assert 2 <= k <= 5 and set(np.unique(y_train)) == set(range(k))  # every class among the training rows
        assert y_test.min() >= 0 and y_test.max() < k
        used = np.flatnonzero(np.abs(x_train).sum(axis=0) > 0)
        d = len(used)
        assert 1 <= d <= 6 and list(used) == list(range(d))  # real features first, then zero padding
        assert np.all(x_test[:, d:] == 0)
        # standardised training columns, scaled by sqrt(F / d) for the padding
        np.testing.assert_allclose(x_train[:, :d].mean(axis=0), 0, atol=1e-4)
        np.testing.assert_allclose(x_train[:, :d].std(axis=0), np.sqrt(6 / d), rtol=1e-3)


def test_batch_shapes_and_shared_row_count() -> None:
    cfg = PriorConfig(max_features=10, max_classes=4, min_train=30, max_train=50, n_test=16)
    batch = sample_batch(cfg, 5, np.random.default_rng(0))
    n = batch["x_train"].shape[1]
    assert 30 <= n <= 50 and batch["x_train"].shape == (5, n, 10) and batch["y_train"].shape == (5, n)
    assert batch["x_test"].shape == (5, 16, 10) and batch["y_test"].shape == (5, 16)
    assert np.all((batch["n_classes"] >= 2) & (batch["n_classes"] <= 4))
    assert np.all(batch["y_test"] < batch["n_classes"][:, None])


def test_same_seed_same_data_and_pool_batches() -> None:
    cfg = PriorConfig(max_features=5, max_classes=3, min_train=20, max_train=24, n_test=8)
    a, b = sample_pool(cfg, 6, np.random.default_rng(3)), sample_pool(cfg, 6, np.random.default_rng(3))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert a["x"].shape == (6, 32, 5) and a["y"].shape == (6, 32) and a["n_classes"].shape == (6,)
    pool = {k: torch.from_numpy(v) for k, v in a.items()}
    batch = pool_batch(pool, 4, 20, 24, torch.Generator().manual_seed(0))
    assert batch["x_train"].shape == (4, 20, 5) and batch["x_test"].shape == (4, 8, 5)
    assert torch.all(batch["y_test"] < batch["n_classes"][:, None])


def test_standardise_and_pad_known_answers() -> None:
    train, test = standardise(np.array([[1.0, 5.0], [3.0, 5.0]]), np.array([[2.0, 6.0]]))
    np.testing.assert_allclose(train, [[-1, 0], [1, 0]])  # constant column: std taken as 1
    np.testing.assert_allclose(test, [[0, 1]])
    padded = pad_features(np.array([[1.0, -1.0]]), 8)
    np.testing.assert_allclose(padded, [[2, -2, 0, 0, 0, 0, 0, 0]])  # sqrt(8 / 2) = 2
    with pytest.raises(ValueError, match="exceed"):
        pad_features(np.zeros((1, 9)), 8)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"min_features": 0}, "min_features"),
        ({"max_classes": 1}, "max_classes"),
        ({"min_train": 10, "max_train": 5}, "min_train"),
        ({"generators": ("gp",)}, "generators"),
    ],
)
def test_bad_config_names_the_field(change: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PriorConfig(**change)
