"""MLflow tracking for pipeline runs: one experiment per slug, a parent run per pipeline run, a child
run per stage.

Everything goes through :class:`mlflow.MlflowClient` with explicit run ids, never through the
thread-local "active run", so stages executed by Prefect in worker threads log to the right run.
Metric points are buffered and written with ``log_batch`` (one SQLite transaction per flush instead of
one per point).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from paperflows.settings import Settings

if TYPE_CHECKING:
    from mlflow.entities import Metric

    from paperflows.contract import Tracker

# mlflow (about a second to import) loads where a run is written, not where tags or folders are computed

_PARAM_VALUE_LIMIT = 6000
_FLUSH_EVERY = 200


# files the tool itself rewrites in the checkout: a run that changed only these is not a "dirty" run
_WRITTEN_BY_RUNS = ("dvc.lock",)


def git_state(root: Path) -> tuple[str, bool]:
    """(HEAD commit or "unknown", whether tracked files differ from it), ignoring the files runs rewrite
    themselves (``dvc.lock``), so a run is not marked dirty by the run before it."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10, check=False
        )
        commit = out.stdout.strip()
        if out.returncode != 0 or not commit:
            return "unknown", False
        status = subprocess.run(
            [
                "git",
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                *(f":(exclude){name}" for name in _WRITTEN_BY_RUNS),
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.strip()
        return commit, bool(status)
    except (OSError, subprocess.SubprocessError):
        return "unknown", False


def git_commit(root: Path) -> str:
    """``<sha>`` or ``<sha>-dirty`` (see :func:`git_state`)."""
    commit, dirty = git_state(root)
    return commit + ("-dirty" if dirty else "")


def _sqlite_file(tracking_uri: str) -> Path | None:
    """The database file of a ``sqlite:///<path>`` tracking URI (None for any other store)."""
    prefix = "sqlite:///"
    if not tracking_uri.startswith(prefix) or tracking_uri == prefix or "?" in tracking_uri:
        return None
    return Path(tracking_uri[len(prefix) :])


def tracking_client(settings: Settings) -> Any:
    """An ``MlflowClient`` on the settings' tracking URI, whose SQLite file, if missing, is created whole.

    MLflow creates a new SQLite store by running its schema migrations, which takes seconds; a process
    stopped in the middle (a SIGTERM to a DVC stage that is writing its runs) would leave a half-migrated file
    that every later run fails on ("table _alembic_tmp_... already exists"). So a missing store is built under
    a temporary name beside it and linked into place only when complete; when two processes race, the first
    link wins and the other's copy is dropped.
    """
    from mlflow import MlflowClient

    path = _sqlite_file(settings.tracking_uri)
    if path is not None and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        for stale in path.parent.glob(f".{path.name}.*.creating*"):  # left by a build that was killed
            pid = stale.name.split(".")[-2]
            if pid.isdigit() and not process_alive(int(pid)):
                stale.unlink(missing_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.creating")
        try:
            MlflowClient(tracking_uri=f"sqlite:///{tmp}").search_experiments(max_results=1)
            os.link(tmp, path)
        except FileExistsError:  # another process created it first
            pass
        finally:
            for leftover in (tmp, tmp.with_name(tmp.name + "-journal")):
                leftover.unlink(missing_ok=True)
    return MlflowClient(tracking_uri=settings.tracking_uri)


def experiment_tags(slug: str) -> dict[str, str]:
    """What an experiment says about its paper: the description MLflow shows above the runs
    (``mlflow.note.content``: title, arXiv link, headline claim, where the code is) and searchable tags
    (``paper.title``, ``paper.arxiv``, ``paperflows``). A slug that is not a registered paper (a test's
    experiment) gets the ``paperflows`` tag only."""
    from paperflows import registry

    try:
        paper = registry.paper(slug)
    except (registry.UnknownPipelineError, registry.PipelineImportError):
        return {"paperflows": "true"}
    link = f"[arXiv {paper.arxiv}](https://arxiv.org/abs/{paper.arxiv})" if paper.arxiv else "no arXiv id"
    note = (
        f"**{paper.title}** ({link})\n\nHeadline claim: {paper.claim}\n\n"
        f"Pipeline `pipelines/{slug}/`; parameters: the `{slug}` section of `params.yaml`. One parent run per "
        f"pipeline run (its name says what differs from params.yaml and how it was started), a child run per stage."
    )
    tags = {"mlflow.note.content": note, "paper.title": paper.title, "paperflows": "true"}
    if paper.arxiv:
        tags["paper.arxiv"] = paper.arxiv
    return tags


class MlflowTracker:
    """Thin wrapper over one MLflow experiment (named after the slug, described by its paper)."""

    def __init__(self, settings: Settings, slug: str):
        self.settings = settings
        self.slug = slug
        self.client = tracking_client(settings)
        self.experiment_id = self._ensure_experiment(slug)
        self._buffers: dict[str, list[Metric]] = {}

    def _ensure_experiment(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            missing = {k: v for k, v in experiment_tags(name).items() if found.tags.get(k) != v}
            for key, value in missing.items():  # an experiment made before it carried its paper, or a new title
                self.client.set_experiment_tag(found.experiment_id, key, value)
            return found.experiment_id
        location = None
        if self.settings.local_tracking:
            location = (self.settings.artifact_root / name).resolve().as_uri()
        try:
            return self.client.create_experiment(name, artifact_location=location, tags=experiment_tags(name))
        except Exception:  # created concurrently by another process
            found = self.client.get_experiment_by_name(name)
            if found is None:
                raise
            return found.experiment_id

    # runs -------------------------------------------------------------------------------------
    def start(self, run_name: str, tags: dict[str, str], parent_id: str | None = None) -> str:
        # where the run executes (a Dask worker for a fan-out item): lets a later start find runs whose
        # process died without ending them (reap_orphan_runs)
        all_tags = {
            "paperflows.slug": self.slug,
            **tags,
            "host.pid": str(os.getpid()),
            "host.name": socket.gethostname(),
        }
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
            self.client.log_batch(run_id, params=params[start : start + 100])

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
            self.client.log_batch(run_id, metrics=buf[start : start + 1000])

    # artifacts --------------------------------------------------------------------------------
    def log_artifact(self, run_id: str, path: Path, artifact_path: str | None = None) -> None:
        if path.is_dir():
            self.client.log_artifacts(run_id, str(path), artifact_path=artifact_path)
        elif path.is_file():
            self.client.log_artifact(run_id, str(path), artifact_path=artifact_path)

    def describe(self, run_id: str, markdown: str) -> None:
        """The run's description (``mlflow.note.content``), rendered as markdown on the run page."""
        self.client.set_tag(run_id, "mlflow.note.content", markdown[:5000])

    def register_model(
        self, run_id: str, name: str, folder: Path, role: str, description: str, tags: dict[str, str]
    ) -> str:
        """Log ``folder`` (weights + config.json) as an MLflow pyfunc model named ``role``, an output of the run
        (:func:`paperflows.pyfunc.log_torch_pyfunc`: it rebuilds the torch module; signature and input example
        when one can be made, else the tag ``paperflows.input_example`` says why), and register it as a new
        version of the registered model ``name``; returns the version."""
        from mlflow.tracking._tracking_service.utils import _use_tracking_uri

        from paperflows.pyfunc import log_torch_pyfunc

        logged = log_torch_pyfunc(self.client, self.experiment_id, run_id, role, folder, tags)
        try:
            self.client.create_registered_model(name, description=description)
        except Exception:  # noqa: BLE001 - it exists already (or was created concurrently)
            if self.client.get_registered_model(name) is None:
                raise
        # the registry looks the LoggedModel up through the process-wide tracking URI: the tracker's, for the call
        with _use_tracking_uri(self.settings.tracking_uri):
            version = self.client.create_model_version(
                name,
                source=logged.model_uri,
                run_id=run_id,
                tags={**tags, **logged.tags},
                description=description,
                model_id=logged.model_id,
            )
        self.prune_model_versions(name, self.settings.model_versions_kept)
        return str(version.version)

    def prune_model_versions(self, name: str, keep: int) -> list[str]:
        """Delete the versions of ``name`` older than its newest ``keep`` (``PAPERFLOWS_MODEL_VERSIONS``),
        sparing any version that carries an alias (someone points at it); the runs keep their artifacts.
        Returns the deleted versions."""
        versions = sorted(self.client.search_model_versions(f"name = '{name}'"), key=lambda v: -int(v.version))
        if len(versions) <= keep:
            return []
        aliased = {str(v) for v in (self.client.get_registered_model(name).aliases or {}).values()}
        deleted = []
        for old in versions[keep:]:
            if str(old.version) in aliased:
                continue
            self.client.delete_model_version(name, old.version)
            deleted.append(str(old.version))
        return deleted


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


def log_csv_copy(tracker: Tracker, run_id: str, parquet: Path) -> None:
    """A CSV copy of a Parquet table beside it in the run's ``tables/`` (MLflow's viewer shows CSV)."""
    import tempfile

    import pyarrow.csv as pv
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory(prefix="paperflows-csv-") as tmp:
        target = Path(tmp) / parquet.with_suffix(".csv").name
        table = pq.read_table(parquet)
        flat = table.select(
            [
                c
                for c in table.column_names
                if not (table.schema.field(c).type.num_fields or "list" in str(table.schema.field(c).type))
            ]
        )
        pv.write_csv(flat, target)
        tracker.log_artifact(run_id, target, artifact_folder(parquet))


def run_tags(settings: Settings, entry: str, source: str = "", **extra: str) -> dict[str, str]:
    """Provenance of a run, in MLflow's own fields (the UI's Source and Version columns) and ours."""
    commit, dirty = git_state(settings.root)
    tags = {
        "paperflows.entry": entry,
        "git.commit": commit + ("-dirty" if dirty else ""),
        "git.dirty": "true" if dirty else "false",
        "mlflow.source.type": "LOCAL",
        "mlflow.source.name": source or f"paperflows ({entry})",
        # CPU kernels reduce in a thread-count dependent order: a result-changing setting, recorded with the run
        "torch.threads": str(settings.torch_threads),
    }
    if commit != "unknown":
        tags["mlflow.source.git.commit"] = commit
    tags.update({k: v for k, v in extra.items() if v})
    return tags


# --------------------------------------------------------------------------------------------------
# what a run is called, and what its parent run says about the result
# --------------------------------------------------------------------------------------------------
_NAME_LIMIT = 90


def changed_params(params: dict[str, Any], base: dict[str, Any] | None) -> dict[str, Any] | None:
    """The flattened keys whose value differs from ``base`` (the params.yaml section); None when there is
    no base to compare with."""
    from paperflows.params import flatten

    if base is None:
        return None
    flat, ref = flatten(params), flatten(base)
    return {k: v for k, v in flat.items() if ref.get(k, object()) != v}


def run_name(slug: str, changed: dict[str, Any] | None, label: str = "") -> str:
    """``oc_flow · train.steps=500 · ui-steps-500``: what differs from params.yaml (``params.yaml`` when
    nothing does), then how the run was started (a Prefect flow-run name, ``dvc exp <name>``), so runs are told
    apart in MLflow's lists and in the legends of overlaid charts. ``changed=None``: nothing to compare with."""
    if changed is None:
        return " · ".join(p for p in (slug, label) if p)
    parts = [f"{k}={_short(v)}" for k, v in changed.items()]
    what, shown = "", 0
    for part in parts:
        if len(what) + len(part) > _NAME_LIMIT - len(slug) - len(label) - 12:
            break
        what, shown = f"{what}, {part}" if what else part, shown + 1
    if shown < len(parts):
        what += f" +{len(parts) - shown} more" if what else f"{len(parts)} keys changed"
    return " · ".join(p for p in (slug, what or "params.yaml", label) if p)


def _short(value: Any) -> str:
    text = str(value).replace(" ", "")
    return text if len(text) <= 24 else text[:21] + "..."


VERDICT_CODE = {"holds": 1.0, "not resolved": 0.0, "does not hold": -1.0}


def claim_metrics(report: dict[str, Any]) -> tuple[dict[str, float], dict[str, str]]:
    """The claims of a report as metrics and tags of the parent run, so runs can be sorted, filtered and
    compared by verdict: ``claims/<id>/effect|ci_low|ci_high|verdict`` (verdict 1 holds, 0 not resolved,
    -1 does not hold), ``claims/held`` and ``claims/held_fraction``; tags ``claim.<id>`` = the verdict and
    ``claims.held`` = ``2/3``."""
    claims = [c for c in report.get("claims", []) if "verdict" in c]
    metrics: dict[str, float] = {}
    tags: dict[str, str] = {}
    for claim in claims:
        key = f"claims/{claim['id']}"
        low, high = (claim.get("ci") or [None, None])[:2]
        for name, value in (("effect", claim.get("effect")), ("ci_low", low), ("ci_high", high)):
            if value is not None:
                metrics[f"{key}/{name}"] = float(value)
        metrics[f"{key}/verdict"] = VERDICT_CODE[claim["verdict"]]
        metrics[f"{key}/n"] = float(claim.get("n", 0))
        tags[f"claim.{claim['id']}"] = claim["verdict"]
    if claims:
        held = sum(c["verdict"] == "holds" for c in claims)
        metrics["claims/held"] = float(held)
        metrics["claims/held_fraction"] = held / len(claims)
        tags["claims.held"] = f"{held}/{len(claims)}"
        tags["claims.summary"] = ", ".join(f"{sum(c['verdict'] == v for c in claims)} {v}" for v in VERDICT_CODE)
    headline = [c for c in claims if c.get("headline")]
    for claim in headline:
        metrics[f"headline/{claim['id']}/verdict"] = VERDICT_CODE[claim["verdict"]]
    if headline:
        tags["headline"] = "; ".join(headline_text(c) for c in headline)
        tags["headline.verdict"] = ", ".join(c["verdict"] for c in headline)
    checks = report.get("checks", [])
    if checks:
        passed = sum(bool(c.get("passed")) for c in checks)
        metrics["checks/passed"] = float(passed)
        tags["checks.passed"] = f"{passed}/{len(checks)}"
    return metrics, tags


def headline_text(claim: dict[str, Any]) -> str:
    """``<id>: <verdict>, effect [low, high], n=<n>``: a headline claim in one line (the parent run's tag)."""
    low, high = (claim.get("ci") or [None, None])[:2]
    return (
        f"{claim['id']}: {claim['verdict']}, {_num(claim.get('effect'))} [{_num(low)}, {_num(high)}], "
        f"n={claim.get('n', 0)}"
    )


def run_description(report: dict[str, Any], changed: dict[str, Any] | None, started_by: str) -> str:
    """The parent run's description (MLflow renders it as markdown above the run)."""
    lines = [f"**{report.get('title', '')}**", "", f"Started by {started_by}."]
    if changed:
        lines += ["", "Parameters changed from params.yaml: " + ", ".join(f"`{k}={v}`" for k, v in changed.items())]
    claims = [c for c in report.get("claims", []) if "verdict" in c]
    if claims:
        lines += ["", "| claim | role | verdict | Holm | effect | 95% CI | n |", "|---|---|---|---|---|---|---|"]
        for c in sorted(claims, key=lambda c: not c.get("headline")):
            low, high = (c.get("ci") or [None, None])[:2]
            lines.append(
                f"| {c['id']} | {'headline' if c.get('headline') else 'secondary'} | {c['verdict']} | "
                f"{c.get('holm_verdict', c['verdict'])} | {_num(c.get('effect'))} | "
                f"[{_num(low)}, {_num(high)}] | {c.get('n', '')} |"
            )
    return "\n".join(lines)


def _num(value: Any) -> str:
    return "–" if value is None else f"{float(value):.3g}"


def mlflow_ui(settings: Settings) -> str:
    """The MLflow UI: the tracking server itself when it is one, else ``$PAPERFLOWS_MLFLOW_UI_URL``
    (``http://127.0.0.1:5000``, what ``mlflow ui`` serves)."""
    base = (
        settings.tracking_uri
        if settings.tracking_uri.startswith(("http://", "https://"))
        else os.environ.get("PAPERFLOWS_MLFLOW_UI_URL", "http://127.0.0.1:5000")
    )
    return base.rstrip("/")


def mlflow_run_url(settings: Settings, experiment_id: str, run_id: str) -> str:
    """Where a run opens in the MLflow UI, in its model-training view (not the GenAI overview)."""
    return f"{mlflow_ui(settings)}/#/experiments/{experiment_id}/runs/{run_id}?workflowType=machine_learning"


def mlflow_artifact_url(settings: Settings, run_id: str, path: str) -> str:
    """The raw file of a run's artifact as the MLflow UI serves it (an image renders inline)."""
    from urllib.parse import quote

    return f"{mlflow_ui(settings)}/get-artifact?path={quote(path)}&run_uuid={run_id}"


def _has_running_runs(db: Path) -> bool:
    """Whether a local MLflow database holds a RUNNING run (True when it cannot tell: the full check runs)."""
    import sqlite3

    if not db.is_file():
        return False
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as con:
            return con.execute("SELECT 1 FROM runs WHERE status = 'RUNNING' LIMIT 1").fetchone() is not None
    except sqlite3.Error:
        return True


def process_alive(pid: int) -> bool:
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
    local = _sqlite_file(settings.tracking_uri)
    if local is not None and not _has_running_runs(local):
        return []  # nothing to end: checked in the database itself, without importing MLflow (~2 s)
    from mlflow.entities import RunStatus

    client = tracking_client(settings)
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
        if (pids is not None and pid in pids) or not process_alive(pid):
            client.set_tag(run.info.run_id, "paperflows.ended_by", "reaper: its process was gone")
            client.set_terminated(run.info.run_id, status=RunStatus.to_string(RunStatus.KILLED))
            ended.append(run.info.run_id)
    return ended


# --------------------------------------------------------------------------------------------------
# the outcome of a pipeline run, on its parent run
# --------------------------------------------------------------------------------------------------
def log_outcome(
    tracker: MlflowTracker,
    run_id: str,
    pipeline: Any,
    params: Any,
    root: Path,
    report: dict[str, Any],
    changed: dict[str, Any] | None,
    started_by: str,
) -> list[str]:
    """Everything a reader of the parent run needs: the claims as metrics and tags, a description, the
    report and its tables (JSON, markdown and CSV, which MLflow previews), every figure of the run, and
    each trained model registered as ``<slug>-<role>``, an MLflow pyfunc model that rebuilds the torch module
    (``mlflow.pyfunc.load_model("models:/<slug>-<role>/<version>")``, :mod:`paperflows.pyfunc`). Returns the
    registered ``name/version``s."""
    import tempfile

    from components.io import safetensors_metadata, save_csv, save_json
    from paperflows.report import figures

    metrics, tags = claim_metrics(report)
    tracker.log_metrics(run_id, metrics)
    tracker.flush(run_id)
    tracker.set_tags(run_id, tags)
    tracker.describe(run_id, run_description(report, changed, started_by))
    for name in ("report.json", "report.md", "timings/report.json"):
        if (root / name).is_file():
            tracker.log_artifact(run_id, root / name, "tables" if "/" not in name else "tables/timings")
    with tempfile.TemporaryDirectory(prefix="paperflows-tables-") as tmp:
        claims = [
            {
                "id": c["id"],
                "headline": bool(c.get("headline")),
                "verdict": c.get("verdict"),
                "holm_verdict": c.get("holm_verdict"),
                "effect": c.get("effect"),
                "ci_low": (c.get("ci") or [None, None])[0],
                "ci_high": (c.get("ci") or [None, None])[1],
                "n": c.get("n"),
                "statistic": c.get("statistic"),
                "kind": c.get("kind"),
                "boundary": c.get("threshold"),
                "smallest_effect": c.get("smallest_effect"),
                "source": c.get("source"),
                "direction": c.get("direction"),
                "claim": c.get("claim"),
                "evidence": c.get("evidence"),
            }
            for c in report.get("claims", [])
        ]
        tables = {"results": report.get("rows", []), **report.get("extra_tables", {}), "claims": claims}
        for index, (name, rows) in enumerate(tables.items()):
            if rows:
                columns = (
                    report.get("columns")
                    if name == "results" and report.get("columns")
                    else list(dict.fromkeys(k for row in rows for k in row))
                )
                save_csv(
                    [{c: row.get(c) for c in columns} for row in rows],
                    Path(tmp) / f"{index:02d}-{_file_name(name)}.csv",
                    columns=columns,
                )
        if any(Path(tmp).iterdir()):
            tracker.log_artifact(run_id, Path(tmp), "tables")
    for figure in figures(root):  # at the path they have in the run folder: report.md's image links hold here too
        folder = figure.parent.relative_to(root).as_posix()
        tracker.log_artifact(run_id, figure, None if folder == "." else folder)
    registered = []
    for stage in pipeline.stages:
        for role, rel in getattr(stage, "models", ()):
            files = _weight_files(root / rel)
            if not files:
                continue
            name = f"{pipeline.slug}-{role}"
            with tempfile.TemporaryDirectory(prefix="paperflows-model-") as tmp:
                folder = Path(tmp) / role  # the model's artifacts/<role>/ folder
                folder.mkdir()
                described = {}
                for f in files:
                    rel_name = f.relative_to(root / rel).as_posix() if (root / rel).is_dir() else f.name
                    target = folder / rel_name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(f.read_bytes())
                    meta = safetensors_metadata(f)
                    if "model.config" in meta:
                        meta["model.config"] = json.loads(meta["model.config"])
                    described[rel_name] = meta
                save_json(
                    {
                        "registered_model": name,
                        "pipeline": pipeline.slug,
                        "stage": stage.name,
                        "output": f"outputs/{pipeline.slug}/{rel}",
                        "format": "safetensors",
                        "files": described,
                        "params": pipeline.stage_param_values(stage, params),
                        "rebuild": "each file's model.class built from its model.config, then "
                        "load_state_dict(safetensors.torch.load_file(file)); params are the stage's "
                        f"parameters (pipelines/{pipeline.slug}/params.py); mlflow.pyfunc.load_model on the "
                        "registered version does it (paperflows.pyfunc.TorchModule)",
                    },
                    folder / "config.json",
                )
                version = tracker.register_model(
                    run_id,
                    name,
                    folder,
                    role,
                    description=f"{pipeline.title}: {role} ({stage.name} stage of {pipeline.slug})",
                    tags={
                        "paperflows.slug": pipeline.slug,
                        "paperflows.stage": stage.name,
                        "claims.held": tags.get("claims.held", ""),
                    },
                )
            registered.append(f"{name}/{version}")
    if registered:
        tracker.set_tags(run_id, {"paperflows.models": ", ".join(registered)})
    return registered


def _weight_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path] if path.suffix == ".safetensors" else []
    return sorted(p for p in path.rglob("*.safetensors") if p.is_file()) if path.is_dir() else []


def _file_name(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text.strip()).strip("_") or "table"
