"""MotherNetClassifier on the hypernetwork the pipeline trained: the pretrain stage's folder, at TINY params, loads
by seed (from_folder / from_file), fits and predicts; without trained weights it says how to get them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.datasets import load_iris

from components.io import load_tensors
from components.tabular.classifier import MotherNetClassifier, find_hypernetwork
from paperflows.contract import StageContext
from paperflows.engine import run_stage
from paperflows.params import validate
from pipelines.mothernet.params import MothernetParams
from pipelines.mothernet.pipeline import PIPELINE
from tests.pipelines.mothernet.test_pipeline import TINY


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output folder after the prior and pretrain stages at TINY params (two seeds)."""
    root = tmp_path_factory.mktemp("mothernet")
    params = validate(MothernetParams, TINY, "mothernet")
    for name in ("prior", "pretrain"):
        run_stage(StageContext(pipeline=PIPELINE, stage=PIPELINE.stage(name), params=params, root=root, progress=False))
    return root


def test_the_classifier_loads_the_trained_hypernetwork_of_a_seed(trained: Path) -> None:
    models = trained / "models"
    assert {p.name for p in models.iterdir()} >= {"mothernet_s0.safetensors", "untrained_s0.safetensors"}
    x, y = load_iris(return_X_y=True)
    clf = MotherNetClassifier.from_folder(models, seed=1).fit(x, y)
    # the trained weights, not the untrained start
    saved = load_tensors(models / "mothernet_s1.safetensors")
    start = load_tensors(models / "untrained_s1.safetensors")
    state = clf.hypernetwork_.state_dict()
    assert all(torch.equal(state[k], v) for k, v in saved.items())
    assert any(not torch.equal(saved[k], start[k]) for k in saved)
    proba = clf.predict_proba(x)
    assert proba.shape == (150, 3) and np.allclose(proba.sum(axis=1), 1.0)
    assert set(clf.predict(x)) <= {0, 1, 2}
    # one file, or a folder further up (a run folder, a model downloaded from MLflow): the same network
    same = MotherNetClassifier.from_file(models / "mothernet_s1.safetensors").fit(x, y)
    np.testing.assert_allclose(same.predict_proba(x), proba, atol=1e-6)
    assert find_hypernetwork(trained, seed=0) == models / "mothernet_s0.safetensors"


def test_without_trained_weights_the_classifier_says_how_to_get_them(trained: Path, tmp_path: Path) -> None:
    x, y = load_iris(return_X_y=True)
    with pytest.raises(ValueError, match="paperflows run mothernet"):
        MotherNetClassifier().fit(x, y)
    with pytest.raises(FileNotFoundError, match=r"no mothernet_s7.safetensors .*trained seeds there: mothernet_s0"):
        MotherNetClassifier.from_folder(trained / "models", seed=7)
    with pytest.raises(FileNotFoundError, match="paperflows run mothernet"):
        MotherNetClassifier.from_folder(tmp_path)
