"""One Prefect flow per paper, built from the pipeline declarations.

The flow's single parameter is the paper's pydantic params model, so a deployment renders it as a
form (field descriptions, bounds, enums) and Prefect validates edited values before the run starts.
Each stage becomes a task (no result caching: DVC is the cache). A run whose parameters equal the
``params.yaml`` section writes into the DVC workspace (``outputs/<slug>``) and then records its outputs
in ``dvc.lock`` (``dvc commit``), so a following ``dvc repro`` has nothing to redo; any other run writes
into its own ``runs/<slug>/<run>/`` folder and never touches what DVC tracks.

Import this module only after :func:`pipelines.settings.pin_environment` (Prefect reads its settings
at import time); ``python -m pipelines`` does that.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pipelines import registry
from pipelines.params import ParamsError, PipelineParams, load_section
from pipelines.runtime import (Pipeline, RunSummary, StageContext, check_inputs, execute, gather_items,
                               new_run_folder, output_lock, run_stage)
from pipelines.settings import Settings, load_settings, pin_environment

pin_environment()

from prefect import flow, get_run_logger, task  # noqa: E402  (after the environment is pinned)
from prefect.artifacts import create_markdown_artifact, create_table_artifact  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402
from prefect.runtime import deployment, flow_run  # noqa: E402
from prefect.utilities.annotations import quote  # noqa: E402

from pipelines.tracking import Tracker, run_tags  # noqa: E402


def workspace_params(pipeline: Pipeline, settings: Settings) -> PipelineParams | None:
    try:
        return load_section(pipeline.params_model, pipeline.slug, settings.params_file)
    except ParamsError:
        return None


def resolve_root(pipeline: Pipeline, params: PipelineParams, settings: Settings,
                 run_name: str | None) -> tuple[Path, bool]:
    """(output folder, is-the-DVC-workspace) for a run with these parameters."""
    ws = workspace_params(pipeline, settings)
    if ws is not None and ws.model_dump() == params.model_dump():
        return settings.workspace(pipeline.slug), True
    return new_run_folder(settings, pipeline.slug, run_name), False


def commit_to_dvc(pipeline: Pipeline, settings: Settings) -> str:
    """Record a workspace run's outputs in dvc.lock and the DVC cache; returns a one-line status."""
    if not (settings.root / ".dvc").is_dir() or not settings.dvc_file.is_file():
        return "no DVC repository here; outputs not committed to DVC"
    names = [pipeline.dvc_name(s) for s in pipeline.stages]
    proc = subprocess.run([sys.executable, "-m", "dvc", "commit", "--force", "--quiet", *names],
                          cwd=settings.root, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return f"dvc commit failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[-500:]}"
    return f"recorded {len(names)} stages in dvc.lock"


def _artifact_key(slug: str, suffix: str) -> str:
    return f"{slug.replace('_', '-')}-{suffix}"


def publish_report(pipeline: Pipeline, summary: RunSummary) -> None:
    report = summary.report
    rows = [{c: row.get(c) for c in report["columns"]} for row in report["rows"]]
    claims = "\n".join(f"- **{'holds' if c['holds'] else 'does not hold'}**: {c['claim']} — {c['evidence']}"
                       for c in report["claims"])
    create_table_artifact(table=rows, key=_artifact_key(pipeline.slug, "results"),
                          description=f"{report['title']}\n\n{claims}")
    md_path = summary.root / Path(pipeline.report).with_suffix(".md")
    if md_path.is_file():
        create_markdown_artifact(markdown=md_path.read_text(), key=_artifact_key(pipeline.slug, "report"))


def run_pipeline_in_flow(pipeline: Pipeline, params: PipelineParams) -> dict[str, Any]:
    settings = load_settings()
    progress = os.environ.get("PAPERFLOWS_PROGRESS", "1") != "0"
    logger = get_run_logger()
    root, workspace = resolve_root(pipeline, params, settings, flow_run.get_name())
    logger.info("%s: writing to %s (%s)", pipeline.slug, root,
                "DVC workspace" if workspace else "run folder; DVC outputs untouched")
    tracker = Tracker(settings, pipeline.slug)
    tags = run_tags(settings, "prefect", **{
        "prefect.flow_run_id": str(flow_run.get_id() or ""),
        "prefect.flow_run_name": str(flow_run.get_name() or ""),
        "prefect.deployment_id": str(deployment.get_id() or ""),
    })
    stage_tasks = {
        s.name: task(run_stage, name=f"{pipeline.slug}.{s.name}", task_run_name=f"{pipeline.slug}.{s.name}",
                     cache_policy=NO_CACHE)
        for s in pipeline.stages
    }

    def runner(ctx: StageContext, parent: str | None, entry_tags: dict[str, str]) -> dict[str, Any]:
        stage_task = stage_tasks[ctx.stage.name]
        if ctx.stage.fan_out is None:
            return stage_task(quote(ctx), parent, entry_tags)
        # one task run per item; items are independent (own seed, own sub-folder, own MLflow run)
        check_inputs(pipeline, ctx.stage, ctx.root)
        results = [stage_task.with_options(task_run_name=f"{pipeline.slug}.{ctx.stage.name}[{item}]")(
                       quote(dataclasses.replace(ctx, item=item)), parent, entry_tags)
                   for item in pipeline.items(ctx.stage, ctx.params)]
        return gather_items(ctx, results)

    with output_lock(settings, root):
        summary = execute(pipeline, params, settings, root, entry="prefect", tags=tags, tracker=tracker,
                          stage_runner=runner, progress=progress, workspace=workspace)
        dvc_status = commit_to_dvc(pipeline, settings) if workspace else "run folder (not DVC-tracked)"
    logger.info("%s: %s", pipeline.slug, dvc_status)
    publish_report(pipeline, summary)
    return {"slug": pipeline.slug, "root": str(summary.root), "mlflow_run_id": summary.run_id,
            "seconds": summary.seconds, "workspace": workspace, "dvc": dvc_status,
            "claims": summary.report.get("claims", [])}


def build_flow(pipeline: Pipeline):
    """The Prefect flow of one paper; its parameter defaults are the ``params.yaml`` section."""
    Params = pipeline.params_model
    defaults = workspace_params(pipeline, load_settings()) or Params()

    def paper_flow(params: Params = defaults) -> dict[str, Any]:  # type: ignore[valid-type]
        return run_pipeline_in_flow(pipeline, params)

    # real classes, not the strings of postponed annotations: Prefect builds the form schema from them
    paper_flow.__annotations__ = {"params": Params, "return": dict[str, Any]}
    paper_flow.__name__ = f"{pipeline.slug}_flow"
    paper_flow.__qualname__ = paper_flow.__name__
    paper_flow.__doc__ = f"{pipeline.title} (arXiv {pipeline.arxiv}).\n\nClaim checked: {pipeline.claim}"
    return flow(paper_flow, name=pipeline.slug, description=paper_flow.__doc__, validate_parameters=True,
                log_prints=True)


FLOWS = {slug: build_flow(registry.get(slug)) for slug in registry.slugs()}
globals().update({f"{slug}_flow": f for slug, f in FLOWS.items()})
