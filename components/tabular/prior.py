"""The synthetic prior MotherNet is trained on: many small classification datasets, each drawn afresh.

The paper trains on a "prior bag" of MLP-SCM and GP priors (TabPFN's); this is the CPU-scale reduction.
Every dataset draws its own number of features ``d`` (``min_features..max_features``), classes ``k``
(``2..max_classes``) and generator, one of :data:`GENERATORS`:

* ``"classification"``: sklearn's ``make_classification`` with random informative/redundant counts,
  ``class_sep``, ``flip_y`` and clusters per class (Gaussian clusters on hypercube vertices);
* ``"mlp"``: a random 2-layer MLP labeller (tanh or ReLU) of Gaussian or uniform inputs; the class is the
  rank of its scalar output among ``k - 1`` random quantile thresholds (the paper's "rank" classes);
* ``"scm"``: a random structural causal model built from an MLP: Gaussian causes propagate through random
  layers with noise; ``d`` feature nodes and one target node are picked among all the layers' units, and the
  target is cut into ``k`` classes by quantile thresholds as above.

Each dataset is then standardised with the mean and std of its training rows (as inference does), clipped to
±100, zero-padded to ``max_features`` columns and scaled by ``sqrt(max_features / d)`` so that the padded
rows keep the norm of ``d`` standardised features. Its class labels are randomly permuted. A batch holds
``batch`` datasets sharing ``n_train`` and ``n_test`` (drawn once per batch), so they stack to tensors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GENERATORS = ("classification", "mlp", "scm")


@dataclass(frozen=True)
class PriorConfig:
    """Shape of the synthetic datasets.

    Attributes:
        max_features: padded width F; each dataset has ``min_features..F`` real features.
        min_features: fewest real features per dataset.
        max_classes: most classes per dataset (at least 2).
        min_train, max_train: range of the number of training rows (drawn once per batch).
        n_test: held-out rows per dataset (the loss is taken on them).
        generators: the generators drawn from, uniformly.
    """

    max_features: int = 10
    min_features: int = 2
    max_classes: int = 10
    min_train: int = 64
    max_train: int = 128
    n_test: int = 64
    generators: tuple[str, ...] = GENERATORS

    def __post_init__(self) -> None:
        if not 1 <= self.min_features <= self.max_features:
            raise ValueError(f"need 1 <= min_features <= max_features, got {self.min_features}, {self.max_features}")
        if self.max_classes < 2:
            raise ValueError(f"max_classes must be >= 2, got {self.max_classes}")
        if not 2 <= self.min_train <= self.max_train:
            raise ValueError(f"need 2 <= min_train <= max_train, got {self.min_train}, {self.max_train}")
        if self.n_test < 1:
            raise ValueError(f"n_test must be >= 1, got {self.n_test}")
        unknown = set(self.generators) - set(GENERATORS)
        if not self.generators or unknown:
            raise ValueError(f"generators must be a non-empty subset of {GENERATORS}, got {self.generators}")


def _rank_classes(score: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Cut a continuous score into ``k`` classes at random quantiles (each class keeps >= 5% of the rows)."""
    cuts = np.sort(rng.uniform(0.05, 0.95, size=k - 1))
    while k > 2 and np.min(np.diff(np.r_[0.0, cuts, 1.0])) < 0.5 / k:  # no near-empty class
        cuts = np.sort(rng.uniform(0.05, 0.95, size=k - 1))
    return np.searchsorted(np.quantile(score, cuts), score, side="right").astype(np.int64)


def _classification(n: int, d: int, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_classification

    if k > 2**d:  # make_classification needs a hypercube vertex per class: too few features for k classes
        return _mlp(n, d, k, rng)
    informative = int(rng.integers(int(np.ceil(np.log2(k))), d + 1)) if k > 2 else int(rng.integers(1, d + 1))
    clusters = int(rng.integers(1, 3))
    if k * clusters > 2**informative:
        clusters = 1
    redundant = int(rng.integers(0, d - informative + 1))
    x, y = make_classification(
        n_samples=n,
        n_features=d,
        n_informative=informative,
        n_redundant=redundant,
        n_repeated=0,
        n_classes=k,
        n_clusters_per_class=clusters,
        class_sep=float(rng.uniform(0.3, 2.0)),
        flip_y=float(rng.uniform(0.0, 0.1)),
        shuffle=True,
        random_state=int(rng.integers(2**31)),
    )
    return x, y.astype(np.int64)


def _inputs(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    return rng.standard_normal((n, d)) if rng.random() < 0.5 else rng.uniform(-1.7, 1.7, (n, d))


def _mlp(n: int, d: int, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    x = _inputs(n, d, rng)
    width = int(rng.integers(8, 33))
    act = np.tanh if rng.random() < 0.5 else (lambda z: np.maximum(z, 0.0))
    h = act(x @ rng.standard_normal((d, width)) * rng.uniform(0.5, 2.0) / np.sqrt(d) + rng.standard_normal(width))
    score = h @ rng.standard_normal(width) + rng.uniform(0.0, 0.3) * rng.standard_normal(n) * h.std()
    return x, _rank_classes(score, k, rng)


def _scm(n: int, d: int, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    layers, width = int(rng.integers(2, 4)), int(rng.integers(max(d + 1, 6), max(d + 1, 6) + 12))
    act = np.tanh if rng.random() < 0.5 else (lambda z: np.maximum(z, 0.0) - 0.5)
    noise = rng.uniform(0.01, 0.3)
    h = rng.standard_normal((n, width))
    units = []
    for _ in range(layers):
        w = rng.standard_normal((width, width)) / np.sqrt(width) * (rng.random((width, width)) < 0.5)
        h = act(h @ w * 1.5 + noise * rng.standard_normal((n, width)))
        units.append(h)
    nodes = np.concatenate(units, axis=1)
    nodes = nodes[:, nodes.std(axis=0) > 1e-6]
    if nodes.shape[1] < d + 1:  # degenerate draw (units without variance): fall back to the MLP labeller
        return _mlp(n, d, k, rng)
    chosen = rng.choice(nodes.shape[1], size=d + 1, replace=False)
    return nodes[:, chosen[1:]], _rank_classes(nodes[:, chosen[0]], k, rng)


_DRAW = {"classification": _classification, "mlp": _mlp, "scm": _scm}


def pad_features(x: np.ndarray, width: int) -> np.ndarray:
    """Zero-pad ``(n, d)`` standardised features to ``(n, width)``, scaled by ``sqrt(width / d)``."""
    n, d = x.shape
    if d > width:
        raise ValueError(f"{d} features exceed the padded width {width}")
    out = np.zeros((n, width), dtype=np.float32)
    out[:, :d] = x * np.sqrt(width / d)
    return out


def standardise(train: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    """Standardise with the training rows' mean and std (std 0 -> 1), then clip to ±100."""
    mean, std = train.mean(axis=0), train.std(axis=0)
    std = np.where(std > 1e-12, std, 1.0)
    return [np.clip((a - mean) / std, -100.0, 100.0) for a in (train, *others)]


def sample_dataset(
    cfg: PriorConfig, n_train: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """One synthetic dataset: ``(x_train (n_train, F), y_train, x_test (n_test, F), y_test, k)``; float32
    features, int64 labels in ``0..k-1`` with every class present among the training rows."""
    n = n_train + cfg.n_test
    for _ in range(20):
        d = int(rng.integers(cfg.min_features, cfg.max_features + 1))
        k = int(rng.integers(2, cfg.max_classes + 1))
        kind = cfg.generators[int(rng.integers(len(cfg.generators)))]
        x, y = _DRAW[kind](n, d, k, rng)
        y = rng.permutation(k)[y]
        if len(np.unique(y[:n_train])) == k:
            break
    else:
        raise RuntimeError("could not draw a dataset with every class among its training rows")
    train, test = standardise(x[:n_train], x[n_train:])
    return (pad_features(train, cfg.max_features), y[:n_train], pad_features(test, cfg.max_features), y[n_train:], k)


def sample_batch(cfg: PriorConfig, batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``batch`` datasets stacked: ``x_train (B, n_train, F)``, ``y_train (B, n_train)``, ``x_test (B,
    n_test, F)``, ``y_test (B, n_test)``, ``n_classes (B,)``; ``n_train`` drawn once for the batch."""
    n_train = int(rng.integers(cfg.min_train, cfg.max_train + 1))
    parts = [sample_dataset(cfg, n_train, rng) for _ in range(batch)]
    return {
        "x_train": np.stack([p[0] for p in parts]),
        "y_train": np.stack([p[1] for p in parts]),
        "x_test": np.stack([p[2] for p in parts]),
        "y_test": np.stack([p[3] for p in parts]),
        "n_classes": np.array([p[4] for p in parts], dtype=np.int64),
    }


def sample_pool(cfg: PriorConfig, datasets: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A pool of ``datasets`` datasets with ``max_train`` training rows each: ``x (N, max_train + n_test, F)``,
    ``y (N, max_train + n_test)`` (training rows first), ``n_classes (N,)``."""
    xs, ys, ks = [], [], []
    for _ in range(datasets):
        x_train, y_train, x_test, y_test, k = sample_dataset(cfg, cfg.max_train, rng)
        xs.append(np.concatenate([x_train, x_test])), ys.append(np.concatenate([y_train, y_test])), ks.append(k)
    return {"x": np.stack(xs), "y": np.stack(ys), "n_classes": np.asarray(ks, dtype=np.int64)}


def pool_batch(pool: dict, batch: int, n_train: int, max_train: int, generator) -> dict:
    """A training batch from a pool (tensors, as :func:`sample_pool` wrote it): ``batch`` datasets drawn with
    ``generator`` (a ``torch.Generator``), the first ``n_train`` of their ``max_train`` training rows and all of
    their held-out rows, in the layout of :func:`sample_batch`."""
    import torch

    index = torch.randint(pool["x"].shape[0], (batch,), generator=generator)
    x, y = pool["x"][index], pool["y"][index]
    return {
        "x_train": x[:, :n_train],
        "y_train": y[:, :n_train],
        "x_test": x[:, max_train:],
        "y_test": y[:, max_train:],
        "n_classes": pool["n_classes"][index],
    }
