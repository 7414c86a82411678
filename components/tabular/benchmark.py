"""The evaluation protocol of MotherNet's small-data benchmark at CPU scale: stratified random splits, ROC AUC,
scikit-learn baselines, and the time of the hypernetwork pass against the time of the child's forward.

Every method reads the same inputs (:func:`shared_inputs`): the map the child applies to its rows (standardised
with the training rows' statistics; a table wider than the hypernetwork's ``max_features`` projected on its first
principal components), so no baseline sees a feature the child does not. The baselines (:data:`BASELINES`):
logistic regression, histogram gradient boosting, and an MLP trained by gradient descent (scikit-learn's
``MLPClassifier`` with Adam, one hidden layer as wide as the child's, the paper's "MLP trained by gradient
descent").

ROC AUC: binary tables score the second class's probability; multi-class tables take the macro average of the
one-vs-rest AUCs (scikit-learn's ``multi_class="ovr"``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedShuffleSplit
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from components.io import load_tensors
from components.tabular.classifier import MotherNetClassifier, preprocessing
from components.tabular.mothernet import ChildMLP

BASELINES = ("logreg", "gbm", "mlp")


def roc_auc(y: np.ndarray, proba: np.ndarray) -> float:
    """ROC AUC of class probabilities ``proba (n, k)`` for labels ``y`` in ``0..k-1`` (module docstring)."""
    if proba.shape[1] == 2:
        return float(roc_auc_score(y, proba[:, 1]))
    return float(roc_auc_score(y, proba, multi_class="ovr", labels=np.arange(proba.shape[1])))


def stratified_splits(
    y: np.ndarray, n_splits: int, test_fraction: float, seed: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n_splits`` random stratified (train, test) index pairs, every class on both sides."""
    splitter = StratifiedShuffleSplit(n_splits=n_splits, test_size=test_fraction, random_state=seed)
    return [(np.sort(tr), np.sort(te)) for tr, te in splitter.split(np.zeros((len(y), 1)), y)]


@dataclass(frozen=True)
class BaselineConfig:
    """Settings of the baselines: boosting iterations; the MLP's hidden width, epochs (Adam, scikit-learn's
    default learning rate and L2 penalty; it stops earlier once the training loss stops improving)."""

    gbm_iterations: int = 100
    mlp_hidden: int = 32
    mlp_epochs: int = 1000


def _logreg(cfg: BaselineConfig, seed: int):
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))


def _gbm(cfg: BaselineConfig, seed: int):
    return HistGradientBoostingClassifier(max_iter=cfg.gbm_iterations, early_stopping=False, random_state=seed)


def _mlp(cfg: BaselineConfig, seed: int):
    net = MLPClassifier(hidden_layer_sizes=(cfg.mlp_hidden,), max_iter=cfg.mlp_epochs, random_state=seed)
    return make_pipeline(StandardScaler(), net)


BUILDERS = {"logreg": _logreg, "gbm": _gbm, "mlp": _mlp}


def baseline(name: str, cfg: BaselineConfig, seed: int):
    """A fresh, unfitted baseline (module docstring) seeded by ``seed``."""
    if name not in BUILDERS:
        raise ValueError(f"unknown baseline {name!r}; expected one of {BASELINES}")
    return BUILDERS[name](cfg, seed)


def shared_inputs(x_train: np.ndarray, x_test: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows every method reads: the child's own input map (:func:`~components.tabular.classifier.
    preprocessing`, fitted on ``x_train``) applied to both sides, the zero padding dropped."""
    center, projection = preprocessing(x_train, width)
    used = np.flatnonzero(np.abs(projection).sum(axis=0) > 0)
    return (x_train - center) @ projection[:, used], (x_test - center) @ projection[:, used]


def baseline_auc(
    name: str,
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    cfg: BaselineConfig = BaselineConfig(),
    seed: int = 0,
) -> float:
    """Test ROC AUC of a baseline fitted on the training rows, on as many threads as torch uses (scikit-learn's
    convergence warnings silenced: an MLP that stops at ``mlp_epochs`` is the baseline as configured)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    with threadpool_limits(torch.get_num_threads()), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = baseline(name, cfg, seed).fit(x_train, y_train)
        return roc_auc(y_test, model.predict_proba(x_test))


def timed_fit_predict(
    classifier: MotherNetClassifier, x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, repeats: int = 1
) -> tuple[np.ndarray, float, float]:
    """Fit (one hypernetwork pass) and predict ``repeats`` times; returns the test probabilities and the fastest
    wall-clock seconds of the hypernetwork's forward over the training rows and of the child's forward over the
    test rows (both torch forwards under ``no_grad``, preprocessing excluded)."""
    classifier.fit(x_train, y_train)
    proba = classifier.predict_proba(x_test)
    model, child = classifier.hypernetwork_, classifier.child_
    z = ((torch.from_numpy(x_train).float() - child.center) @ child.projection).clamp(-100.0, 100.0)[None]
    codes = torch.from_numpy(np.searchsorted(classifier.classes_, y_train).astype(np.int64))[None]
    x = torch.from_numpy(x_test).float()
    hyper, forward = [], []
    with torch.no_grad():
        for _ in range(repeats):
            start = time.perf_counter()
            model(z, codes)
            hyper.append(time.perf_counter() - start)
            start = time.perf_counter()
            child(x)
            forward.append(time.perf_counter() - start)
    return proba, min(hyper), min(forward)


def child_invariants(
    classifier: MotherNetClassifier,
    saved: str | os.PathLike[str],
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    seed: int,
) -> dict[str, float]:
    """What must hold of a fitted classifier's child, measured: ``reload_error`` (largest difference between
    the child's probabilities and those of a plain :class:`ChildMLP` rebuilt from the ``saved`` safetensors),
    ``row_sum_error`` (largest ``|sum_k p_k - 1|`` of the child's probabilities) and ``permutation_error``
    (largest difference of the child's weights after refitting on the training rows in a random order)."""
    proba = classifier.predict_proba(x_test)
    child = classifier.child_
    rebuilt = ChildMLP(child.cfg)
    rebuilt.load_state_dict(load_tensors(saved))
    x = torch.from_numpy(x_test).float()
    reload_error = float((rebuilt.predict_proba(x) - child.predict_proba(x)).abs().max())
    order = np.random.default_rng(seed).permutation(len(y_train))
    permuted = MotherNetClassifier(classifier.model).fit(x_train[order], y_train[order]).child_
    permutation_error = max(
        float((a - b).abs().max()) for a, b in zip(child.state_dict().values(), permuted.state_dict().values())
    )
    return {
        "reload_error": reload_error,
        "row_sum_error": float(np.abs(proba.sum(axis=1) - 1).max()),
        "child_row_sum_error": float((child.predict_proba(x).sum(-1) - 1).abs().max()),
        "permutation_error": permutation_error,
    }
