"""MLflow runs of DVC stages, written later: a stage process need not import MLflow.

``dvc repro`` starts one process per stage, and importing MLflow and opening its store costs about
1.5 s of each. So ``paperflows stage`` records its run with a :class:`SpoolTracker` (the interface of
:class:`paperflows.tracking.MlflowTracker`, kept in memory) into one JSON file under
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
        self.runs[run_id] = {
            "id": run_id,
            "run_name": run_name,
            "start_time": _now_ms(),
            "parent": parent_id,
            "tags": {
                "paperflows.slug": self.slug,
                **tags,
                "host.pid": str(os.getpid()),
                "host.name": socket.gethostname(),
            },
            "params": {},
            "metrics": [],
            "artifacts": [],
            "status": "RUNNING",
        }
        return run_id

    def log_params(self, run_id: str, flat: dict[str, Any]) -> None:
        self.runs[run_id]["params"].update({k: str(v) for k, v in flat.items()})

    def log_metrics(self, run_id: str, metrics: dict[str, float], step: int | None = None) -> None:
        now = _now_ms()
        self.runs[run_id]["metrics"] += [
            [k, float(v), now, int(step or 0)] for k, v in metrics.items() if v is not None
        ]

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


def replay(settings: Settings, slug: str, pipeline: Any = None, params: Any = None) -> int:
    """Write the spooled runs of ``slug`` to MLflow, oldest first; returns how many were written.

    With the ``pipeline`` and its ``params``, the stage runs are grouped under one parent run, named after
    the DVC experiment (``$DVC_EXP_NAME`` of ``dvc exp run``) or ``dvc repro`` and after what differs from the
    committed params.yaml; when the report stage is among them, the parent gets the claims, tables, figures and
    registered models as a run through Prefect does.
    """
    records = pending(settings, slug)
    if not records:
        return 0
    from mlflow.entities import Metric, Param, RunTag

    from paperflows.tracking import MlflowTracker

    tracker = MlflowTracker(settings, slug)
    client = tracker.client
    runs = [json.loads(path.read_text()) for path in records]
    parent, changed = _start_group(tracker, settings, runs, pipeline, params) if pipeline is not None else (None, None)
    created_ids: dict[str, str] = {}  # spooled id -> MLflow run id (a run nested in a spooled run: per-seed curves)
    # created in the order they started, so a run's parent exists before it
    for path, run in sorted(zip(records, runs), key=lambda pair: pair[1]["start_time"]):
        tags = dict(run["tags"])
        if run.get("parent") in created_ids:
            tags["mlflow.parentRunId"] = created_ids[run["parent"]]
        elif parent is not None and not run.get("parent"):
            tags["mlflow.parentRunId"] = parent
        created = client.create_run(
            tracker.experiment_id, start_time=run["start_time"], tags=tags, run_name=run["run_name"]
        )
        run_id = created.info.run_id
        if run.get("id"):
            created_ids[run["id"]] = run_id
        params_ = [Param(k, v[:6000]) for k, v in sorted(run["params"].items())]
        metrics = [Metric(key=k, value=v, timestamp=ts, step=step) for k, v, ts, step in run["metrics"]]
        for start in range(0, max(len(params_), len(metrics)), 100):
            client.log_batch(
                run_id,
                params=params_[start : start + 100],
                metrics=metrics[start : start + 100],
                tags=[RunTag("paperflows.logged", "after the stage (DVC)")] if start == 0 else [],
            )
        for artifact, folder in run["artifacts"]:
            tracker.log_artifact(run_id, Path(artifact), folder)
        client.set_terminated(run_id, status=run["status"], end_time=run["end_time"])
        path.unlink()
    if parent is not None:
        _end_group(tracker, settings, parent, runs, pipeline, params, changed)
    return len(records)


def _committed_section(settings: Settings, slug: str) -> dict[str, Any] | None:
    """``slug``'s section of params.yaml as committed at HEAD (what a DVC experiment changes from)."""
    import subprocess

    from paperflows.params import load_yaml

    try:
        shown = subprocess.run(
            ["git", "show", "HEAD:params.yaml"],
            cwd=settings.root,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        data = load_yaml(shown.stdout) if shown.returncode == 0 else None
    except Exception:  # noqa: BLE001 - no git, no commit, unreadable: nothing to compare with
        return None
    return data.get(slug) if isinstance(data, dict) and isinstance(data.get(slug), dict) else None


def _start_group(
    tracker: Any, settings: Settings, runs: list[dict[str, Any]], pipeline: Any, params: Any
) -> tuple[str, dict[str, Any] | None]:
    """The parent run of a batch of stage runs, and the keys that differ from the committed params.yaml."""
    from paperflows.params import flatten, validate
    from paperflows.tracking import changed_params, run_name, run_tags

    dumped = params.model_dump(mode="json")
    committed = _committed_section(settings, pipeline.slug)
    try:
        base = validate(type(params), committed, pipeline.slug).model_dump(mode="json") if committed else None
    except ValueError:
        base = None
    changed = changed_params(dumped, base)
    experiment = os.environ.get("DVC_EXP_NAME", "")
    label = f"dvc exp {experiment}" if experiment else "dvc repro"
    tags = run_tags(settings, "dvc", source=f"dvc.yaml:{pipeline.slug}", **{"dvc.exp_name": experiment})
    tags.update(
        {
            "paperflows.slug": pipeline.slug,
            "paperflows.changed": "(no committed params.yaml)" if changed is None else ", ".join(changed) or "(none)",
            "paperflows.output_root": f"outputs/{pipeline.slug}",
            "host.pid": str(os.getpid()),
            "host.name": socket.gethostname(),
        }
    )
    created = tracker.client.create_run(
        tracker.experiment_id,
        run_name=run_name(pipeline.slug, changed, label),
        start_time=min(r["start_time"] for r in runs),
        tags=tags,
    )
    tracker.log_params(created.info.run_id, flatten(dumped))
    return created.info.run_id, changed


def _end_group(
    tracker: Any,
    settings: Settings,
    parent: str,
    runs: list[dict[str, Any]],
    pipeline: Any,
    params: Any,
    changed: dict[str, Any] | None,
) -> None:
    from components.io import load_json
    from paperflows.tracking import log_outcome

    statuses = {r["status"] for r in runs}
    status = "FAILED" if "FAILED" in statuses else "KILLED" if "KILLED" in statuses else "FINISHED"
    last = pipeline.stages[-1].name
    root = settings.workspace(pipeline.slug)
    if (
        status == "FINISHED"
        and any(r["tags"].get("paperflows.stage") == last for r in runs)
        and (root / "report.json").is_file()
    ):
        experiment = os.environ.get("DVC_EXP_NAME", "")
        log_outcome(
            tracker,
            parent,
            pipeline,
            params,
            root,
            load_json(root / "report.json"),
            changed,
            f"`dvc exp run` ({experiment})" if experiment else "`dvc repro`",
        )
        from paperflows.provenance import write_dvc_record

        # the workspace's run.json now names this DVC run (a record of an earlier run would pair its
        # parameters with these results)
        write_dvc_record(settings, pipeline, params, runs, parent, tracker.experiment_id)
    tracker.flush(parent)
    tracker.client.set_terminated(parent, status=status, end_time=max(r["end_time"] for r in runs))
