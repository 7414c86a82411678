"""MotherNetClassifier: fit is one hypernetwork pass writing a plain child MLP; probabilities; saving through
components.io; row-order invariance (with and without PCA); the preprocessing map; scikit-learn's checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.utils.estimator_checks import check_estimator

from components.io import load_tensors, save_model
from components.tabular.classifier import MotherNetClassifier, preprocessing
from components.tabular.mothernet import ChildMLP, MotherNet, MotherNetConfig

SMALL = MotherNetConfig(
    max_features=6, max_classes=5, emsize=16, layers=1, heads=2, ff=32, decoder_hidden=32, child_hidden=8, rank=3
)


def _table(n: int = 60, d: int = 4, k: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.arange(n) % k
    return rng.standard_normal((n, d)) * 3 + y[:, None] + 10, np.array(["a", "b", "c", "d", "e"])[y]


def test_fit_writes_a_plain_child_whose_probabilities_sum_to_one(tmp_path) -> None:
    x, y = _table()
    clf = MotherNetClassifier(MotherNet(SMALL, seed=0)).fit(x, y)
    assert list(clf.classes_) == ["a", "b", "c"] and isinstance(clf.child_, ChildMLP)
    assert type(clf.child_).__mro__[1] is torch.nn.Module
    proba = clf.predict_proba(x)
    assert proba.shape == (60, 3) and np.all(proba >= 0)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    assert set(clf.predict(x)) <= {"a", "b", "c"}
    # the child alone, saved and rebuilt from safetensors, predicts the same
    path = save_model(clf.child_, tmp_path / "child.safetensors")
    rebuilt = ChildMLP(clf.child_.cfg)
    rebuilt.load_state_dict(load_tensors(path))
    torch.testing.assert_close(
        rebuilt.predict_proba(torch.tensor(x, dtype=torch.float32)),
        torch.tensor(proba, dtype=torch.float32),
        atol=1e-6,
        rtol=1e-5,
    )


@pytest.mark.parametrize("d", [4, 11])  # 11 > max_features: PCA inside the child's input map
def test_permuting_training_rows_leaves_the_child_unchanged(d: int) -> None:
    x, y = _table(d=d, seed=1)
    model = MotherNet(SMALL, seed=2)
    a = MotherNetClassifier(model).fit(x, y).child_.state_dict()
    order = np.random.default_rng(3).permutation(len(y))
    b = MotherNetClassifier(model).fit(x[order], y[order]).child_.state_dict()
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=1e-4, rtol=1e-4)


def test_preprocessing_standardises_pads_and_projects() -> None:
    x, _ = _table(n=50, d=3)
    center, projection = preprocessing(x, 6)
    z = (x - center) @ projection
    np.testing.assert_allclose(z.mean(axis=0), 0, atol=1e-9)
    np.testing.assert_allclose(z[:, :3].std(axis=0), np.sqrt(6 / 3))  # standardised, then sqrt(F / d)
    assert np.all(z[:, 3:] == 0)
    wide, _ = _table(n=50, d=9)
    center, projection = preprocessing(wide, 6)
    z = (wide - center) @ projection
    np.testing.assert_allclose(z.std(axis=0), 1.0)  # 6 standardised components, no padding
    np.testing.assert_allclose(np.corrcoef(z.T), np.eye(6), atol=1e-8)  # uncorrelated (principal components)


def test_too_many_classes_is_refused() -> None:
    x = np.random.default_rng(0).standard_normal((30, 3))
    with pytest.raises(ValueError, match="at most 5 classes"):
        MotherNetClassifier(MotherNet(SMALL, seed=0)).fit(x, np.arange(30) % 6)


# Two of scikit-learn's checks are expected to fail, for reasons outside the estimator's contract; every other
# check must pass.
# * check_classifiers_train asks for >= 83% training accuracy on easy blobs: a property of a *pretrained*
#   hypernetwork; an untrained one (all a unit test can build quickly) writes a random child.
# * check_estimators_overwrite_params compares joblib hashes of the ``model`` parameter and of its deep copy;
#   torch pickles storage addresses, so the two differ even untouched. That fit leaves the hypernetwork's
#   weights alone is tested below instead.
EXPECTED_FAILURES = {
    "check_classifiers_train": "an untrained hypernetwork writes a random child",
    "check_estimators_overwrite_params": "torch modules hash differently from their deep copies",
}


def test_fit_leaves_the_hypernetwork_alone() -> None:
    model = MotherNet(SMALL, seed=5)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x, y = _table()
    MotherNetClassifier(model).fit(x, y)
    assert model.training and all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_scikit_learn_estimator_checks() -> None:
    results = check_estimator(
        MotherNetClassifier(MotherNet(SMALL, seed=0)), on_fail=None, expected_failed_checks=EXPECTED_FAILURES
    )
    failed = [(r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] == "failed"]
    assert not failed, failed
    assert sum(r["status"] == "passed" for r in results) >= 40


def test_the_classifier_loads_a_saved_hypernetwork_and_has_no_untrained_default(tmp_path) -> None:
    model = MotherNet(SMALL, seed=4)
    path = save_model(model, tmp_path / "mothernet_s0.safetensors")
    x, y = _table()
    from_file = MotherNetClassifier(str(path)).fit(x, y)
    in_memory = MotherNetClassifier(model).fit(x, y)
    assert from_file.hypernetwork_.cfg == SMALL
    np.testing.assert_allclose(from_file.predict_proba(x), in_memory.predict_proba(x), atol=1e-6)
    with pytest.raises(ValueError, match="needs a pretrained hypernetwork"):
        MotherNetClassifier().fit(x, y)
