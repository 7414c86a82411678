"""MLflow runs of DVC stages, written later: a stage process need not import MLflow.

``dvc repro`` starts one process per stage, and importing MLflow and opening its store costs about
1.5 s of each. So ``paperflows stage`` records its run with a :class:`SpoolTracker` (the interface of
:class:`paperflows.tracking.Tracker`, kept in memory) into one JSON file under
``.paperflows/mlflow-spool/<slug>/``, and the runs are written to MLflow in one go, in order, by the
pipeline's last stage or by a stage that fails (:func:`replay`), so a ``dvc repro <slug>`` leaves every run
in MLflow and a failure is there at once. Start and end times, metric steps and timestamps are the
stage's own. A record is removed once written, so a replay is never repeated.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from pathlib import Path
from typing import Any

from components.io import save_json
from paperflows.settings import Settings

SPOOL_DIR = ".paperflows/mlflow-spool"


def _now_ms() -> int:
    return int(time.time() * 1000)


class SpoolTracker:
    """Records what a stage logs (runs, params, metrics, tags, artifacts) to write it to MLflow later."""

    def __init__(self, settings: Settings, slug: str):
        self.settings, self.slug = settings, slug
        self.runs: dict[str, dict[str, Any]] = {}

    def start(self, run_name: str, tags: dict[str, str], parent_id: str | None = None) -> str:
        run_id = f"spool-{uuid.uuid4().hex}"
        self.runs[run_id] = {"run_name": run_name, "start_time": _now_ms(), "parent": parent_id,
                             "tags": {"paperflows.slug": self.slug, **tags, "host.pid": str(os.getpid()),
                                      "host.name": socket.gethostname()},
                             "params": {}, "metrics": [], "artifacts": [], "status": "RUNNING"}
        return run_id

    def log_params(self, run_id: str, flat: dict[str, Any]) -> None:
        self.runs[run_id]["params"].update({k: str(v) for k, v in flat.items()})

    def log_metrics(self, run_id: str, metrics: dict[str, float], step: int | None = None) -> None:
        now = _now_ms()
        self.runs[run_id]["metrics"] += [[k, float(v), now, int(step or 0)] for k, v in metrics.items()
                                         if v is not None]

    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        self.runs[run_id]["tags"].update(tags)

    def log_artifact(self, run_id: str, path: Path, artifact_path: str | None = None) -> None:
        self.runs[run_id]["artifacts"].append([str(Path(path).resolve()), artifact_path])

    def flush(self, run_id: str) -> None:
        """Nothing to flush: the record is written when the run ends."""

    def end(self, run_id: str, ok: bool, killed: bool = False) -> None:
        run = self.runs.pop(run_id)
        run.update(status="FINISHED" if ok else "KILLED" if killed else "FAILED", end_time=_now_ms())
        folder = self.settings.root / SPOOL_DIR / self.slug
        # names sort in the order the runs ended: the replay keeps it
        save_json(run, folder / f"{run['end_time']:015d}-{run_id.removeprefix('spool-')}.json")


def pending(settings: Settings, slug: str) -> list[Path]:
    folder = settings.root / SPOOL_DIR / slug
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def replay(settings: Settings, slug: str) -> int:
    """Write the spooled runs of ``slug`` to MLflow, oldest first; returns how many were written."""
    records = pending(settings, slug)
    if not records:
        return 0
    from mlflow.entities import Metric, Param, RunTag

    from paperflows.tracking import Tracker

    tracker = Tracker(settings, slug)
    client = tracker.client
    for path in records:
        run = json.loads(path.read_text())
        created = client.create_run(tracker.experiment_id, start_time=run["start_time"], tags=run["tags"],
                                    run_name=run["run_name"])
        run_id = created.info.run_id
        params = [Param(k, v[:6000]) for k, v in sorted(run["params"].items())]
        metrics = [Metric(key=k, value=v, timestamp=ts, step=step) for k, v, ts, step in run["metrics"]]
        for start in range(0, max(len(params), len(metrics)), 100):
            client.log_batch(run_id, params=params[start:start + 100], metrics=metrics[start:start + 100],
                             tags=[RunTag("paperflows.logged", "after the stage (DVC)")] if start == 0 else [])
        for artifact, folder in run["artifacts"]:
            tracker.log_artifact(run_id, Path(artifact), folder)
        client.set_terminated(run_id, status=run["status"], end_time=run["end_time"])
        path.unlink()
    return len(records)
