"""DVC experiments on a fresh copy of the repository: a baseline committed with its dvc.lock, one
`dvc exp run -S` that changes a single key, and the numbers `dvc exp show` and `dvc metrics diff` read back
from DVC's cache for both (metrics are cached outputs, so a commit or an experiment carries its metrics)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import clone_repo
from tests.e2e.test_dvc_and_prefect import _merge, _run
from tests.pipelines.oc_flow.test_pipeline import TINY as OC_FLOW_TINY

STEPS_2D = OC_FLOW_TINY["train"]["steps"]
SUMMARY_2D = "outputs/oc_flow/metrics/guidance_euclidean.json"
SUMMARY_SO3 = "outputs/oc_flow/metrics/guidance_so3.json"


def _numbers(row: dict[str, Any], path: str) -> dict[str, float]:
    """The numeric metrics of one file in a `dvc exp show --json` row (empty when DVC could not load them)."""
    found = row["data"]["metrics"].get(path, {}).get("data", {})
    return {k: v for k, v in found.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _steps(row: dict[str, Any]) -> int:
    return row["data"]["params"]["params.yaml"]["data"]["oc_flow"]["train"]["steps"]


@pytest.mark.slow
def test_an_experiment_reruns_only_the_stages_that_read_its_key_and_shows_its_metrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):  # `git commit` and `dvc exp run` commit
        monkeypatch.setenv(var, "paperflows-test")
    for var in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(var, "test@paperflows.invalid")
    repo = clone_repo(tmp_path / "repo")
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["oc_flow"] = _merge(params["oc_flow"], OC_FLOW_TINY)
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    _run(["dvc", "repro", "oc_flow"], repo)
    _run(["git", "add", "-A"], repo)
    _run(["git", "commit", "-qm", "oc_flow baseline"], repo)
    baseline = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()

    # the SO(3) flow reads train.so3_steps and the QM9 flow qm9.flow_steps, never train.steps: their stages
    # keep their outputs
    run = _run(["dvc", "exp", "run", "-n", "steps-x2", "-S", f"oc_flow.train.steps={2 * STEPS_2D}", "oc_flow"], repo)
    for name in ("oc_flow-pretrain_euclidean", "oc_flow-guide_euclidean", "oc_flow"):
        assert f"Running stage '{name}'" in run.stdout, run.stdout
    for name in (
        "oc_flow-prepare",
        "oc_flow-pretrain_so3",
        "oc_flow-guide_so3",
        "oc_flow-prepare_qm9",
        "oc_flow-pretrain_qm9",
        "oc_flow-guide_qm9",
    ):
        assert f"Running stage '{name}'" not in run.stdout and f"Stage '{name}' didn't change" in run.stdout, run.stdout

    rows = json.loads(_run(["dvc", "exp", "show", "--json"], repo).stdout)
    base = next(r for r in rows if r["rev"] == baseline)
    experiment = next(rev for exp in base.get("experiments") or [] if exp["name"] == "steps-x2" for rev in exp["revs"])
    workspace = next(r for r in rows if r["rev"] == "workspace")  # `dvc exp run` applied the experiment
    assert (_steps(base), _steps(experiment), _steps(workspace)) == (STEPS_2D, 2 * STEPS_2D, 2 * STEPS_2D)
    for row in (base, experiment, workspace):
        for path in (SUMMARY_2D, SUMMARY_SO3):
            assert _numbers(row, path), f"`dvc exp show` has no numbers for {path} of {row['rev']}: {row['data']}"
    assert _numbers(base, SUMMARY_2D) != _numbers(experiment, SUMMARY_2D)

    diff = json.loads(
        _run(
            ["dvc", "metrics", "diff", baseline, "steps-x2", "--targets", "outputs/oc_flow/metrics", "--json"], repo
        ).stdout
    )
    changed = {
        key: change
        for key, change in diff.get(SUMMARY_2D, {}).items()
        if isinstance(change.get("diff"), float) and change["diff"] != 0.0
    }
    assert "target/ocflow_g0.01/reward" in changed, f"no numeric change of the guided reward in {diff}"
    assert not diff.get(SUMMARY_SO3), f"the SO(3) metrics changed without their stages running: {diff[SUMMARY_SO3]}"
