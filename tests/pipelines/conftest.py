"""Fixtures of the per-paper tests: ``run_flow_and_check`` runs one tiny Prefect flow and checks its traces."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

from components.io import load_json
from paperflows.contract import Pipeline
from paperflows.report import TIMED_REPORT

# a measurement of this machine's clock; a data field that is a time within a recording (Ego4D's
# ``timestamp_sec``, a clip's ``start_sec`` / ``end_sec``) is not one
WALL_CLOCK = re.compile(r"^(?!.*(timestamp|start_sec|end_sec)).*(seconds|_ms$|^ms$|time \(s\)|_secs?$)", re.I)


def wall_clock_keys(path: Path) -> list[str]:
    """Keys of JSON files and columns of Parquet tables under ``path`` that name a wall-clock measurement."""
    import pyarrow.parquet as pq

    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else []
    found: list[str] = []

    def walk(tree: Any, where: str) -> None:
        if isinstance(tree, dict):
            for key, value in tree.items():
                if WALL_CLOCK.search(str(key)):
                    found.append(f"{where}:{key}")
                walk(value, where)
        elif isinstance(tree, list):
            for value in tree:
                walk(value, where)

    for file in files:
        if file.suffix == ".json":
            walk(load_json(file), file.name)
        elif file.suffix == ".parquet":
            found += [f"{file.name}:{c}" for c in pq.read_schema(file).names if WALL_CLOCK.search(c)]
    return found


def _run_flow_and_check(
    pipeline: Pipeline, params: Any, project: Path, *, expect_weights: bool = True
) -> dict[str, Any]:
    """Run ``pipeline``'s Prefect flow with non-default ``params`` and check every trace it must leave."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from paperflows import flows

    paper_flow = flows.build_flow(pipeline)
    state = paper_flow(params=params, return_state=True)
    assert state.is_completed(), state.message
    result = state.result()
    flow_run_id = str(state.state_details.flow_run_id)

    # edited params -> a run folder of its own, never the DVC workspace
    root = Path(result["root"])
    assert root.parent == project / "runs" / pipeline.slug and not result["workspace"]
    assert not (project / "outputs").exists()
    report = load_json(root / "report.json")
    assert report["rows"] and report["claims"] and (root / "report.md").is_file()
    timed = root / TIMED_REPORT  # claims and checks measured in seconds: beside the tracked report, untracked
    if timed.is_file():
        extra = load_json(timed)
        report["claims"] = [*report["claims"], *extra.get("claims", [])]
        report["checks"] = [*report.get("checks", []), *extra.get("checks", [])]
    for stage in pipeline.stages:
        for rel in stage.written():
            assert (root / rel).exists(), f"{stage.name} did not leave {rel}"
        for rel in stage.outs + stage.metrics:  # what DVC tracks: byte-identical for equal results
            clocked = wall_clock_keys(root / rel)
            assert not clocked, f"{stage.name}: DVC-tracked {rel} holds wall-clock values {clocked[:5]} (use timings=)"

    # MLflow: parent run tagged with the Prefect flow run, one finished child per stage
    client = MlflowClient(f"sqlite:///{project / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(pipeline.slug)
    parent = client.get_run(result["mlflow_run_id"])
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["prefect.flow_run_id"] == flow_run_id
    assert parent.data.params["seeds"] == str(params.seeds)
    children = client.search_runs([experiment.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    # one child per stage, or per item for a fan-out stage
    expected = sorted(f"{s.name}[{i}]" for s in pipeline.stages for i in pipeline.items(s, params) or [None])
    found = sorted(f"{c.data.tags['paperflows.stage']}[{c.data.tags.get('paperflows.item')}]" for c in children)
    assert found == expected
    assert all(c.info.status == "FINISHED" for c in children)
    logged = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert "tables" in logged
    if expect_weights:
        weights = [c for c in children if any(a.path == "weights" for a in client.list_artifacts(c.info.run_id))]
        assert weights, "no stage logged its weights (safetensors) to MLflow"

    # Prefect: the result table is a table artifact of this flow run
    with get_client(sync_client=True) as prefect:
        artifacts = prefect.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[f"{pipeline.slug.replace('_', '-')}-results"]))
        )
    assert any(str(a.flow_run_id) == flow_run_id and a.type == "table" for a in artifacts)
    return report


@pytest.fixture()
def run_flow_and_check(prefect_harness: None, project: Path):
    """``run_flow_and_check(pipeline, params, project, expect_weights=True) -> report``: the flow's traces."""
    return _run_flow_and_check
