"""One Prefect flow per paper, built from the pipeline declarations.

The flow's single parameter is the paper's pydantic params model, so a deployment renders it as a
form (field labels, descriptions, bounds, enums) and Prefect's server checks edited values against its schema
before a run exists. The model itself (with its cross-field rules, which no schema states) is applied when the run
starts: a refused value ends the run Failed with one line naming the key (:func:`checked_params`).
Each stage becomes a task (no result caching: DVC is the cache). A run whose parameters equal the
``params.yaml`` section writes into the DVC workspace (``outputs/<slug>``) and then records the outputs of
the stages it ran in ``dvc.lock`` (``dvc commit``), so a following ``dvc repro`` has nothing to redo; any
other run writes into its own ``runs/<slug>/<run>/`` folder and never touches what DVC tracks. Started by
``paperflows run`` (which asks DVC once which stages are stale), a workspace run runs only the stale
stages and those whose inputs they changed, as ``dvc repro`` would: a fresh stage's task ends ``Cached``
and its MLflow child run is tagged ``paperflows.skipped`` with its ``dvc.lock`` hashes; ``--force`` and
run folders run every stage.

Scale-out is chosen by settings only (:mod:`paperflows.settings`):

* ``PAPERFLOWS_TASK_RUNNER=sequential`` (default): the items of a fan-out stage run one after the
  other in the flow process.
* ``PAPERFLOWS_TASK_RUNNER=dask``: the flow gets a prefect-dask ``DaskTaskRunner`` (an existing
  scheduler at ``PAPERFLOWS_DASK_ADDRESS``, else a LocalCluster of 1-thread worker processes) and
  submits the items of a fan-out stage together, waits for all of them, then closes the stage with
  :func:`paperflows.engine.gather_items`. Ordinary stages still run in the flow process. Items are
  computed as in the sequential run: each is seeded by its own name, runs with the flow's torch thread
  count (``ctx.threads``) and logs through a tracker that builds its MLflow client on the worker. The
  workers report to the Prefect API, so ``dask`` needs a Prefect server (``PREFECT_API_URL``); with the
  embedded server each worker would start a server of its own on the same SQLite file.
* The GPU slot: each call of a stage declared ``gpu=True`` (each item of a fan-out stage) holds one slot
  of the Prefect global concurrency limit ``PAPERFLOWS_GPU_LIMIT`` (default ``gpu``) while it runs, when
  the flow talks to a Prefect server that has that limit (``prefect gcl create gpu --limit <GPUs>``);
  without a server, or without the limit, it is a no-op.

Import this module only after :func:`paperflows.settings.pin_environment` (Prefect reads its settings
at import time); ``python -m paperflows`` does that.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from paperflows import provenance, registry
from paperflows.contract import REPORT_FILE, Pipeline, StageContext
from paperflows.engine import (
    RunSummary,
    begin_fan_out,
    execute,
    gather_items,
    new_run_folder,
    output_lock,
    run_stage,
    skip_stage,
)
from paperflows.inline_figures import embed_figures
from paperflows.params import (
    ParamsError,
    PipelineParams,
    at_file_values,
    check_data_files,
    file_values,
    merge_given,
    validate,
)
from paperflows.settings import Settings, SettingsError, first_prefect_start, load_settings, pin_environment
from paperflows.sweep import point_tags

pin_environment()

from prefect import flow, get_run_logger, task  # noqa: E402  (after the environment is pinned)
from prefect.artifacts import create_markdown_artifact, create_table_artifact  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402
from prefect.client.orchestration import get_client  # noqa: E402
from prefect.concurrency.sync import concurrency  # noqa: E402
from prefect.context import FlowRunContext  # noqa: E402
from prefect.exceptions import ObjectNotFound  # noqa: E402
from prefect.futures import wait  # noqa: E402
from prefect.runtime import deployment, flow_run  # noqa: E402
from prefect.settings import get_current_settings  # noqa: E402
from prefect.states import Completed, Failed  # noqa: E402
from prefect.utilities.annotations import quote  # noqa: E402

from paperflows.tracking import MlflowTracker, claim_metrics, mlflow_run_url, run_tags  # noqa: E402


# --------------------------------------------------------------------------------------------------
# scale-out: task runner, GPU slot, a tracker that can travel to a worker
# --------------------------------------------------------------------------------------------------
def prefect_api_url() -> str | None:
    """The Prefect server this process talks to (env or profile); None for the embedded server."""
    return get_current_settings().api.url or None


def prefect_run_url(flow_run_id: str) -> str:
    """The flow run's page in the Prefect UI (``PREFECT_UI_URL``, else the server's address without
    ``/api``); empty for the embedded server, whose UI does not outlive the run."""
    current = get_current_settings()
    base = current.ui_url or (current.api.url.removesuffix("/").removesuffix("/api") if current.api.url else "")
    return f"{base.rstrip('/')}/runs/flow-run/{flow_run_id}" if base and flow_run_id else ""


def make_task_runner(settings: Settings) -> Any:
    """The flow's task runner from settings; None keeps Prefect's default (items run sequentially)."""
    if settings.task_runner == "sequential":
        return None
    if not prefect_api_url():
        raise SettingsError(
            "PAPERFLOWS_TASK_RUNNER=dask needs a Prefect server: set PREFECT_API_URL (e.g. "
            "http://127.0.0.1:4200/api after `prefect server start`). Dask workers are other processes; "
            "with the embedded server each of them would start its own server on the same database."
        )
    from prefect_dask import DaskTaskRunner

    if settings.dask_address:
        return DaskTaskRunner(address=settings.dask_address)
    cluster: dict[str, Any] = {"processes": True, "threads_per_worker": 1}
    if settings.dask_workers:
        cluster["n_workers"] = settings.dask_workers
    return DaskTaskRunner(cluster_class="distributed.LocalCluster", cluster_kwargs=cluster)


def runs_items_in_parallel() -> bool:
    """True when the running flow's task runner executes submitted tasks in other processes.

    Only then are items submitted together: torch's thread count and RNG seeds are process-wide, so
    items sharing one process through threads would disturb each other's numbers.
    """
    context = FlowRunContext.get()
    dask = sys.modules.get("prefect_dask")  # a Dask task runner was built from it: not imported, none is in use
    return context is not None and dask is not None and isinstance(context.task_runner, dask.DaskTaskRunner)


def gpu_slot(settings: Settings) -> str | None:
    """The name of the GPU slot's global concurrency limit, or None where there is nothing to hold.

    Held only against a Prefect server that has the (active) limit; the embedded server runs one
    process, and a server without the limit means the user has not asked for one.
    """
    if not prefect_api_url():
        return None
    with get_client(sync_client=True) as client:
        try:
            limit = client.read_global_concurrency_limit_by_name(settings.gpu_limit)
        except ObjectNotFound:
            get_run_logger().info(
                "no global concurrency limit '%s' on the Prefect server: training stages "
                "run without a GPU slot (create one: prefect gcl create %s --limit <GPUs>)",
                settings.gpu_limit,
                settings.gpu_limit,
            )
            return None
    return settings.gpu_limit if limit.active else None


def run_stage_task(
    ctx: StageContext, parent: str | None, entry_tags: dict[str, str], slot: str | None = None
) -> dict[str, Any]:
    """The body of every stage task: one stage, or one item, inside the GPU slot when it trains; its
    summary (time, final losses, key metrics, the MLflow run) goes to the task's Prefect log."""
    held = concurrency(slot, occupy=1) if slot and ctx.stage.gpu else contextlib.nullcontext()
    with held:
        result = run_stage(ctx, parent, entry_tags)
    url = None
    if ctx.tracker is not None and result.get("run_id"):
        url = mlflow_run_url(ctx.tracker.settings, ctx.tracker.experiment_id, result["run_id"])
    get_run_logger().info("%s", stage_summary(ctx.pipeline.slug, result, url))
    return result


def skipped_stage_task(label: str) -> Any:
    """The task run of a stage DVC found up to date: it ends ``Cached`` (a Completed state), without running."""
    get_run_logger().info("%s: up to date in dvc.lock; not run", label)
    return Completed(message="up to date in dvc.lock (DVC is the cache)", name="Cached")


def run_freshness(pipeline: Pipeline, settings: Settings) -> Any:
    """The stages of this workspace run that ``paperflows run`` found up to date (its one ``dvc status``,
    handed over in the environment); None when none was handed over (a deployment run, ``--force``)."""
    import json

    from paperflows.dvcstate import Freshness
    from paperflows.launcher import FRESH_ENV

    try:
        handed = json.loads(os.environ.get(FRESH_ENV) or "{}")
    except json.JSONDecodeError:
        return None
    names = handed.get(pipeline.slug) if isinstance(handed, dict) else None
    return Freshness(settings.root, set(names)) if names else None


SUMMARY_METRICS = 8  # key metrics shown in a stage's log line; every one of them is in MLflow


def stage_summary(slug: str, result: dict[str, Any], url: str | None) -> str:
    """One log line per stage call: ``knots.merge: done in 4.1 s; final loss ...; metrics ...; MLflow: <url>``."""
    label = result["stage"] + (f"[{result['item']}]" if result.get("item") else "")
    parts = [f"{slug}.{label}: done in {result['seconds']:.1f} s"]
    final = result.get("final") or {}
    if final:
        shown = list(final.items())[:SUMMARY_METRICS]
        parts.append(
            "final "
            + ", ".join(f"{k} {v:.4g}" for k, v in shown)
            + (f" (+{len(final) - len(shown)} more)" if len(final) > len(shown) else "")
        )
    metrics = result.get("metrics") or {}
    if metrics:
        shown = list(metrics.items())[:SUMMARY_METRICS]
        parts.append(
            "metrics "
            + ", ".join(f"{k}={v:.4g}" for k, v in shown)
            + (f" (+{len(metrics) - len(shown)} more)" if len(metrics) > len(shown) else "")
        )
    if url:
        parts.append(f"MLflow run: {url}")
    return "; ".join(parts)


class portable_quote(quote):
    """``quote`` that survives pickling, for arguments sent to a Dask worker.

    Prefect 3.9.1's annotations come back from pickle as ``quote((value,))`` (tuple's own reduce feeds
    the one-element tuple to ``__new__``), so a worker would receive a tuple instead of the StageContext
    (the problem of prefect-dask issue #43). Reducing to the wrapped value keeps the annotation intact.
    """

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        return type(self), (self.unwrap(),)


class PortableTracker:
    """The run's :class:`~paperflows.tracking.MlflowTracker` as a value that can be sent to a Dask worker.

    A copy keeps only the settings and the slug; the tracker (its MLflow client and its buffered metric
    points) is built on first use in the process that holds the copy, from the flow's settings, so every
    item logs to the flow's tracking store.
    """

    def __init__(self, settings: Settings, slug: str) -> None:
        self.settings, self.slug = settings, slug
        self._tracker: MlflowTracker | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings, "slug": self.slug}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["settings"], state["slug"])

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._tracker is None:
            self._tracker = MlflowTracker(self.settings, self.slug)
        return getattr(self._tracker, name)


# --------------------------------------------------------------------------------------------------
# the embedded Prefect database: created once, and no run of a killed process left RUNNING
# --------------------------------------------------------------------------------------------------
PROCESS_TAG = "paperflows.process"  # flow-run tag prefix: ``paperflows.process:<host>:<pid>`` of the running process


def prepare_prefect_database() -> None:
    """Start this process's embedded Prefect API now when its database is new, under the lock of
    :func:`~paperflows.settings.first_prefect_start`; later starts pass straight through."""
    if prefect_api_url():
        return  # a real server owns its database
    home = Path(os.environ.get("PREFECT_HOME") or load_settings().prefect_home)
    with first_prefect_start(home) as first:
        if first:
            with get_client(sync_client=True) as client:
                client.hello()  # starts the embedded server, which creates and migrates the database


def _process_tag() -> str:
    import socket

    return f"{PROCESS_TAG}:{socket.gethostname()}:{os.getpid()}"


def tag_flow_run_with_process() -> None:
    """Mark the running flow run with this host and process, so a later start can tell it was orphaned."""
    flow_run_id = flow_run.get_id()
    if not flow_run_id:
        return
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(flow_run_id)
        client.update_flow_run(flow_run_id, tags=sorted({*(run.tags or []), _process_tag()}))


def reap_orphan_prefect_runs() -> int:
    """End as Crashed the RUNNING or PENDING flow runs (and their task runs) of this host whose process is
    gone: a SIGKILL of every process leaves them running forever otherwise. Returns how many flow runs."""
    import socket

    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterId,
        FlowRunFilterState,
        FlowRunFilterStateType,
        TaskRunFilter,
        TaskRunFilterState,
        TaskRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.states import Crashed

    from paperflows.tracking import process_alive

    active = [StateType.RUNNING, StateType.PENDING]
    prefix = f"{PROCESS_TAG}:{socket.gethostname()}:"
    ended = 0
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=active)))
        )
        for run in runs:
            pids = [
                int(t[len(prefix) :]) for t in run.tags or [] if t.startswith(prefix) and t[len(prefix) :].isdigit()
            ]
            if not pids or process_alive(pids[0]):
                continue
            message = "its process was gone at the next start (killed outright)"
            tasks = client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])),
                task_run_filter=TaskRunFilter(state=TaskRunFilterState(type=TaskRunFilterStateType(any_=active))),
            )
            for task_run in tasks:
                client.set_task_run_state(task_run.id, Crashed(message=message), force=True)
            client.set_flow_run_state(run.id, Crashed(message=message), force=True)
            ended += 1
    return ended


# --------------------------------------------------------------------------------------------------
# one run of a paper
# --------------------------------------------------------------------------------------------------
def workspace_params(pipeline: Pipeline, settings: Settings) -> PipelineParams | None:
    return file_values(pipeline.params_model, pipeline.slug, settings.params_file)


def resolve_root(
    pipeline: Pipeline, params: PipelineParams, settings: Settings, run_name: str | None
) -> tuple[Path, bool]:
    """(output folder, is-the-DVC-workspace) for a run with these parameters."""
    if at_file_values(params, pipeline.slug, settings.params_file):
        return settings.workspace(pipeline.slug), True
    return new_run_folder(settings, pipeline.slug, run_name), False


def commit_to_dvc(pipeline: Pipeline, settings: Settings, ran: list[str] | None = None) -> str:
    """Record the outputs of the stages a workspace run ran (``ran``: stage names; None: all) in dvc.lock and
    the DVC cache; returns a one-line status."""
    if not (settings.root / ".dvc").is_dir() or not settings.dvc_file.is_file():
        return "no DVC repository here; outputs not committed to DVC"
    names = [pipeline.dvc_name(s) for s in pipeline.stages if ran is None or s.name in ran]
    if not names:
        return "every stage was up to date; dvc.lock unchanged"
    lock_dir = settings.root / ".paperflows" / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / "dvc-commit.lock", "w") as handle:  # pipelines run in parallel commit one at a time
        fcntl.flock(handle, fcntl.LOCK_EX)
        proc = subprocess.run(
            [sys.executable, "-m", "paperflows.dvccommit", *names],  # `dvc commit --force`, one write of dvc.lock
            cwd=settings.root,
            capture_output=True,
            text=True,
            check=False,
        )
    if proc.returncode != 0:
        return f"dvc commit failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[-500:]}"
    return f"recorded {len(names)} stages in dvc.lock"


def _artifact_key(slug: str, suffix: str) -> str:
    return f"{slug.replace('_', '-')}-{suffix}"


def publish_report(pipeline: Pipeline, summary: RunSummary, settings: Settings, experiment_id: str | None) -> None:
    """Two artifacts of the flow run: the paper-shaped table with the claims in its description, and the
    report as markdown with its figures and the run's links. The figures are inside the artifact (``data:`` URIs,
    scaled down past a size budget: :mod:`paperflows.inline_figures`), so the Prefect UI shows them with no MLflow
    UI running."""
    report = summary.report
    rows = [{c: row.get(c) for c in report["columns"]} for row in report["rows"]]
    claims = "\n".join(f"- **{c['verdict']}** `{c['id']}`: {c['claim']} — {c['evidence']}" for c in report["claims"])
    create_table_artifact(
        table=rows, key=_artifact_key(pipeline.slug, "results"), description=f"{report['title']}\n\n{claims}"
    )
    md_path = summary.root / Path(REPORT_FILE).with_suffix(".md")
    if not md_path.is_file():
        return
    text = md_path.read_text()
    links = [f"Run folder: `{summary.root}`"]
    elsewhere = f"see `{summary.root}`"
    if summary.run_id and experiment_id:
        links.insert(0, f"MLflow run: {mlflow_run_url(settings, experiment_id, summary.run_id)}")
        elsewhere += " or the MLflow run's plots"
    # report.md links its figures relative to the run folder: they travel inside the artifact
    text = embed_figures(text, summary.root, elsewhere=elsewhere).text
    create_markdown_artifact(
        markdown="\n\n".join(["  \n".join(links), text]),
        key=_artifact_key(pipeline.slug, "report"),
        description=f"{pipeline.title}: table, claims and figures ({claims_held(report)} claims hold)",
    )


def claims_held(report: dict[str, Any]) -> str:
    """``held/total`` as the parent run's ``claims.held`` tag counts them (one count, in tracking)."""
    return claim_metrics(report)[1].get("claims.held", "0/0")


def run_pipeline_in_flow(pipeline: Pipeline, params: PipelineParams) -> dict[str, Any]:
    settings = load_settings()
    # a partial value (`prefect deployment run --param 'params={"train": {"steps": 500}}'`) is merged into the
    # params.yaml values, as `paperflows run --set` merges: only what was given differs from params.yaml
    base = workspace_params(pipeline, settings)
    if base is not None:
        params = merge_given(params, base, pipeline.slug)
    # data files named by the params are read before anything else happens (no folder, no MLflow run)
    check_data_files(params, settings.root, pipeline.slug)
    progress = os.environ.get("PAPERFLOWS_PROGRESS", "1") != "0"
    logger = get_run_logger()
    tag_flow_run_with_process()
    root, workspace = resolve_root(pipeline, params, settings, flow_run.get_name())
    logger.info(
        "%s: writing to %s (%s)",
        pipeline.slug,
        root,
        "DVC workspace" if workspace else "run folder; DVC outputs untouched",
    )
    tracker = PortableTracker(settings, pipeline.slug)
    parallel = runs_items_in_parallel()
    slot = gpu_slot(settings) if any(s.gpu for s in pipeline.stages) else None
    if parallel or slot:
        logger.info(
            "%s: fan-out items %s; GPU slot %s",
            pipeline.slug,
            "submitted together to Dask" if parallel else "run one after the other",
            f"'{slot}' held by training stages" if slot else "not used",
        )
    tags = run_tags(
        settings,
        "prefect",
        source=f"paperflows/flows.py:{pipeline.slug}_flow",
        **{
            "prefect.flow_run_id": str(flow_run.get_id() or ""),
            "prefect.flow_run_name": str(flow_run.get_name() or ""),
            "prefect.deployment_id": str(deployment.get_id() or ""),
            "prefect.flow_run_url": prefect_run_url(str(flow_run.get_id() or "")),
            **point_tags(),  # a point of a sweep: grouped by the sweep's id
        },
    )
    stage_tasks = {
        s.name: task(
            run_stage_task,
            name=f"{pipeline.slug}.{s.name}",
            task_run_name=f"{pipeline.slug}.{s.name}",
            cache_policy=NO_CACHE,
        )
        for s in pipeline.stages
    }
    skip_tasks = {
        s.name: task(
            skipped_stage_task,
            name=f"{pipeline.slug}.{s.name}",
            task_run_name=f"{pipeline.slug}.{s.name}",
            cache_policy=NO_CACHE,
        )
        for s in pipeline.stages
    }
    freshness = run_freshness(pipeline, settings) if workspace else None

    def skipper(ctx: StageContext, parent: str | None, entry_tags: dict[str, str]) -> dict[str, Any]:
        result = skip_stage(ctx, parent, entry_tags)  # the MLflow child run, tagged with its dvc.lock hashes
        skip_tasks[ctx.stage.name](f"{pipeline.slug}.{ctx.stage.name}")
        return result

    def runner(ctx: StageContext, parent: str | None, entry_tags: dict[str, str]) -> dict[str, Any]:
        stage_task = stage_tasks[ctx.stage.name]
        if ctx.stage.fan_out is None:
            return stage_task(portable_quote(ctx), parent, entry_tags, slot)
        # one task run per item; items are independent (own seed, own sub-folder, own MLflow run)
        begin_fan_out(pipeline, ctx.stage, ctx.root)
        # an item on a worker uses the thread count it would have had in this process
        threads = ctx.threads if ctx.threads is not None or not parallel else torch.get_num_threads()
        calls = [
            (
                stage_task.with_options(task_run_name=f"{pipeline.slug}.{ctx.stage.name}[{item}]"),
                dataclasses.replace(ctx, item=item, threads=threads),
            )
            for item in pipeline.items(ctx.stage, ctx.params)
        ]
        if not parallel:
            return gather_items(ctx, [item_task(portable_quote(c), parent, entry_tags, slot) for item_task, c in calls])
        futures = [item_task.submit(portable_quote(c), parent, entry_tags, slot) for item_task, c in calls]
        wait(futures)  # every item finishes (or fails) before the stage is closed or the run fails
        return gather_items(ctx, [f.result() for f in futures])

    # a run folder is new and the run's own; the DVC workspace is shared by every default-parameter run
    with output_lock(settings, root) if workspace else contextlib.nullcontext():
        summary = execute(
            pipeline,
            params,
            settings,
            root,
            entry="prefect",
            tags=tags,
            tracker=tracker,
            stage_runner=runner,
            progress=progress,
            workspace=workspace,
            freshness=freshness,
            skip_runner=skipper,
        )
        ran = [s["stage"] for s in summary.stages if not s.get("skipped")]
        dvc_status = commit_to_dvc(pipeline, settings, ran) if workspace else "run folder (not DVC-tracked)"
        # run.json names the report it produced and where the run opens (the results page pairs them by digest)
        provenance.stamp(
            summary.root,
            mlflow_experiment_id=tracker.experiment_id if summary.run_id else None,
            prefect_flow_run_id=str(flow_run.get_id() or ""),
            prefect_flow_run_url=tags.get("prefect.flow_run_url"),
        )
    logger.info("%s: %s", pipeline.slug, dvc_status)
    experiment = tracker.experiment_id if summary.run_id else None
    publish_report(pipeline, summary, settings, experiment)
    if summary.run_id:
        logger.info(
            "%s: %s claims hold; MLflow run: %s",
            pipeline.slug,
            claims_held(summary.report),
            mlflow_run_url(settings, experiment, summary.run_id),
        )
    return {
        "slug": pipeline.slug,
        "root": str(summary.root),
        "mlflow_run_id": summary.run_id,
        "seconds": summary.seconds,
        "workspace": workspace,
        "dvc": dvc_status,
        "claims": summary.report.get("claims", []),
    }


def checked_params(pipeline: Pipeline, value: Any) -> PipelineParams:
    """The flow's parameter as the paper's params model: a model as it is (``paperflows run`` validated it), a
    mapping (a deployment run, the form) validated; :class:`ParamsError` names the keys."""
    if isinstance(value, pipeline.params_model):
        return value
    if isinstance(value, PipelineParams):  # another model: its values
        value = value.model_dump(mode="json")
    if not isinstance(value, dict):
        raise ParamsError(f"{pipeline.slug}: expected the parameters as a mapping, got {type(value).__name__}")
    return validate(pipeline.params_model, value, pipeline.slug)


class _RefusalTraceback(logging.Filter):
    """Drops the traceback Prefect's engine logs for a flow run that ends Failed ("Engine execution exited with
    unexpected exception": the run's result re-raised as ``FailedRun``) when the failure is a refusal of the
    parameters, already logged in one line; any other failure keeps its traceback."""

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def filter(self, record: logging.LogRecord) -> bool:
        failure = record.exc_info[1] if record.exc_info else None
        return not (type(failure).__name__ == "FailedRun" and self.message in str(failure))


def quiet_refusal(message: str) -> None:
    """Keep the run's log to the one line of a refusal (see :class:`_RefusalTraceback`)."""
    for name in ("prefect.flow_runs", "prefect.engine"):
        logging.getLogger(name).addFilter(_RefusalTraceback(message))


def one_line(err: Exception) -> str:
    """A refusal as one line: its problems joined by ``; `` and without pydantic's ``Value error, `` prefix."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return "; ".join(line.replace(": Value error, ", ": ") for line in lines) or type(err).__name__


def build_flow(pipeline: Pipeline):
    """The Prefect flow of one paper; its parameter defaults are the ``params.yaml`` section."""
    Params = pipeline.params_model
    defaults = workspace_params(pipeline, load_settings()) or Params()

    def paper_flow(params: Params = defaults) -> dict[str, Any]:  # type: ignore[valid-type]
        # the parameters are validated here, not by Prefect: a refused value (a cross-field rule the form's schema
        # cannot state, a data file) ends the run Failed with one line naming the key, not with a traceback
        try:
            return run_pipeline_in_flow(pipeline, checked_params(pipeline, params))
        except ParamsError as err:
            message = one_line(err)
            get_run_logger().error("%s: parameters refused: %s", pipeline.slug, message)
            quiet_refusal(message)
            return Failed(message=message)  # type: ignore[return-value]

    # real classes, not the strings of postponed annotations: Prefect builds the form schema from them
    paper_flow.__annotations__ = {"params": Params, "return": dict[str, Any]}
    paper_flow.__name__ = f"{pipeline.slug}_flow"
    paper_flow.__qualname__ = paper_flow.__name__
    paper_flow.__doc__ = f"{pipeline.title} ({pipeline.paper.reference}).\n\nHeadline claim: {pipeline.claim}"
    runner = make_task_runner(load_settings())
    return flow(
        paper_flow,
        name=pipeline.slug,
        description=paper_flow.__doc__,
        validate_parameters=False,  # checked_params: one line instead of Prefect's traceback
        log_prints=True,
        **({"task_runner": runner} if runner is not None else {}),
    )


_BUILT: dict[str, Any] = {}


def flow_for(slug: str) -> Any:
    """The Prefect flow of ``slug``, built on first use (only that paper's module is imported)."""
    if slug not in _BUILT:
        _BUILT[slug] = build_flow(registry.get(slug))
    return _BUILT[slug]


def __getattr__(name: str) -> Any:
    """``<slug>_flow``: the entrypoints of prefect.yaml (``paperflows/flows.py:knots_flow``)."""
    if name.endswith("_flow") and name[: -len("_flow")] in registry.slugs():
        return flow_for(name[: -len("_flow")])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
