"""KnOTS: a Prefect smoke run at tiny size, and the claim test on the reduced experiment."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.io import load_json, load_table
from pipelines.knots.pipeline import PIPELINE, KnotsParams
from paperflows.runtime import execute
from paperflows.settings import load_settings

TINY = {"seeds": [0], "data": {"tasks": ["rotate90", "invert"]}, "base": {"steps": 30},
        "lora": {"steps": 20, "head_steps": 20}, "merge": {"lambdas": [0.5, 1.0], "top_ks": [20.0, 100.0]}}


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    report = run_flow_and_check(PIPELINE, KnotsParams.model_validate(TINY), project)
    assert [r["method"] for r in report["rows"]] == list(KnotsParams().merge.methods)


@pytest.mark.claim
def test_claims_on_the_reduced_experiment(project: Path) -> None:
    """The CPU-default experiment (3 seeds); verdicts recomputed here from the raw per-seed table."""
    params = KnotsParams()
    summary = execute(PIPELINE, params, load_settings(), project / "claim", entry="test", progress=False)
    rows = load_table(project / "claim" / "tables" / "merge_test.parquet")
    claims = {c["claim"]: c for c in summary.report["claims"]}

    def mean(method: str) -> float:
        values = [r["avg_norm_acc"] for r in rows if r["method"] == method]
        assert len(values) == len(params.seeds)
        return sum(values) / len(values)

    ties_claim = claims["KnOTS-TIES > TIES on average normalised accuracy (mean over seeds)"]
    assert ties_claim["holds"] == (mean("knots_ties") > mean("ties"))
    assert ties_claim["numbers"]["knots_ties"] == pytest.approx(mean("knots_ties"))
    # the invariant of the method must hold on the real trained LoRAs
    assert claims["KnOTS-TA equals TA to float precision"]["holds"]
    assert mean("knots_ta") == pytest.approx(mean("ta"), abs=1e-9)
    # merging works at all: every merged model keeps most of the single-task accuracy
    assert all(40.0 < r["avg_norm_acc"] <= 110.0 for r in rows)
    checks = load_json(project / "claim" / "metrics" / "merge.json")
    assert all(0.0 <= checks[f"seed{s}/sign_conflict_knots"] <= 1.0 for s in params.seeds)
