"""activity_cliff: parameter rules and one tiny Prefect flow on a user CSV in MoleculeACE's columns (a malformed
CSV refused before any work: rows of tests/reliability/test_bad_inputs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.io import load_json, load_table
from components.molecules.moleculeace import COLUMNS, TARGETS, benchmark_csv
from paperflows.params import ParamsError, validate
from pipelines.activity_cliff.params import ActivityCliffParams
from pipelines.activity_cliff.pipeline import PIPELINE

SMALL = {
    "model": {"hidden": 32, "embed": 16, "gin_dim": 16, "gin_layers": 2, "edge_hidden": 8},
    "train": {"mlp_steps": 6, "gin_steps": 3, "batch_size": 16, "edge_batch": 8},
}
# the platform's stage-by-stage checks run these values (a packaged target: no file to write first)
TINY = {"seeds": [0, 1], "data": {"targets": ["CHEMBL2835_Ki"]}, **SMALL}


def test_params_rules_name_the_key() -> None:
    with pytest.raises(ParamsError, match=r"activity_cliff\.data\.targets: .*choices repeat: \['CHEMBL2047_EC50'\]"):
        validate(ActivityCliffParams, {"data": {"targets": ["CHEMBL2047_EC50", "CHEMBL2047_EC50"]}}, "activity_cliff")
    with pytest.raises(ParamsError, match=r"activity_cliff\.data\.targets\.0"):
        validate(ActivityCliffParams, {"data": {"targets": ["CHEMBL0_Ki"]}}, "activity_cliff")
    with pytest.raises(ParamsError, match=r"activity_cliff\.data\.csv_path: .*ending in \.csv"):
        validate(ActivityCliffParams, {"data": {"csv_path": "set.parquet"}}, "activity_cliff")
    with pytest.raises(ParamsError, match=r"activity_cliff: .*cliff_lower"):
        validate(ActivityCliffParams, {"aca": {"cliff_lower": 2.0, "cliff_upper": 1.0}}, "activity_cliff")
    with pytest.raises(ParamsError, match=r"activity_cliff\.train\.objectives"):
        validate(ActivityCliffParams, {"train": {"objectives": ["mse", "focal"]}}, "activity_cliff")
    default = ActivityCliffParams()
    assert default.datasets() == ["CHEMBL2047_EC50", "CHEMBL4616_EC50", "CHEMBL1862_Ki"] and len(default.seeds) >= 3
    paper = ActivityCliffParams(scale="paper")
    assert paper.data.targets == list(TARGETS) and paper.train.gin_steps == 5000 and len(paper.seeds) == 5
    assert ActivityCliffParams.model_validate({"data": {"csv_path": "my/set.csv"}}).datasets() == ["set"]
    assert PIPELINE.items(PIPELINE.stage("train"), default) == ["ecfp_mlp", "gin"]


def _subset(path: Path, rows: int = 64) -> Path:
    """The first ``rows`` molecules of CHEMBL2047_EC50, 3 of 4 in training: a user file in MoleculeACE's columns."""
    lines = benchmark_csv("CHEMBL2047_EC50").read_text().splitlines()
    body = [
        ",".join(line.split(",")[:4] + ["test" if i % 4 == 3 else "train"])
        for i, line in enumerate(lines[1 : rows + 1])
    ]
    path.write_text("\n".join([",".join(COLUMNS), *body]) + "\n")
    return path


def test_flow_smoke_on_a_user_csv(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    _subset(project / "chembl2047_head.csv")
    params = ActivityCliffParams.model_validate({"seeds": [0, 1], "data": {"csv_path": "chembl2047_head.csv"}, **SMALL})
    report = run_flow_and_check(PIPELINE, params, project)
    root = next((project / "runs" / "activity_cliff").iterdir())
    molecules = load_table(root / "data" / "molecules.parquet")
    assert {m["dataset"] for m in molecules} == {"chembl2047_head"} and len(molecules) == 64
    edges = load_table(root / "data" / "similarity_graph.parquet")
    train_rows = {m["row"] for m in molecules if m["split"] == "train"}
    assert edges and all(e["row_src"] in train_rows and e["row_dst"] in train_rows for e in edges)  # train only
    scores = load_table(root / "tables" / "scores.parquet")
    assert len(scores) == 2 * 3 * 2  # encoders x objectives x seeds
    assert load_json(root / "metrics" / "svm.json")["chembl2047_head"]["tuned"] is False  # a user file: fixed SVR
    weights = sorted(p.name for p in (root / "trained" / "gin" / "chembl2047_head").glob("*.safetensors"))
    assert weights == [f"{o}_seed{s}.safetensors" for o in ("aca", "lac", "mse") for s in (0, 1)]
    assert {c["id"] for c in report["claims"]} == {
        "mse_underfits_cliff_molecules",
        "lac_lowers_rmse_cliff_ecfp_mlp",
        "lac_lowers_rmse_cliff_gin",
        "lac_keeps_rmse_ecfp_mlp",
        "lac_keeps_rmse_gin",
    }
    gates = [g for c in report["claims"] if c["id"].startswith("lac_") for g in c["gates"]]
    # each arm must fit its training labels and beat the training-mean predictor on the test set
    assert gates and {g["reference"] for g in gates} == {"the training-mean predictor", "training R^2 0.5"}
    assert load_json(root / "metrics" / "data.json")["chembl2047_head"]["train_mean_test_rmse"] > 0
    for png in ("rmse_cliff_by_target", "training_loss_ratio", "parity"):
        assert (root / "plots" / f"{png}.png").stat().st_size > 5000
