"""STAR: parameter rules, the paper preset, the user's stream archive (learned in place of the offline streams;
refused before any work when malformed or missing: rows of tests/reliability/test_bad_inputs.py), and one tiny
Prefect flow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from components.io import load_json, load_table
from paperflows.contract import StageContext
from paperflows.engine import run_stage
from paperflows.params import ParamsError, validate
from pipelines.star.params import StarParams
from pipelines.star.pipeline import PIPELINE

TINY: dict[str, Any] = {
    "seeds": [0, 1],
    "data": {"datasets": ["seq-mnist"], "train_per_task": 60, "test_per_task": 40},
    "train": {"methods": ["sgd", "er", "er_star"], "buffer_sizes": [30], "batch_size": 16, "minibatch_size": 16},
}


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"train": {"methods": ["er", "er"]}}, "methods repeat"),
        ({"train": {"methods": ["er", "gdumb"]}}, "star.train.methods"),
        ({"train": {"buffer_sizes": [200, 200]}}, "buffer_sizes repeat"),
        ({"train": {"buffer_sizes": [0]}}, "star.train.buffer_sizes"),
        ({"data": {"datasets": ["seq-cifar10"]}}, "star.data.datasets"),
        ({"data": {"path": "stream.csv"}}, "expected a file ending in .npz"),
        ({"star": {"init": "zeros"}}, "star.star.init"),
        ({"star": {"p_gamma": 0.0}}, "star.star.p_gamma"),
    ],
)
def test_bad_params_name_the_key(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamsError, match=message):
        validate(StarParams, section, "star")


def test_paper_preset_and_best_arguments() -> None:
    paper = StarParams(scale="paper")
    assert paper.train.best_args and paper.data.train_per_task is None and paper.seeds == list(range(10))
    # mammoth's seq-mnist best arguments (utils/best_args.py), STAR README's per-base gamma / lambda
    er = paper.run_settings("er", 200)
    assert (er.lr, er.batch_size, er.minibatch_size) == (0.01, 10, 10)
    derpp = paper.run_settings("derpp_star", 500)
    assert (derpp.lr, derpp.minibatch_size, derpp.alpha, derpp.beta, derpp.p_gamma, derpp.p_lam) == (
        0.03,
        10,
        1.0,
        0.5,
        0.1,
        0.005,
    )
    default = StarParams().run_settings("derpp_star", 500)
    assert (default.lr, default.batch_size, default.p_gamma, default.p_lam) == (0.1, 64, 0.01, 0.1)


def _stream_arrays(n_classes: int = 4, **change: np.ndarray) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    y_train, y_test = np.arange(80) % n_classes, np.arange(40) % n_classes
    # each class a bright bar at its own rows, so that a tiny network learns it
    x_train = rng.integers(0, 40, (80, 8, 8), dtype=np.uint8)
    x_test = rng.integers(0, 40, (40, 8, 8), dtype=np.uint8)
    for x, y in ((x_train, y_train), (x_test, y_test)):
        for i, label in enumerate(y):
            x[i, 2 * label : 2 * label + 2] = 250
    return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test, **change}


def test_users_archive_is_learned_as_the_stream(project: Path) -> None:
    np.savez(project / "mine.npz", **_stream_arrays())
    params = StarParams.model_validate(
        {
            "seeds": [0],
            "data": {"path": "mine.npz", "train_per_task": None},
            "train": {"methods": ["er", "er_star"], "buffer_sizes": [10], "batch_size": 8, "minibatch_size": 8},
        }
    )
    root = project / "out"
    for name in ("prepare", "train", "evaluate"):
        run_stage(
            StageContext(
                pipeline=PIPELINE, stage=PIPELINE.stage(name), params=params, root=root, progress=False, project=project
            )
        )
    data = load_json(root / "metrics" / "data.json")["streams"]
    assert list(data) == ["custom"] and data["custom"]["tasks"] == 2 and data["custom"]["image_shape"] == [8, 8]
    assert data["custom"]["train_per_task"] == [40, 40]
    rows = load_table(root / "tables" / "results.parquet")
    assert {(r["stream"], r["method"]) for r in rows} == {("custom", "er"), ("custom", "er_star")}
    assert all(0 <= r["class_il"] <= 100 and r["task_il"] >= r["class_il"] for r in rows)
    # an edited file after prepare is caught, not silently mixed with the old indices
    np.savez(project / "mine.npz", **_stream_arrays(x_train=np.full((80, 8, 8), 7, np.uint8)))
    with pytest.raises(Exception, match="changed since 'prepare'"):
        run_stage(
            StageContext(
                pipeline=PIPELINE,
                stage=PIPELINE.stage("train"),
                params=params,
                root=root,
                progress=False,
                project=project,
                item="er",
            )
        )


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    report = run_flow_and_check(PIPELINE, StarParams.model_validate(TINY), project)
    assert [c["id"] for c in report["claims"]] == ["er_star_ge_er_seq_mnist_b200", "er_star_ge_er_seq_mnist_b30"]
    assert report["claims"][0]["headline"] and "did not run" in report["claims"][0]["reason"]
    assert {c["id"] for c in report["checks"]} >= {"er_star_delta_norm", "er_star_weights_bit_exact"}
    assert all(c["passed"] for c in report["checks"]), report["checks"]
    assert [r["method"] for r in report["rows"]][:3] == ["SGD (fine-tuning, no replay)", "ER", "ER + STAR"]
