"""MotherNet as a scikit-learn classifier: ``fit`` is one forward pass of the hypernetwork, ``predict_proba`` a
forward pass of the child MLP it wrote.

``fit(X, y)``: the classes are encoded as ``0..k-1`` (``classes_``, refitted on every call); the features are
standardised with the training rows' mean and std; when there are more features than the hypernetwork reads
(``max_features``), the standardised rows are projected on their first principal components (signed so that
each one's largest entry is positive), which are standardised in turn; the result is zero-padded to
``max_features`` and scaled by ``sqrt(max_features / d')`` as in the prior
(:func:`components.tabular.prior.pad_features`). That affine map goes into the child as its ``center`` /
``projection`` buffers; the hypernetwork reads the preprocessed training rows and their labels
once, and ``child_`` is the :class:`~components.tabular.mothernet.ChildMLP` it wrote. NaNs are refused (the
paper's code accepts them); at most ``max_classes`` classes.

Use it with the hypernetwork a run pretrained (``paperflows run mothernet`` saves one per seed as
``outputs/mothernet/models/mothernet_s<seed>.safetensors``, also registered in MLflow as ``mothernet-hypernetwork``)::

    clf = MotherNetClassifier("outputs/mothernet/models/mothernet_s0.safetensors").fit(X_train, y_train)
    proba = clf.predict_proba(X_test)   # a forward pass of clf.child_, a plain 1-hidden-layer MLP

There is no default network: an untrained hypernetwork writes a random child, so it must be asked for explicitly
(``MotherNetClassifier(MotherNet(cfg, seed=0))``).
"""

from __future__ import annotations

import json
import os

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
    model = MotherNet(MotherNetConfig(**json.loads(meta["model.config"])))
    model.load_state_dict(load_tensors(path))
    return model.eval()


class MotherNetClassifier(ClassifierMixin, BaseEstimator):
    """Scikit-learn classifier whose ``fit`` writes a child MLP with a pretrained :class:`MotherNet`.

    Args:
        model: the hypernetwork, or the path of one saved as safetensors by a run (module docstring). Required:
            an untrained hypernetwork is no default.
    """

    def __init__(self, model: MotherNet | str | os.PathLike[str] | None = None) -> None:
        self.model = model

    def _hypernetwork(self) -> MotherNet:
        if self.model is None:
            raise ValueError(
                "MotherNetClassifier needs a pretrained hypernetwork: pass a MotherNet or the path of its "
                "safetensors (paperflows run mothernet writes outputs/mothernet/models/mothernet_s0.safetensors)"
            )
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
