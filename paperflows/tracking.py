"""MLflow tracking for pipeline runs: one experiment per slug, a parent run per pipeline run, a child
run per stage.

Everything goes through :class:`mlflow.MlflowClient` with explicit run ids, never through the
thread-local "active run", so stages executed by Prefect in worker threads log to the right run.
Metric points are buffered and written with ``log_batch`` (one SQLite transaction per flush instead of
one per point).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from paperflows.settings import Settings

if TYPE_CHECKING:
    from mlflow.entities import Metric

# mlflow (about a second to import) loads where a run is written, not where tags or folders are computed

_PARAM_VALUE_LIMIT = 6000
_FLUSH_EVERY = 200


def git_commit(root: Path) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=10, check=False)
        commit = out.stdout.strip()
        if not commit:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10, check=False).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


class Tracker:
    """Thin wrapper over one MLflow experiment."""

    def __init__(self, settings: Settings, slug: str):
        from mlflow import MlflowClient

        self.settings = settings
        self.slug = slug
        self.client = MlflowClient(tracking_uri=settings.tracking_uri)
        self.experiment_id = self._ensure_experiment(slug)
        self._buffers: dict[str, list[Metric]] = {}

    def _ensure_experiment(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        location = None
        if self.settings.local_tracking:
            location = (self.settings.artifact_root / name).resolve().as_uri()
        try:
            return self.client.create_experiment(name, artifact_location=location)
        except Exception:  # created concurrently by another process
            found = self.client.get_experiment_by_name(name)
            if found is None:
                raise
            return found.experiment_id

    # runs -------------------------------------------------------------------------------------
    def start(self, run_name: str, tags: dict[str, str], parent_id: str | None = None) -> str:
        # where the run executes (a Dask worker for a fan-out item): lets a later start find runs whose
        # process died without ending them (reap_orphan_runs)
        all_tags = {"paperflows.slug": self.slug, **tags, "host.pid": str(os.getpid()),
                    "host.name": socket.gethostname()}
        if parent_id:
            all_tags["mlflow.parentRunId"] = parent_id
        run = self.client.create_run(self.experiment_id, run_name=run_name, tags=all_tags)
        return run.info.run_id

    def end(self, run_id: str, ok: bool, killed: bool = False) -> None:
        """FINISHED, or KILLED when the process was stopped (SIGTERM, Ctrl-C), else FAILED."""
        from mlflow.entities import RunStatus

        self.flush(run_id)
        status = RunStatus.to_string(RunStatus.FINISHED if ok else RunStatus.KILLED if killed else RunStatus.FAILED)
        self.client.set_terminated(run_id, status=status)

    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        for key, value in tags.items():
            self.client.set_tag(run_id, key, value)

    # params and metrics -----------------------------------------------------------------------
    def log_params(self, run_id: str, flat: dict[str, Any]) -> None:
        from mlflow.entities import Param

        params = [Param(k, str(v)[:_PARAM_VALUE_LIMIT]) for k, v in sorted(flat.items())]
        for start in range(0, len(params), 100):
            self.client.log_batch(run_id, params=params[start:start + 100])

    def log_metrics(self, run_id: str, metrics: dict[str, float], step: int | None = None) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        buf = self._buffers.setdefault(run_id, [])
        for key, value in metrics.items():
            if value is None:
                continue
            buf.append(Metric(key=key, value=float(value), timestamp=now, step=int(step or 0)))
        if len(buf) >= _FLUSH_EVERY:
            self.flush(run_id)

    def flush(self, run_id: str) -> None:
        buf = self._buffers.pop(run_id, [])
        for start in range(0, len(buf), 1000):
            self.client.log_batch(run_id, metrics=buf[start:start + 1000])

    # artifacts --------------------------------------------------------------------------------
    def log_artifact(self, run_id: str, path: Path, artifact_path: str | None = None) -> None:
        if path.is_dir():
            self.client.log_artifacts(run_id, str(path), artifact_path=artifact_path)
        elif path.is_file():
            self.client.log_artifact(run_id, str(path), artifact_path=artifact_path)


def artifact_folder(path: Path) -> str:
    """Where an output file goes in the MLflow artifact tree, by kind."""
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        return "weights"
    if suffix == ".png":
        return "plots"
    if suffix in {".parquet", ".md"} or path.name.startswith("report"):
        return "tables"
    return "outputs"


def run_tags(settings: Settings, entry: str, **extra: str) -> dict[str, str]:
    tags = {
        "paperflows.entry": entry,
        "git.commit": git_commit(settings.root),
    }
    tags.update({k: v for k, v in extra.items() if v})
    return tags


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_orphan_runs(settings: Settings, pids: set[int] | None = None) -> list[str]:
    """End as KILLED the RUNNING runs of this host whose process is gone (or is one of ``pids``).

    Called after a run's process was killed, and at the start of a run, so that no run stays RUNNING
    forever after a SIGKILL. Returns the ids of the runs it ended.
    """
    from mlflow import MlflowClient
    from mlflow.entities import RunStatus

    client = MlflowClient(tracking_uri=settings.tracking_uri)
    host = socket.gethostname()
    ended = []
    experiments = [e.experiment_id for e in client.search_experiments()]
    if not experiments:
        return ended
    for run in client.search_runs(experiments, "attributes.status = 'RUNNING'", max_results=5000):
        tags = run.data.tags
        pid = int(tags.get("host.pid", "0") or 0)
        if tags.get("host.name") != host or not pid:
            continue
        if (pids is not None and pid in pids) or not _alive(pid):
            client.set_tag(run.info.run_id, "paperflows.ended_by", "reaper: its process was gone")
            client.set_terminated(run.info.run_id, status=RunStatus.to_string(RunStatus.KILLED))
            ended.append(run.info.run_id)
    return ended
