"""Which run wrote the results in a folder, and where that run can be looked at.

Every run folder (the DVC workspace ``outputs/<slug>/`` or ``runs/<slug>/<run>/``) holds ``report.json``, the
results, and ``run.json``, the record of the run: its parameters, scale, commit, start and end, and the MLflow and
Prefect runs. A Prefect run (``paperflows run``, a deployment) writes ``run.json`` through the engine and then
stamps it with the digest of the ``report.json`` it produced (:func:`stamp`); a DVC run (``dvc repro``,
``dvc exp run``) writes the whole record from its last stage (:func:`write_dvc_record`), when its MLflow runs are
written. The digest is what pairs a record with results: whatever rewrites ``report.json`` later (a DVC run
that predates this record, ``dvc exp apply``, ``dvc checkout``) leaves a record that no longer matches, and
the results page then says the results came from elsewhere instead of naming the wrong run.

For such results, and for records written before the digest existed, ``dvc.lock`` is the witness: DVC keeps
the md5 of every output and the parameter values each stage last ran with (:func:`lock_record`).

Reading is files only (``run.json``, ``dvc.lock``, and the MLflow SQLite file for a link of an older record):
no MLflow, no Prefect, no paper code.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from components.io import load_json, save_json
from paperflows.settings import Settings

RUN_FILE = "run.json"
REPORT_FILE = "report.json"
DIGEST_KEY = "report_md5"  # md5 of report.json's bytes: the same hash DVC records for it in dvc.lock
LOOPBACK = ("127.0.0.1", "localhost", "::1")
DEFAULT_PREFECT_UI = "http://127.0.0.1:4200"  # what `paperflows ui` serves on the project's Prefect database


def report_md5(path: Path) -> str | None:
    """The md5 of a file's bytes (None when it is missing)."""
    try:
        return hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest()
    except OSError:
        return None


def stamp(root: Path, **fields: Any) -> dict[str, Any] | None:
    """Add ``fields`` and the digest of ``root/report.json`` to ``root/run.json`` (written atomically); the
    updated record, or None when there is no record to stamp."""
    path = root / RUN_FILE
    try:
        record = load_json(path)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    record.update({k: v for k, v in fields.items() if v not in (None, "")})
    digest = report_md5(root / REPORT_FILE)
    if digest is not None:
        record[DIGEST_KEY] = digest
    save_json(record, path)
    return record


def write_dvc_record(
    settings: Settings,
    pipeline: Any,
    params: Any,
    runs: list[dict[str, Any]],
    parent: str | None,
    experiment_id: str | None,
) -> Path:
    """``run.json`` of the workspace after a DVC run that ended with the paper's report stage: the parameters it
    ran with, how it was started (``dvc repro`` or ``dvc exp run <name>``), the commit, its MLflow parent run
    and the digest of the report it wrote. ``runs`` are the spooled stage runs of this DVC run (their start and
    end times); ``seconds`` is recorded only when every stage of the paper ran in it (a partial rerun's span is
    not the cost of the run)."""
    from paperflows.engine import run_record

    root = settings.workspace(pipeline.slug)
    experiment = os.environ.get("DVC_EXP_NAME", "")
    record = run_record(pipeline.slug, "dvc", params, parent, settings)
    started = min(r["start_time"] for r in runs) / 1000
    ended = max(r.get("end_time", r["start_time"]) for r in runs) / 1000
    ran = sorted({r["tags"].get("paperflows.stage", "") for r in runs} - {""})
    record.update(
        started=datetime.fromtimestamp(started, UTC).isoformat(),
        finished=datetime.fromtimestamp(ended, UTC).isoformat(),
        dvc_command=f"dvc exp run ({experiment})" if experiment else "dvc repro",
        stages_ran=ran,
    )
    if experiment:
        record["dvc_exp_name"] = experiment
    if {s.name for s in pipeline.stages} <= set(ran):
        record["seconds"] = round(ended - started, 1)
    if experiment_id:
        record["mlflow_experiment_id"] = experiment_id
    digest = report_md5(root / REPORT_FILE)
    if digest is not None:
        record[DIGEST_KEY] = digest
    return save_json(record, root / RUN_FILE)


# --------------------------------------------------------------------------------------------------
# dvc.lock: the witness of what DVC ran last
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LockRecord:
    """What ``dvc.lock`` says of a paper's workspace: the md5 of its ``report.json`` and the parameter values
    its stages last ran with (nested as in ``params.yaml``; only the keys some stage reads)."""

    report_md5: str | None
    params: dict[str, Any]


def lock_record(settings: Settings, slug: str) -> LockRecord | None:
    """The :class:`LockRecord` of ``slug`` (None without a readable ``dvc.lock`` or without its stages)."""
    path = settings.root / "dvc.lock"
    try:
        stat = path.stat()
    except OSError:
        return None
    stages = _lock_stages(str(path), stat.st_mtime_ns, stat.st_size)
    report = f"{settings.workspace(slug).relative_to(settings.root).as_posix()}/{REPORT_FILE}"
    digest, params, found = None, {}, False
    for entry in stages.values():
        if not isinstance(entry, dict):
            continue
        for out in entry.get("outs") or []:
            if isinstance(out, dict) and out.get("path") == report:
                digest, found = out.get("md5"), True
        for values in (entry.get("params") or {}).values():
            for key, value in (values or {}).items() if isinstance(values, dict) else ():
                head, _, rest = str(key).partition(".")
                if head == slug and rest:
                    found = True
                    _set_dotted(params, rest, value)
    return LockRecord(digest, params) if found else None


@functools.lru_cache(maxsize=2)
def _lock_stages(path: str, mtime_ns: int, size: int) -> dict[str, Any]:
    """The ``stages`` of a dvc.lock, parsed once per version of the file (the results page asks per paper)."""
    from paperflows.params import load_yaml

    try:
        data = load_yaml(Path(path).read_text())
    except Exception:  # noqa: BLE001 - an unreadable lock witnesses nothing
        return {}
    stages = data.get("stages") if isinstance(data, dict) else None
    return stages if isinstance(stages, dict) else {}


def _set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        tree = tree.setdefault(part, {})
    tree[leaf] = value


# --------------------------------------------------------------------------------------------------
# does a record describe these results?
# --------------------------------------------------------------------------------------------------
def describes(record: dict[str, Any], report_path: Path, lock: LockRecord | None, workspace: bool) -> tuple[bool, str]:
    """Whether ``record`` (a ``run.json``) is the run that wrote ``report_path``, and if not, why not.

    With a digest the answer is exact. A record without one (written before digests, or by a run that has not
    finished) is believed unless something shows otherwise: a run that started after the results were written
    and never finished, or ``dvc.lock`` holding these very results with other parameter values than the record.
    """
    digest = record.get(DIGEST_KEY)
    if digest:
        if digest == report_md5(report_path):
            return True, ""
        return False, "the results were rewritten after this run"
    if not record.get("finished"):
        started = _when(record.get("started"))
        written = _mtime(report_path)
        if started is not None and written is not None and written < started:
            return False, f"a run started {_short_time(record.get('started'))} has not finished"
    if workspace and lock is not None and lock.report_md5 and lock.report_md5 == report_md5(report_path):
        from paperflows.params import flatten

        ran = flatten(record.get("params") or {})
        locked = flatten(lock.params)
        if any(key in ran and ran[key] != value for key, value in locked.items()):
            return False, "dvc.lock holds these results with other parameter values than this run"
    return True, ""


def _when(text: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except (TypeError, ValueError):
        return None


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _short_time(text: Any) -> str:
    """``2025-05-01T10:00:00.123+00:00`` -> ``2025-05-01 10:00 UTC`` (the text itself when it is no time)."""
    try:
        when = datetime.fromisoformat(str(text))
    except (TypeError, ValueError):
        return str(text or "")
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return when.strftime("%Y-%m-%d %H:%M UTC")


short_time = _short_time


# --------------------------------------------------------------------------------------------------
# links: where the run opens in the MLflow and Prefect UIs
# --------------------------------------------------------------------------------------------------
def prefect_ui_url() -> str:
    """The Prefect UI that shows this project's flow runs: ``$PAPERFLOWS_PREFECT_UI_URL``, else what
    ``paperflows ui`` serves (``http://127.0.0.1:4200``) on the project's Prefect database."""
    return (os.environ.get("PAPERFLOWS_PREFECT_UI_URL") or DEFAULT_PREFECT_UI).rstrip("/")


def prefect_link(record: dict[str, Any], tags: dict[str, str] | None = None) -> str | None:
    """The flow run's page. A URL recorded on a server elsewhere is kept; one on loopback is rebuilt on
    :func:`prefect_ui_url`, since ``paperflows run`` records the URL of its temporary server, which is gone
    after the run while the flow run stays in the project's database."""
    tags = tags or {}
    flow_run = record.get("prefect_flow_run_id") or tags.get("prefect.flow_run_id")
    recorded = record.get("prefect_flow_run_url") or tags.get("prefect.flow_run_url") or ""
    if recorded and (urlsplit(recorded).hostname or "") not in LOOPBACK:
        return recorded
    return f"{prefect_ui_url()}/runs/flow-run/{flow_run}" if flow_run else None


def mlflow_link(settings: Settings, record: dict[str, Any], tags: dict[str, str] | None = None) -> str | None:
    """The MLflow parent run's page in the model-training view (None without a run id)."""
    from paperflows.tracking import mlflow_run_url

    run_id = record.get("mlflow_run_id")
    if not run_id:
        return None
    experiment = record.get("mlflow_experiment_id") or (tags or {}).get("_experiment_id")
    return mlflow_run_url(settings, str(experiment), str(run_id)) if experiment else None


def mlflow_run_facts(settings: Settings, run_id: str | None) -> dict[str, str]:
    """For a record that predates its links: the parent run's experiment id (as ``_experiment_id``) and its
    ``prefect.*`` tags, read from a local MLflow SQLite store without MLflow (empty for any other store)."""
    from paperflows.tracking import _sqlite_file

    db = _sqlite_file(settings.tracking_uri)
    if not run_id or db is None or not db.is_file():
        return {}
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=2)) as con:
            row = con.execute("SELECT experiment_id FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()
            tags = con.execute(
                "SELECT key, value FROM tags WHERE run_uuid = ? AND key LIKE 'prefect.%'", (run_id,)
            ).fetchall()
    except sqlite3.Error:
        return {}
    facts = {str(k): str(v) for k, v in tags}
    if row is not None:
        facts["_experiment_id"] = str(row[0])
    return facts


__all__ = [
    "DIGEST_KEY",
    "LockRecord",
    "describes",
    "lock_record",
    "mlflow_link",
    "mlflow_run_facts",
    "prefect_link",
    "prefect_ui_url",
    "report_md5",
    "short_time",
    "stamp",
    "write_dvc_record",
]
