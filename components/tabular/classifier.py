"""MotherNet as a scikit-learn classifier: ``fit`` is one forward pass of the hypernetwork, ``predict_proba`` a
forward pass of the child MLP it wrote.

What a *trained hypernetwork* is: a transformer (:class:`~components.tabular.mothernet.MotherNet`) pretrained on a
prior of synthetic classification tables to read a table's training rows and labels once and write the weights of
a small MLP (the *child*) that classifies that table's rows. Training is done once, by the mothernet pipeline's
``pretrain`` stage, never by ``fit``: ``fit`` only runs the hypernetwork forward, so its quality is entirely that
of the pretrained weights. An untrained hypernetwork writes a random child; it is never a default.

Getting one: ``paperflows run mothernet`` (or ``dvc repro mothernet``) saves one per seed as
``outputs/mothernet/models/mothernet_s<seed>.safetensors`` (beside ``untrained_s<seed>.safetensors``, its initial
weights), and registers the folder in MLflow as ``mothernet-hypernetwork``::

    clf = MotherNetClassifier.from_folder("outputs/mothernet/models", seed=0).fit(X_train, y_train)
    proba = clf.predict_proba(X_test)   # a forward pass of clf.child_, a plain 1-hidden-layer MLP
    labels = clf.predict(X_test)        # classes_ of the argmax

    # from an MLflow run: download the registered folder, then load it the same way
    path = mlflow.artifacts.download_artifacts("models:/mothernet-hypernetwork/1")
    clf = MotherNetClassifier.from_folder(path, seed=0)

``MotherNetClassifier.from_file(path)`` takes one safetensors file; ``MotherNetClassifier(model)`` a
:class:`MotherNet` in memory (tests build small untrained ones this way, explicitly). ``MotherNetClassifier()`` is
constructible, as scikit-learn requires, but ``fit`` refuses it and says how to get trained weights.

``fit(X, y)``: the classes are encoded as ``0..k-1`` (``classes_``, refitted on every call); the features are
standardised with the training rows' mean and std; when there are more features than the hypernetwork reads
(``max_features``), the standardised rows are projected on their first principal components (signed so that
each one's largest entry is positive), which are standardised in turn; the result is zero-padded to
``max_features`` and scaled by ``sqrt(max_features / d')`` as in the prior
(:func:`components.tabular.prior.pad_features`). That affine map goes into the child as its ``center`` /
``projection`` buffers; the hypernetwork reads the preprocessed training rows and their labels
once, and ``child_`` is the :class:`~components.tabular.mothernet.ChildMLP` it wrote. NaNs are refused (the
paper's code accepts them); at most ``max_classes`` classes. ``predict_proba(X)`` returns ``(n, k)`` probabilities
in the order of ``classes_``; ``predict(X)`` the most probable class.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from components.tabular.mothernet import ChildMLP, MotherNet, MotherNetConfig, write_child
from components.tabular.tables import check_class_count


def preprocessing(x: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The affine map ``z = (x - center) @ projection`` of :class:`ChildMLP` for training rows ``x (n, d)``:
    standardise, PCA to ``min(width, n, d)`` standardised components when ``d > width``, zero-pad to ``width``
    and scale by ``sqrt(width / d')``. Returns ``center (d,)``, ``projection (d, width)``."""
    center, std = x.mean(axis=0), x.std(axis=0)
    std = np.where(std > 1e-12, std, 1.0)
    basis = np.diag(1.0 / std)  # (d, d')
    if x.shape[1] > width:
        _, _, vt = np.linalg.svd((x - center) / std, full_matrices=False)
        components = vt[: min(width, vt.shape[0])].T  # (d, d')
        # a sign per component that does not depend on the row order: its largest-magnitude entry is positive
        largest = components[np.abs(components).argmax(axis=0), np.arange(components.shape[1])]
        components = components * np.sign(largest)
        spread = (((x - center) / std) @ components).std(axis=0)
        basis = basis @ components / np.where(spread > 1e-12, spread, 1.0)
    used = basis.shape[1]
    projection = np.zeros((x.shape[1], width))
    projection[:, :used] = basis * np.sqrt(width / used)
    return center, projection


def load_hypernetwork(path: str | os.PathLike[str]) -> MotherNet:
    """A hypernetwork saved by ``components.io.save_model`` (its config is in the file's metadata)."""
    from components.io import load_tensors, safetensors_metadata

    meta = safetensors_metadata(path)
    if "model.config" not in meta:
        raise ValueError(f"{path}: no 'model.config' in the safetensors metadata (not saved by save_model?)")
    if not meta.get("model.class", ":MotherNet").endswith(":MotherNet"):
        raise ValueError(f"{path}: holds a {meta['model.class']}, not a MotherNet hypernetwork")
    model = MotherNet(MotherNetConfig(**json.loads(meta["model.config"])))
    model.load_state_dict(load_tensors(path))
    return model.eval()


HOW_TO_GET_ONE = (
    "train one with `paperflows run mothernet` (it writes outputs/mothernet/models/mothernet_s<seed>.safetensors "
    "and registers them in MLflow as mothernet-hypernetwork), then use MotherNetClassifier.from_folder("
    "'outputs/mothernet/models') or, from MLflow, from_folder(mlflow.artifacts.download_artifacts("
    "'models:/mothernet-hypernetwork/<version>'))"
)


def find_hypernetwork(folder: str | os.PathLike[str], seed: int = 0) -> Path:
    """The trained hypernetwork of ``seed`` under ``folder``: ``mothernet_s<seed>.safetensors``, at any depth (a
    run's ``models/`` folder, a pipeline output folder, a model downloaded from MLflow)."""
    root = Path(folder)
    if root.is_file():
        return root
    if not root.is_dir():
        raise FileNotFoundError(f"no folder {root}: {HOW_TO_GET_ONE}")
    found = sorted(root.rglob(f"mothernet_s{seed}.safetensors"))
    if not found:
        there = sorted(p.name for p in root.rglob("mothernet_s*.safetensors"))
        raise FileNotFoundError(
            f"no mothernet_s{seed}.safetensors under {root}"
            + (f" (trained seeds there: {', '.join(there)})" if there else f"; {HOW_TO_GET_ONE}")
        )
    return found[0]


class MotherNetClassifier(ClassifierMixin, BaseEstimator):
    """Scikit-learn classifier whose ``fit`` writes a child MLP with a pretrained :class:`MotherNet`.

    Build it from trained weights with :meth:`from_folder` or :meth:`from_file` (module docstring).

    Args:
        model: the trained hypernetwork, or the path of one saved as safetensors by a run. ``None`` (the default,
            there so that scikit-learn can construct and clone the estimator) is refused by ``fit`` with a message
            saying how to get trained weights: an untrained hypernetwork is no default.
    """

    def __init__(self, model: MotherNet | str | os.PathLike[str] | None = None) -> None:
        self.model = model

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> MotherNetClassifier:
        """A classifier on the hypernetwork saved at ``path`` (``mothernet_s<seed>.safetensors``), loaded now."""
        if not Path(path).is_file():
            raise FileNotFoundError(f"no file {path}: {HOW_TO_GET_ONE}")
        return cls(load_hypernetwork(path))

    @classmethod
    def from_folder(cls, folder: str | os.PathLike[str], seed: int = 0) -> MotherNetClassifier:
        """A classifier on the trained hypernetwork of ``seed`` in a folder the mothernet pipeline's ``pretrain``
        stage wrote (``outputs/mothernet/models``, ``runs/mothernet/<run>/models``) or in a registered
        ``mothernet-hypernetwork`` version downloaded from MLflow."""
        return cls.from_file(find_hypernetwork(folder, seed))

    def _hypernetwork(self) -> MotherNet:
        if self.model is None:
            raise ValueError(f"MotherNetClassifier needs a pretrained hypernetwork: {HOW_TO_GET_ONE}")
        return self.model if isinstance(self.model, MotherNet) else load_hypernetwork(self.model)

    def fit(self, X, y) -> MotherNetClassifier:  # noqa: N803 (sklearn's names)
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        model = self.hypernetwork_ = self._hypernetwork()
        cfg = model.cfg
        check_class_count(len(self.classes_), cfg.max_classes)  # the rule a run's params are checked with
        center, projection = preprocessing(X, cfg.max_features)
        center_t, projection_t = torch.from_numpy(center).float(), torch.from_numpy(projection).float()
        with torch.no_grad():
            z = ((torch.tensor(X, dtype=torch.float32) - center_t) @ projection_t).clamp(-100.0, 100.0)
            # the hypernetwork has no dropout or batch statistics: its mode does not matter, and is left alone
            weights = model(z[None], torch.from_numpy(codes.astype(np.int64))[None])
        self.child_: ChildMLP = write_child(weights, 0, len(self.classes_), center_t, projection_t)
        return self

    def predict_proba(self, X) -> np.ndarray:  # noqa: N803
        check_is_fitted(self, "child_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        proba = self.child_.predict_proba(torch.tensor(X, dtype=torch.float32)).double().numpy()
        return proba / proba.sum(axis=1, keepdims=True)

    def predict(self, X) -> np.ndarray:  # noqa: N803
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]
