"""The engine: runs a paper's stages under one MLflow parent run, for the Prefect flow and for DVC alike.

* :func:`run_stage` opens the stage's MLflow child run, checks the inputs exist before the work starts,
  seeds it from its name (so ``dvc repro``, one process per stage, and the Prefect flow, every stage in one
  process, compute the same numbers), runs it with the run's torch thread count, checks every declared output
  was written afterwards, and logs metrics, plots, tables and weights;
* a fan-out stage's items write into ``<out>.partial/<item>/``; :func:`gather_items` swaps the folder in once
  every item has finished, so a stage stopped between two items never leaves a mix of items for the next stage;
* :func:`execute` runs a pipeline's stages into one output folder; given the stages DVC found up to date
  (:class:`paperflows.dvcstate.Freshness`) it skips them, as ``dvc repro`` would (:func:`skip_stage`);
* output locks keep two processes from writing one DVC workspace; run folders are new and a run's own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import os
import shutil
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from components.io import load_json, save_json
from components.seeding import torch_threads
from paperflows.contract import REPORT_FILE, Pipeline, Stage, StageContext, Tracker, covers, retired_dir, staging_dir
from paperflows.errors import (
    RunTerminated,
    StageOutputError,  # noqa: F401 - re-exported
    missing_input_error,
)
from paperflows.locks import HELD_LOCKS_ENV, hold_output_locks, output_lock  # noqa: F401 - re-exported
from paperflows.params import PipelineParams, flatten
from paperflows.report import read_report
from paperflows.seeds import seed_everything, stage_seed
from paperflows.settings import Settings

MAX_ARTIFACT_BYTES = 256 * 2**20  # larger outputs stay in DVC's cache only
MAX_PREVIEW_BYTES = 8 * 2**20  # Parquet tables up to this size also get a CSV copy MLflow can preview
FINAL_CURVES = ("loss", "val_loss", "accuracy", "val_accuracy")  # curves whose last value a stage summary shows


@contextlib.contextmanager
def terminate_as_exception() -> Iterator[None]:
    """Turn SIGTERM into :class:`RunTerminated` for the duration of a run, so that ``finally`` blocks
    close the MLflow runs (status KILLED) instead of leaving them RUNNING. Only in the main thread, and
    only where nobody else (an orchestrator) has installed a handler of its own."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return

    def _raise(signum: int, frame: Any) -> None:
        raise RunTerminated(f"terminated by signal {signum}")

    signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


# --------------------------------------------------------------------------------------------------
# running one stage
# --------------------------------------------------------------------------------------------------
def check_inputs(pipeline: Pipeline, stage: Stage, root: Path) -> None:
    for dep in stage.deps:
        target = root / dep
        if not target.exists():
            producer = next((s for s in pipeline.stages if any(covers(o, dep) for o in s.written())), None)
            raise missing_input_error(
                pipeline.slug,
                stage.name,
                target,
                producer.name if producer else "?",
                pipeline.dvc_name(producer) if producer else pipeline.slug,
            )


def begin_fan_out(pipeline: Pipeline, stage: Stage, root: Path) -> None:
    """Start a fan-out stage: inputs checked, an empty staging folder per declared output (items of an
    earlier, stopped attempt are dropped: they may have been made with other parameters)."""
    check_inputs(pipeline, stage, root)
    for rel in stage.outs:
        for leftover in (staging_dir(root, rel), retired_dir(root, rel)):
            if leftover.exists():
                shutil.rmtree(leftover)
        staging_dir(root, rel).mkdir(parents=True)


@contextlib.contextmanager
def fresh_output_folders(stage: Stage, root: Path, item: str | None = None) -> Iterator[None]:
    """A plain stage writes its declared output folders from empty, as ``dvc repro`` (which removes them first)
    and a fan-out stage (staged folders) do: files of an earlier run with other values never stay beside the new
    ones. The folders of the earlier run are set aside and come back if the stage fails; a fan-out item (its own
    staged sub-folder) is left as it is."""
    folders = [] if item is not None else [rel for rel in stage.outs if rel.endswith("/")]
    for rel in folders:  # what a process killed in between left: the folder set aside comes back
        retired = retired_dir(root, rel)
        if retired.exists() and not (root / rel).exists():
            retired.rename(root / rel)
        elif retired.exists():
            shutil.rmtree(retired)
    folders = [rel for rel in folders if (root / rel).is_dir()]
    for rel in folders:
        (root / rel).rename(retired_dir(root, rel))
    try:
        yield
    except BaseException:
        for rel in folders:
            if (root / rel).exists():
                shutil.rmtree(root / rel)
            retired_dir(root, rel).rename(root / rel)
        raise
    for rel in folders:
        shutil.rmtree(retired_dir(root, rel))


def check_outputs(pipeline: Pipeline, stage: Stage, root: Path, item: str | None = None) -> None:
    if item is not None:
        missing = [f"{p}{item}/" for p in stage.outs if not any((staging_dir(root, p) / item).glob("*"))]
    else:
        missing = [p for p in stage.written() if not (root / p).exists()]
    if missing:
        raise StageOutputError(
            f"{pipeline.slug}.{stage.name}: finished without writing declared output(s) {missing} under {root}"
        )


def content_hash(path: Path) -> str:
    """sha256 of a file, or of a folder's relative names and contents (first 16 hex digits)."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        digest.update(str(f.relative_to(path) if path.is_dir() else f.name).encode())
        with open(f, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:16]


def _numeric_leaves(tree: Any, prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.update(_numeric_leaves(v, f"{prefix}{k}/" if prefix or k else ""))
    elif isinstance(tree, (int, float)) and not isinstance(tree, bool):
        out[prefix.rstrip("/")] = float(tree)
    return out


def run_stage(
    ctx: StageContext, parent_run_id: str | None = None, entry_tags: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run one stage with its MLflow child run; returns ``{"stage", "seconds", "metrics"}``.

    A fan-out stage called without an item runs all its items here, one after the other.
    """
    pipeline, stage, root = ctx.pipeline, ctx.stage, ctx.root
    if stage.fan_out is not None and ctx.item is None:
        begin_fan_out(pipeline, stage, root)
        results = [
            run_stage(dataclasses.replace(ctx, item=item), parent_run_id, entry_tags)
            for item in pipeline.items(stage, ctx.params)
        ]
        return gather_items(ctx, results)
    check_inputs(pipeline, stage, root)
    tracker = ctx.tracker
    child = None
    label = stage.name if ctx.item is None else f"{stage.name}[{ctx.item}]"
    if tracker is not None:
        # where the stage itself ran (a Dask worker for a fan-out item), not where the run was started
        tags = {
            "paperflows.stage": stage.name,
            "dvc.stage": pipeline.dvc_name(stage),
            **(entry_tags or {}),
            **({"paperflows.item": ctx.item} if ctx.item is not None else {}),
            **{f"deps.{dep.rstrip('/')}": content_hash(root / dep) for dep in stage.deps},
        }
        child = tracker.start(f"{pipeline.slug}.{label}", tags, parent_id=parent_run_id)
        ctx.run_ids = (child,) + ((parent_run_id,) if parent_run_id else ())
        tracker.log_params(child, pipeline.stage_param_values(stage, ctx.params))
    # every stage starts from the same RNG state whatever ran before it in this process, so a stage run
    # by `dvc repro` (own process) and by the Prefect flow (after other stages) computes the same thing
    seed_everything(stage_seed(pipeline.slug, label))
    ctx.latest, ctx.seed_runs = {}, {}  # this call's own curves and seed runs (fan-out items are copies of one context)
    started = time.perf_counter()
    ok = killed = False
    metrics: dict[str, float] = {}
    try:
        # CPU kernels reduce in a thread-count dependent order: the same count gives the same bits
        with torch_threads(ctx.threads), fresh_output_folders(stage, root, ctx.item):
            stage.run(ctx)
            check_outputs(pipeline, stage, root, ctx.item)
        for rel in stage.metrics:
            if rel.endswith(".json"):
                metrics.update(_numeric_leaves(load_json(root / rel)))
        ok = True
    except BaseException as err:
        killed = not isinstance(err, Exception)  # a signal (SIGTERM, Ctrl-C, Prefect's termination)
        if tracker is not None and child is not None:
            tracker.set_tags(child, {"paperflows.error": traceback.format_exc(limit=3)[-4000:]})
        raise
    finally:
        seconds = time.perf_counter() - started
        if tracker is not None and child is not None:
            tracker.log_metrics(child, {"stage_seconds": seconds, **(metrics if ok else {})})
            if ok:
                _log_stage_files(ctx, child)
            ctx.end_seed_runs(ok, killed=killed)
            tracker.end(child, ok, killed=killed)
    if tracker is not None and parent_run_id:
        if metrics:
            tracker.log_metrics(parent_run_id, {f"{label}/{k}": v for k, v in metrics.items()})
        # curves logged to the parent run too: written now, since this process may be a Dask worker
        # that never sees the parent run end
        tracker.flush(parent_run_id)
    final = {k: v for k, v in ctx.latest.items() if k.rsplit("/", 1)[-1] in FINAL_CURVES}
    return {
        "stage": stage.name,
        "item": ctx.item,
        "seconds": seconds,
        "metrics": metrics,
        "run_id": child,
        "final": final,
    }


def gather_items(ctx: StageContext, results: list[dict[str, Any]]) -> dict[str, Any]:
    """Close a fan-out stage once all its items ran (in any order, anywhere): the staged folders replace
    the declared ones, outputs checked, one summary."""
    root = ctx.root
    items = ctx.pipeline.items(ctx.stage, ctx.params)
    for rel in ctx.stage.outs:
        staged, final, retired = staging_dir(root, rel), root / rel, retired_dir(root, rel)
        present = sorted(p.name for p in staged.iterdir()) if staged.is_dir() else []
        if present != sorted(items):
            raise StageOutputError(
                f"{ctx.pipeline.slug}.{ctx.stage.name}: staged {rel} holds items {present}, "
                f"expected {sorted(items)}; the stage must be rerun as a whole"
            )
        if final.exists():
            final.rename(retired)
        staged.rename(final)
        if retired.exists():
            shutil.rmtree(retired)
    check_outputs(ctx.pipeline, ctx.stage, root)
    return {
        "stage": ctx.stage.name,
        "item": None,
        "seconds": sum(r["seconds"] for r in results),
        "metrics": {},
        "items": results,
    }


def _log_stage_files(ctx: StageContext, run_id: str) -> None:
    """Metric files, plots, tables and weights of a finished stage, as artifacts of its run."""
    from paperflows.tracking import artifact_folder, log_csv_copy  # MLflow loads only where runs are written

    tracker, root = ctx.tracker, ctx.root
    for rel in ctx.stage.metrics:
        tracker.log_artifact(run_id, root / rel, "metrics")
    for rel in ctx.stage.timings:
        tracker.log_artifact(run_id, root / rel, "timings")
        if rel.endswith(".json"):
            tracker.log_metrics(run_id, {f"timings/{k}": v for k, v in _numeric_leaves(load_json(root / rel)).items()})
    for plot in ctx.stage.plots:
        tracker.log_artifact(run_id, root / plot.path, "plots")
    for rel in ctx.stage.outs:
        path = root / rel if ctx.item is None else staging_dir(root, rel) / ctx.item
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            if f.stat().st_size <= MAX_ARTIFACT_BYTES:
                tracker.log_artifact(run_id, f, artifact_folder(f))
            if f.suffix == ".parquet" and f.stat().st_size <= MAX_PREVIEW_BYTES:
                log_csv_copy(tracker, run_id, f)  # MLflow previews CSV, not Parquet


# --------------------------------------------------------------------------------------------------
# running a whole pipeline
# --------------------------------------------------------------------------------------------------
def new_run_folder(settings: Settings, slug: str, run_name: str | None = None) -> Path:
    """A new, empty folder of its own under ``runs/<slug>/`` (created here, so two runs started in the same
    second never share one); a run folder needs no lock."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    name = f"{stamp}-{run_name}" if run_name else stamp
    settings.runs(slug).mkdir(parents=True, exist_ok=True)
    for suffix in itertools.count():
        folder = settings.runs(slug) / (f"{name}-{suffix}" if suffix else name)
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder
    raise AssertionError("unreachable")


@dataclass
class RunSummary:
    slug: str
    root: Path
    run_id: str | None
    seconds: float
    stages: list[dict[str, Any]]
    report: dict[str, Any]
    workspace: bool


StageRunner = Callable[[StageContext, str | None, dict[str, str]], dict[str, Any]]


def skip_stage(
    ctx: StageContext, parent_run_id: str | None = None, entry_tags: dict[str, str] | None = None
) -> dict[str, Any]:
    """A stage that DVC found up to date: not run; its MLflow child run says so and carries the ``dvc.lock``
    hashes of the results it stands for. Returns the summary a run stage returns, with ``skipped``."""
    from paperflows.dvcstate import lock_hashes

    pipeline, stage = ctx.pipeline, ctx.stage
    child = None
    if ctx.tracker is not None:
        tags = {
            "paperflows.stage": stage.name,
            "dvc.stage": pipeline.dvc_name(stage),
            **(entry_tags or {}),
            "paperflows.skipped": "up to date in dvc.lock",
            **lock_hashes(ctx.project or ctx.root, pipeline.dvc_name(stage)),
        }
        child = ctx.tracker.start(f"{pipeline.slug}.{stage.name}", tags, parent_id=parent_run_id)
        ctx.tracker.end(child, True)
    return {
        "stage": stage.name,
        "item": None,
        "seconds": 0.0,
        "metrics": {},
        "run_id": child,
        "final": {},
        "skipped": True,
    }


def execute(
    pipeline: Pipeline,
    params: PipelineParams,
    settings: Settings,
    root: Path,
    *,
    entry: str,
    tags: dict[str, str] | None = None,
    tracker: Tracker | None = None,
    stage_runner: StageRunner = run_stage,
    progress: bool = True,
    workspace: bool = False,
    freshness: Any = None,
    skip_runner: StageRunner = skip_stage,
) -> RunSummary:
    """Run the stages of ``pipeline`` into ``root`` under one MLflow parent run.

    With ``freshness`` (a :class:`~paperflows.dvcstate.Freshness`: a workspace run whose stages DVC found up
    to date), a fresh stage is skipped (``skip_runner``) unless a stage before it ran and changed its inputs;
    the summary lists which stages ran. SIGTERM (from a terminal, a cancelled deployment run, a stopped
    worker) ends the run's MLflow runs as KILLED instead of leaving them RUNNING.
    """
    with terminate_as_exception():
        return _execute(
            pipeline,
            params,
            settings,
            root,
            entry=entry,
            tags=tags,
            tracker=tracker,
            stage_runner=stage_runner,
            progress=progress,
            workspace=workspace,
            freshness=freshness,
            skip_runner=skip_runner,
        )


def _execute(
    pipeline: Pipeline,
    params: PipelineParams,
    settings: Settings,
    root: Path,
    *,
    entry: str,
    tags: dict[str, str] | None,
    tracker: Tracker | None,
    stage_runner: StageRunner,
    progress: bool,
    workspace: bool,
    freshness: Any,
    skip_runner: StageRunner,
) -> RunSummary:
    started = time.perf_counter()
    root.mkdir(parents=True, exist_ok=True)
    parent = None
    entry_tags = {"paperflows.entry": entry}
    ok = killed = False
    stages: list[dict[str, Any]] = []
    dumped = params.model_dump(mode="json")
    changed: dict[str, Any] | None = None
    try:
        if tracker is not None:
            from paperflows.params import file_values
            from paperflows.tracking import changed_params, run_name

            base = file_values(type(params), pipeline.slug, settings.params_file)
            changed = changed_params(dumped, base.model_dump(mode="json") if base is not None else None)
            name = run_name(pipeline.slug, changed, (tags or {}).get("prefect.flow_run_name", ""))
            parent = tracker.start(
                name,
                {
                    **(tags or {}),
                    "paperflows.output_root": _shown_path(root, settings),
                    "paperflows.changed": "(no params.yaml section)"
                    if changed is None
                    else ", ".join(changed) or "(none)",
                },
            )
            tracker.log_params(parent, flatten(dumped))
        record = run_record(pipeline.slug, entry, params, parent, settings)
        before = _last_full_run(root / "run.json", record.get("params_digest"))
        save_json(record, root / "run.json")
        ran = False
        startup = _since_command_start()
        if startup is not None:  # what the user waited before the first stage: imports, validation, Prefect
            record["startup_seconds"] = round(startup, 2)
            if tracker is not None and parent is not None:
                tracker.log_metrics(parent, {"startup_seconds": startup})
        for stage in pipeline.stages:
            ctx = StageContext(
                pipeline=pipeline,
                stage=stage,
                params=params,
                root=root,
                tracker=tracker,
                progress=progress,
                threads=settings.torch_threads,
                project=settings.root,
                cache_dir=settings.cache_dir,
            )
            if freshness is not None and freshness.skips(pipeline.dvc_name(stage), upstream_ran=ran):
                stages.append(skip_runner(ctx, parent, {**entry_tags, **(tags or {})}))
                continue
            stages.append(stage_runner(ctx, parent, {**entry_tags, **(tags or {})}))
            ran = True
            if freshness is not None:
                freshness.invalidate()
        report = read_report(root / REPORT_FILE)
        ok = True
        wall = round(time.perf_counter() - started, 1)
        skipped = [r["stage"] for r in stages if r.get("skipped")]
        finished = {"finished": datetime.now(UTC).isoformat(), "seconds_this_run": wall}
        if not skipped:
            finished["seconds"] = wall
        else:  # a partial run: the cost of the results stays the last full run's, when it is known
            finished["stages_skipped"] = skipped
            if before is not None:
                finished["seconds"] = before
        save_json({**record, **finished}, root / "run.json")
    except BaseException as err:
        killed = not isinstance(err, Exception)  # a signal, not a failure of the work
        raise
    finally:
        seconds = time.perf_counter() - started
        if tracker is not None and parent is not None:
            tracker.log_metrics(parent, {"pipeline_seconds": seconds})
            if ok:
                from paperflows.tracking import log_outcome

                log_outcome(
                    tracker,
                    parent,
                    pipeline,
                    params,
                    root,
                    report,
                    changed,
                    f"`paperflows run` through Prefect ({entry})",
                )
            tracker.end(parent, ok, killed=killed)
    return RunSummary(
        slug=pipeline.slug, root=root, run_id=parent, seconds=seconds, stages=stages, report=report, workspace=workspace
    )


def _since_command_start() -> float | None:
    """Seconds since the ``paperflows run`` command began (None outside one, or for its later pipelines)."""
    raw = os.environ.pop("PAPERFLOWS_COMMAND_STARTED", None)
    try:
        return time.time() - float(raw) if raw else None
    except ValueError:
        return None


def params_digest(params: PipelineParams) -> str:
    """A short digest of the resolved parameters: two runs with the same digest ran the same values."""
    text = json.dumps(params.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _last_full_run(path: Path, digest: object) -> float | None:
    """The wall time of the last run that ran every stage, from the run record at ``path`` of the same parameters
    (None when there is none, it is unreadable, or its parameters differ): the cost a partial rerun keeps."""
    try:
        previous = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(previous, dict):
        return None
    seconds = previous.get("seconds")
    if previous.get("params_digest") != digest or not isinstance(seconds, (int, float)):
        return None
    return float(seconds)


def run_record(
    slug: str, entry: str, params: PipelineParams, mlflow_run_id: str | None, settings: Settings
) -> dict[str, Any]:
    """What ``run.json`` holds from the start of a run: the parameters (and their digest and scale), how it
    was started, the commit it ran, the torch thread count (a result-changing setting) and the MLflow run;
    the engine adds ``seconds`` and ``finished`` when the run completes."""
    from paperflows.sweep import current_point
    from paperflows.tracking import git_commit

    return {
        "slug": slug,
        "entry": entry,
        "params": params.model_dump(mode="json"),
        "scale": getattr(params, "scale", "cpu"),
        "params_digest": params_digest(params),
        "commit": git_commit(settings.root),
        "torch_threads": settings.torch_threads,
        "mlflow_run_id": mlflow_run_id,
        "started": datetime.now(UTC).isoformat(),
        **({"sweep": point} if (point := current_point()) is not None else {}),
    }


def _shown_path(root: Path, settings: Settings) -> str:
    """A run folder relative to the project (the checkout can move), absolute when it lies outside."""
    try:
        return root.resolve().relative_to(settings.root.resolve()).as_posix()
    except ValueError:
        return str(root)


def summary_json(summary: RunSummary) -> str:
    return json.dumps(
        {
            "slug": summary.slug,
            "root": str(summary.root),
            "mlflow_run_id": summary.run_id,
            "seconds": round(summary.seconds, 2),
            "workspace": summary.workspace,
            "claims": summary.report.get("claims", []),
        },
        indent=2,
    )
