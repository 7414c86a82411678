"""Pyramid Flow: one tiny Prefect run end to end, and the parameter rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.io import load_table
from paperflows.params import ParamsError, validate
from pipelines.pyramid_flow.params import PyramidFlowParams, compute_counter, matched_flops_step, snapshot_steps
from pipelines.pyramid_flow.pipeline import PIPELINE

TINY = {
    "seeds": [0],
    "data": {"n_train_clips": 32, "n_test_clips": 64},
    "model": {"d_model": 16, "n_heads": 2, "n_layers": 1},
    "train": {
        "methods": ["full_res", "pyramid", "pyramid_full_history"],
        "steps": 4,
        "batch_size": 6,
        "curve_fractions": [0.5],
    },
    "evaluator": {"n_frames": 100, "steps": 5},
    "eval": {
        "n_clips": 10,
        "steps_per_stage": 1,
        "first_frame_steps_per_stage": 2,
        "grid_clips": 2,
        "jumps": ["block", "iid", "none"],
    },
}


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    params = PyramidFlowParams.model_validate(TINY)
    report = run_flow_and_check(PIPELINE, params, project)
    names = [r["method"] for r in report["rows"]]
    assert names[0].startswith("(A)") and names[1].startswith("(A) at the pyramid's training FLOPs")
    assert "(C) pyramid without jump renoising" in names and len(names) == 2 + 3 + 3
    assert [c["id"] for c in report["claims"]] == [
        "pyramid_matches_full_res_fd",
        "pyramid_matches_full_res_class_fd",
        "pyramid_matches_full_res_accuracy",
        "pyramid_better_at_matched_flops",
        "jump_renoising_lowers_fd",
        "compressed_history_matches_full_history",
    ]
    assert report["claims"][0]["headline"] and report["claims"][0]["scale"] == "log-ratio"
    assert {c["verdict"] for c in report["claims"]} == {"not resolved"}  # one seed, untrained models
    checks = {c["id"]: c["passed"] for c in report["checks"]}
    assert "jump_renoising_removes_blockiness" in checks  # structural: a check, whatever untrained models give
    assert all(passed for cid, passed in checks.items() if cid != "jump_renoising_removes_blockiness")
    # the compute table the report reads is the schedule's exact count
    run = next((project / "runs" / "pyramid_flow").iterdir())
    compute = load_table(run / "tables" / "train_compute.parquet")
    for row in compute:
        total = compute_counter(params, row["method"]).total(row["step"])
        assert (row["tokens"], row["newest_tokens"], row["flops"]) == tuple(total)
    assert {r["step"] for r in compute if r["method"] == "full_res"} == set(snapshot_steps(params, "full_res"))
    assert matched_flops_step(params) in snapshot_steps(params, "full_res")
    unmatched = params.model_copy(update={"train": params.train.model_copy(update={"matched_flops": False})})
    # without the matched snapshot full resolution is scored where the pyramid is: the curve fractions and the end
    assert snapshot_steps(unmatched, "full_res") == snapshot_steps(unmatched, "pyramid")


@pytest.mark.parametrize(
    "data, key",
    [
        ({"model": {"d_model": 30, "n_heads": 4}}, "pyramid_flow.model: "),
        ({"data": {"canvas": 18}}, "pyramid_flow: "),
        ({"train": {"batch_size": 2}}, "pyramid_flow: "),
        ({"data": {"digit_size": 20}}, "pyramid_flow.data"),
        ({"train": {"curve_fractions": [1.5]}}, "pyramid_flow.train.curve_fractions"),
        ({"eval": {"jumps": ["iid"]}}, "pyramid_flow.eval.jumps"),
        ({"threads": 2}, "pyramid_flow.threads"),
    ],
)
def test_inconsistent_params_are_refused_with_the_key(data: dict, key: str) -> None:
    with pytest.raises(ParamsError, match=key.replace(".", r"\.")):
        validate(PyramidFlowParams, data, "pyramid_flow")


def test_cross_field_messages_name_the_fields() -> None:
    for data, names in (
        ({"model": {"d_model": 30, "n_heads": 4}}, "pyramid_flow.model: Value error, n_heads"),
        ({"data": {"canvas": 20}}, "data.canvas"),
        ({"train": {"batch_size": 2}}, "train.batch_size"),
    ):
        with pytest.raises(ParamsError, match=names.replace(".", r"\.")):
            validate(PyramidFlowParams, data, "pyramid_flow")
