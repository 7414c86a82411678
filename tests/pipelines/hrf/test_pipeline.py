"""HRF: one tiny Prefect flow and the params form (the MNIST folder checked, never unpickled, before work: rows of
tests/reliability/test_bad_inputs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from paperflows.params import ParamsError, validate
from pipelines.hrf.params import HrfParams
from pipelines.hrf.pipeline import PIPELINE
from tests.components.data.test_mnist_idx import mnist_folder

TINY = {
    "seeds": [0],
    "data": {"n_train": 256, "n_eval": 64, "n_val": 48, "mnist_train": 100, "mnist_eval": 50, "mnist_val": 50},
    "model": {"hidden": 8, "image_hidden": 8, "emb_dim": 8, "depths": [1, 2, 3]},
    "train": {"steps": 5, "batch_size": 16, "image_steps": 3, "image_batch_size": 8},
    "eval": {
        "schedules": [[2], [10], [1, 2], [2, 1], [5, 2], [1, 1, 2]],
        "image_schedules": [[2], [1, 2]],
        "n_samples": 32,
        "val_samples": 24,
        "image_samples": 16,
        "n_crossing": 16,
        "n_projections": 8,
        "velocity_samples": 16,
        "velocity_inner_steps": 2,
        "n_plot": 8,
    },
}


def test_flow_smoke(project: Path, run_flow_and_check, tmp_path: Path) -> None:
    """The whole flow at tiny size, MNIST read from a small folder of IDX files (data.mnist_path)."""
    folder = mnist_folder(tmp_path / "mnist-idx", n_train=120, n_test=60)
    params = HrfParams.model_validate({**TINY, "data": {**TINY["data"], "mnist_path": str(folder)}})
    report = run_flow_and_check(PIPELINE, params, project)
    rows = {(r["dataset"], r["NFE"]): r for r in report["rows"]}
    assert set(rows) == {("1-D mixture", 2), ("1-D mixture", 10), ("2-D moons", 2), ("2-D moons", 10), ("MNIST", 2)}
    assert rows[("1-D mixture", 2)]["HRF3 split"] == "1x1x2" and rows[("1-D mixture", 2)]["HRF2 split"] in {
        "1x2",
        "2x1",
    }
    assert rows[("2-D moons", 2)]["HRF3"] is None and rows[("1-D mixture", 10)]["RF exact field"] is not None
    assert rows[("1-D mixture", 2)]["floor"] is not None
    claims = {c["id"]: c for c in report["claims"]}
    assert [c["id"] for c in report["claims"] if c["headline"]] == ["hrf2_beats_rf_mixture", "hrf2_beats_rf_moons"]
    assert claims["hrf2_beats_rf_mixture"]["verdict"] == "not resolved"  # one seed decides nothing
    assert {g["reference"] for g in claims["hrf2_beats_rf_moons"]["gates"]} == {
        "the untrained flow (x1 = x0, the source itself)"
    }
    checks = {c["id"]: c["passed"] for c in report["checks"]}
    assert checks["nfe_is_product_of_steps"] and checks["rf_velocity_single_valued"]
    assert "hrf_paths_cross" in checks and "velocity_law_closer_than_rf" in checks
    every = report["extra_tables"]["every schedule (validation and test)"]
    assert {r["method"] for r in every if r["dataset"] == "MNIST"} == {"RF", "HRF2"}


def test_params_reject_bad_values_naming_the_key() -> None:
    with pytest.raises(ParamsError, match="model.depths"):
        validate(HrfParams, {"model": {"depths": [1, 2, 4]}}, "hrf")
    with pytest.raises(ParamsError, match="depths"):
        validate(HrfParams, {"model": {"depths_2d": [2]}}, "hrf")
    with pytest.raises(ParamsError, match="hrf.model.emb_dim"):
        validate(HrfParams, {"model": {"emb_dim": 9}}, "hrf")
    with pytest.raises(ParamsError, match="hrf.classifier"):  # the digit classifier is packaged, not trained
        validate(HrfParams, {"classifier": {"steps": 3}}, "hrf")
    with pytest.raises(ParamsError, match="hrf.train.threads"):
        validate(HrfParams, {"train": {"threads": 2}}, "hrf")
    with pytest.raises(ParamsError, match="hrf.eval.velocity_times"):
        validate(HrfParams, {"eval": {"velocity_times": [1.0]}}, "hrf")
    paper = HrfParams(scale="paper")
    assert paper.train.steps == 50_000 and paper.eval.schedules[-1] == [2, 5, 10]


def test_stages_declare_only_the_groups_they_read() -> None:
    """Evaluation never reads the training settings: changing them retrains, and only then re-evaluates."""
    declared = {s.name: s.params for s in PIPELINE.stages}
    assert "classifier" not in declared
    assert "train" not in declared["evaluate_lowdim"] + declared["evaluate_mnist"] + declared["report"]


# ---- data.mnist_path: checked by the CLI before any work ------------------------------------------
