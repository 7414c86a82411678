"""Both entry points on a fresh copy of the repository: `dvc repro` twice, the Prefect flow at the
params.yaml values, and a Prefect run with edited parameters that must leave DVC's outputs alone."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import clone_repo
from tests.pipelines.knots.test_pipeline import TINY as KNOTS_TINY
from tests.pipelines.nsot.test_pipeline import TINY as NSOT_TINY

TIMING_WORDS = ("seconds", "_ms")


def _merge(base: dict, update: dict) -> dict:
    out = dict(base)
    for key, value in update.items():
        out[key] = _merge(base[key], value) if isinstance(value, dict) else value
    return out


# the stages of knots' newest MLflow parent run that were skipped as up to date (printed one per line)
SKIPPED_CHILDREN = """
import sys
from mlflow import MlflowClient
client = MlflowClient(f"sqlite:///{sys.argv[1]}/mlflow.db")
experiment = client.get_experiment_by_name("knots")
[parent] = client.search_runs([experiment.experiment_id], "tags.`paperflows.output_root` = 'outputs/knots'",
                              order_by=["attributes.start_time DESC"], max_results=1)
children = client.search_runs([experiment.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
print("\\n".join(c.data.tags["paperflows.stage"] for c in children if c.data.tags.get("paperflows.skipped")))
"""


def _run(cmd: list[str], repo: Path) -> subprocess.CompletedProcess[str]:
    bin_dir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERFLOWS_", "MLFLOW_", "PREFECT_HOME"))}
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    result = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"{cmd} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def _deterministic_metrics(repo: Path) -> dict[str, object]:
    found = {}
    for path in sorted((repo / "outputs").rglob("metrics/*.json")):

        def strip(tree):
            if isinstance(tree, dict):
                return {k: strip(v) for k, v in tree.items() if not any(w in k for w in TIMING_WORDS)}
            return tree

        found[str(path.relative_to(repo))] = strip(json.loads(path.read_text()))
    return found


def _tree_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.mark.slow
def test_dvc_repro_and_prefect_agree_and_stay_apart(tmp_path: Path) -> None:
    repo = clone_repo(tmp_path / "repo")
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["knots"] = _merge(params["knots"], KNOTS_TINY)
    params["nsot"] = _merge(params["nsot"], NSOT_TINY)
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    first = _run(["dvc", "repro", "knots", "nsot"], repo)
    assert "Running stage 'knots-prepare'" in first.stdout and "Running stage 'nsot-ot_precompute'" in first.stdout
    assert (repo / "dvc.lock").is_file() and (repo / "outputs/knots/report.json").is_file()
    by_dvc = _deterministic_metrics(repo)
    assert set(by_dvc) >= {"outputs/knots/metrics/merge.json", "outputs/nsot/metrics/eval.json"}

    second = _run(["dvc", "repro", "knots", "nsot"], repo)
    assert "Running stage" not in second.stdout, second.stdout

    # up to date: `paperflows run` says so and does nothing, without starting Prefect
    skipped = _run([sys.executable, "-m", "paperflows", "run", "knots", "--no-progress"], repo)
    assert "knots: up to date" in skipped.stdout and "Prefect" not in skipped.stdout, skipped.stdout

    # the Prefect flows at the params.yaml values (forced), both papers at once on one local Prefect server:
    # the same metrics as DVC's one-stage-at-a-time run, recorded for DVC
    both = _run(
        [sys.executable, "-m", "paperflows", "run", "knots,nsot", "--force", "--jobs", "2", "--no-progress"], repo
    )
    assert "local Prefect server for the parallel runs" in both.stdout and "[nsot]" in both.stdout
    assert _deterministic_metrics(repo) == by_dvc
    status = _run(["dvc", "status", "--with-deps", "knots", "nsot"], repo)
    assert "up to date" in status.stdout, status.stdout
    # a rerun with equal results leaves dvc.lock as it was: seconds are kept apart from results (nsot's
    # report itself decides its step-time claims from measured times, so its report changes with them)
    lock = (repo / "dvc.lock").read_text()
    _run([sys.executable, "-m", "paperflows", "run", "knots", "--force", "--no-progress"], repo)
    assert (repo / "dvc.lock").read_text() == lock

    # one incremental engine: after an edit of the report's code, `paperflows run` asks DVC once and reruns only
    # the report stage; the fresh stages end Cached in Prefect and as skipped MLflow children
    report_code = repo / "pipelines" / "knots" / "report.py"
    original_report = report_code.read_text()
    full = json.loads((repo / "outputs" / "knots" / "run.json").read_text())
    report_code.write_text(original_report + "\n# a note edit\n")
    partial = _run([sys.executable, "-m", "paperflows", "run", "knots", "--no-progress"], repo)
    assert "knots: 1 of 5 stages to run (knots)" in partial.stdout, partial.stdout
    record = json.loads((repo / "outputs" / "knots" / "run.json").read_text())  # the cost stays the full run's
    assert record["seconds"] == full["seconds"] and record["seconds_this_run"] < full["seconds"], (record, full)
    assert record["stages_skipped"] == ["prepare", "pretrain", "finetune", "merge"], record
    assert "up to date" in _run(["dvc", "status", "--with-deps", "knots"], repo).stdout
    skipped_children = _run([sys.executable, "-c", SKIPPED_CHILDREN, str(repo)], repo).stdout.split()
    assert sorted(skipped_children) == ["finetune", "merge", "prepare", "pretrain"], skipped_children
    report_code.write_text(original_report)  # the edit undone: the report stage is stale again, and only it
    again = _run([sys.executable, "-m", "paperflows", "run", "knots", "--no-progress"], repo)
    assert "knots: 1 of 5 stages to run (knots)" in again.stdout, again.stdout

    # editing a component used by one stage only: that stage (and what follows) is out of date, not the others
    component = repo / "components" / "merging" / "knots.py"
    original = component.read_text()
    component.write_text(original + "\n# an edit\n")
    changed = json.loads(_run(["dvc", "status", "--json", "--with-deps", "knots"], repo).stdout or "{}")
    assert "knots-merge" in changed and not {"knots-prepare", "knots-pretrain", "knots-finetune"} & set(changed)
    component.write_text(original)

    # edited parameters: a run folder of its own; DVC-tracked outputs untouched
    before = _tree_hash(repo / "outputs")
    _run([sys.executable, "-m", "paperflows", "run", "knots", "--set", "seeds=[1]", "--no-progress"], repo)
    assert _tree_hash(repo / "outputs") == before
    runs = list((repo / "runs" / "knots").glob("*/report.json"))
    assert len(runs) == 1 and json.loads((runs[0].parent / "run.json").read_text())["params"]["seeds"] == [1]
    assert "up to date" in _run(["dvc", "status", "--with-deps", "knots", "nsot"], repo).stdout

    report = _run([sys.executable, "-m", "paperflows", "report"], repo).stdout
    assert "knots" in report and "nsot" in report and "runs/knots/" in report
