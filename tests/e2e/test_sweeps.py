"""A sweep through the real command: two points on one local Prefect server, each its own run and MLflow parent
tagged with the sweep, then one comparison table and its plot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mlflow import MlflowClient


def test_a_sweep_runs_each_point_and_compares_them(project: Path) -> None:
    env = {**os.environ, "PAPERFLOWS_ROOT": str(project), "PAPERFLOWS_PROGRESS": "0"}
    cmd = [
        sys.executable,
        "-m",
        "paperflows",
        "run",
        "bc_pmi",
        "--set",
        "seeds=[0]",
        "--set",
        "mine.steps=5",
        "--set",
        "train.steps=5,10",
        "-j",
        "2",
        "--no-progress",
    ]
    done = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 points over train.steps, 2 at a time" in done.stdout
    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| train.steps | headline | verdict") and len(table) == 3  # header, 2 points

    runs = sorted((project / "runs" / "bc_pmi").glob("*/run.json"))
    points = [json.loads(p.read_text())["sweep"] for p in runs]
    assert sorted(p["values"]["train.steps"] for p in points) == [5, 10] and len({p["id"] for p in points}) == 1
    sweep_folder = project / "runs" / "bc_pmi" / "sweeps" / points[0]["id"]
    assert (sweep_folder / "comparison.md").is_file() and (sweep_folder / "comparison.csv").is_file()
    assert (sweep_folder / "headline_vs_swept.png").is_file()

    client = MlflowClient(f"sqlite:///{project / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("bc_pmi")
    tagged = client.search_runs([experiment.experiment_id], f"tags.`paperflows.sweep` = '{points[0]['id']}'")
    parents = [r for r in tagged if "mlflow.parentRunId" not in r.data.tags]
    assert sorted(r.data.tags["paperflows.sweep.point"] for r in parents) == ["train.steps=10", "train.steps=5"]
