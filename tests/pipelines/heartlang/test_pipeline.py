"""heartlang: one tiny Prefect run end to end."""

from __future__ import annotations

from pathlib import Path

from pipelines.heartlang.params import HeartlangParams
from pipelines.heartlang.pipeline import PIPELINE

TINY = {"seeds": [0, 1], "data": {"n": 8}}


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    report = run_flow_and_check(PIPELINE, HeartlangParams.model_validate(TINY), project, expect_weights=False)
    assert [c["id"] for c in report["claims"]] == ["method_beats_baseline"]
