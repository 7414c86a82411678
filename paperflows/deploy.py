"""Prefect deployments of every registered pipeline, from the registry (never kept by hand).

Two ways to run them against a Prefect server (``PREFECT_API_URL``):

* ``paperflows serve [slug ...]``: one long-lived process registers one deployment per pipeline
  (name = slug, no work pool) and executes the runs the UI or the API creates, each in a subprocess.
  SIGTERM or Ctrl-C stops it; in-flight runs are cancelled, not orphaned.
* ``paperflows deploy``: the deployments declared in ``prefect.yaml`` (entrypoint
  ``paperflows/flows.py:<slug>_flow``, work pool ``$PAPERFLOWS_WORK_POOL``) are created on the server
  for a process work pool served by ``prefect worker start``. ``prefect.yaml`` is generated here:
  ``paperflows deploy --write`` rewrites it, ``--check`` fails if it drifted from the registry.

Every deployment carries the paper (title, arXiv id, claim) as its description and tags, and the
pipeline's pydantic params model as its parameter form: field labels, descriptions, bounds and enums come from
the model, and a path parameter is a plain text box (empty: no file; :func:`paperflows.params.form_schema`).
``enforce_parameter_schema`` is on and the schema is closed at every level (``additionalProperties: false``), so
the server answers a run request carrying an out-of-range value or an unknown parameter name with HTTP 409 naming
the field, before any process starts. The model's cross-field rules, which no schema states, are applied when the
run starts (:func:`paperflows.flows.checked_params`): such a run ends Failed with one line naming the key.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from paperflows import registry

if TYPE_CHECKING:
    from paperflows.contract import Pipeline

PREFECT_FILE = "prefect.yaml"
WORK_POOL_ENV = "PAPERFLOWS_WORK_POOL"
DEFAULT_WORK_POOL = "paperflows-process"
FLOWS_ENTRYPOINT = "paperflows/flows.py"


class DeployError(RuntimeError):
    """The server, the work pool or prefect.yaml is not in a state to deploy (reported as a usage error)."""


class DeployFailed(RuntimeError):
    """``prefect deploy`` itself failed (reported as a failed command)."""


# --------------------------------------------------------------------------------------------------
# what a deployment of a pipeline looks like
# --------------------------------------------------------------------------------------------------
def deployment_name(pipeline: Pipeline) -> str:
    """``<flow>/<deployment>`` as the Prefect CLI and API address it; both are the slug."""
    return f"{pipeline.slug}/{pipeline.slug}"


def deployment_tags(pipeline: Pipeline) -> list[str]:
    return ["paperflows", pipeline.slug, f"arxiv:{pipeline.arxiv}"]


def deployment_description(pipeline: Pipeline) -> str:
    stages = " -> ".join(s.name for s in pipeline.stages)
    link = f"arXiv {pipeline.arxiv}, https://arxiv.org/abs/{pipeline.arxiv}" if pipeline.arxiv else "no arXiv id"
    return (
        f"{pipeline.title} ({link}).\n\n"
        f"Headline claim: {pipeline.claim}\n\nStages: {stages}. The form holds the params.yaml "
        f"section `{pipeline.slug}`; a run with edited values writes to `runs/{pipeline.slug}/<time>-<run name>/` "
        f"and leaves the DVC-tracked outputs alone (a partial value of a section is merged into its "
        f"params.yaml values)."
    )


def entrypoint(pipeline: Pipeline) -> str:
    return f"{FLOWS_ENTRYPOINT}:{pipeline.slug}_flow"


def work_pool_name(env: Mapping[str, str] | None = None) -> str:
    return (env if env is not None else os.environ).get(WORK_POOL_ENV) or DEFAULT_WORK_POOL


def closed_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The flow's parameter schema with unknown top-level parameter names refused.

    Prefect's generated schema closes the pydantic sub-models (``extra="forbid"``) but not the
    top level, where an unknown name would be accepted and crash the run in its process.
    """
    return {**schema, "additionalProperties": False}


# --------------------------------------------------------------------------------------------------
# talking to the server
# --------------------------------------------------------------------------------------------------
def require_api_url(env: Mapping[str, str] | None = None) -> str:
    """``PREFECT_API_URL`` or a :class:`DeployError` telling the user how to get a server."""
    url = (env if env is not None else os.environ).get("PREFECT_API_URL", "").strip()
    if not url:
        raise DeployError(
            "PREFECT_API_URL is not set: deployments live on a running Prefect server. Start one "
            "(`prefect server start`, then `export PREFECT_API_URL=http://127.0.0.1:4200/api`) or the "
            'PostgreSQL stack (`PAPERFLOWS_PG_PASSWORD=... scripts/stack.sh up && eval "$(scripts/stack.sh env)"`).'
        )
    return url.rstrip("/")


def check_server(api_url: str, timeout: float = 10.0) -> None:
    """Fail fast with a clear message when nothing answers ``<api_url>/health``."""
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=timeout) as response:
            body = response.read().decode(errors="replace").strip()
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise DeployError(
            f"no Prefect server answers at PREFECT_API_URL={api_url} ({err}); start it "
            f"first or fix the URL (it ends in /api)"
        ) from None
    if body != "true":
        raise DeployError(f"PREFECT_API_URL={api_url}: /health answered {body[:200]!r}, not a Prefect API")


def _check_slugs(slugs: Sequence[str]) -> list[str]:
    chosen = list(slugs) or registry.slugs()
    for slug in chosen:
        registry.get(slug)  # UnknownPipelineError names the known slugs
    return chosen


# --------------------------------------------------------------------------------------------------
# paperflows serve
# --------------------------------------------------------------------------------------------------
def runner_deployments(slugs: Sequence[str] = ()) -> list[Any]:
    """One :class:`prefect.deployments.runner.RunnerDeployment` per pipeline, ready for ``prefect.serve``.

    Import only after :func:`paperflows.settings.pin_environment` (it imports :mod:`paperflows.flows`).
    """
    from prefect.utilities.callables import ParameterSchema

    from paperflows import flows
    from paperflows.params import form_schema, form_values
    from paperflows.settings import load_settings

    class ClosedParameterSchema(ParameterSchema):
        additionalProperties: bool = False  # noqa: N815  (the JSON-schema keyword)

    settings = load_settings()
    deployments = []
    for slug in _check_slugs(slugs):
        pipeline = registry.get(slug)
        defaults = flows.workspace_params(pipeline, settings) or pipeline.params_model()
        deployment = flows.flow_for(slug).to_deployment(
            name=slug,
            description=deployment_description(pipeline),
            tags=deployment_tags(pipeline),
            parameters={"params": form_values(defaults.model_dump(mode="json"), pipeline.params_model)},
            enforce_parameter_schema=True,
        )
        # no public setter in Prefect 3.9; path fields drawn as plain text boxes (params.form_schema)
        schema = form_schema(deployment._parameter_openapi_schema.model_dump(), pipeline.params_model)
        deployment._parameter_openapi_schema = ClosedParameterSchema(**schema, additionalProperties=False)
        deployments.append(deployment)
    return deployments


def serve(slugs: Sequence[str] = (), limit: int | None = None) -> None:
    """Register the deployments on the server at ``PREFECT_API_URL`` and execute their runs until stopped."""
    check_server(require_api_url())
    deployments = runner_deployments(slugs)
    from prefect import serve as prefect_serve

    print(
        f"serving {len(deployments)} deployment(s) on {os.environ['PREFECT_API_URL']}: "
        + ", ".join(f"{d.flow_name}/{d.name}" for d in deployments),
        flush=True,
    )
    # Prefect's runner stops on SIGTERM/SIGINT itself: it cancels in-flight runs (killing their
    # processes) and returns, so this function returns normally and the process exits 0
    prefect_serve(*deployments, limit=limit, pause_on_shutdown=False)


# --------------------------------------------------------------------------------------------------
# prefect.yaml and paperflows deploy
# --------------------------------------------------------------------------------------------------
_HEADER = """\
# Deployments of every registered pipeline for a Prefect process work pool.
# Generated from paperflows/registry.py by `paperflows deploy --write`; `paperflows deploy --check`
# fails when it drifts. Create them on the server at PREFECT_API_URL with `paperflows deploy`
# (it also creates the work pool and closes the parameter schemas), then run
# `prefect worker start --pool "$PAPERFLOWS_WORK_POOL"`. Plain `prefect --no-prompt deploy --all`
# works too when PAPERFLOWS_WORK_POOL is exported. Parameters default to the params.yaml section.
"""


class _BlockTextDumper(yaml.SafeDumper):
    """Multi-line strings (descriptions) as readable ``|`` blocks."""


_BlockTextDumper.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None),
)


def render_prefect_yaml(pipelines: Sequence[Pipeline]) -> str:
    document = {
        "name": "paperflows",
        "prefect-version": importlib.metadata.version("prefect"),
        "build": None,
        "push": None,
        # {{ $PWD }} is resolved when deploying: runs execute in the checkout that was deployed
        "pull": [{"prefect.deployments.steps.set_working_directory": {"directory": "{{ $PWD }}"}}],
        "deployments": [
            {
                "name": p.slug,
                "description": deployment_description(p),
                "entrypoint": entrypoint(p),
                "tags": deployment_tags(p),
                "enforce_parameter_schema": True,
                "work_pool": {"name": "{{ $" + WORK_POOL_ENV + " }}", "job_variables": {}},
            }
            for p in pipelines
        ],
    }
    return _HEADER + yaml.dump(document, Dumper=_BlockTextDumper, sort_keys=False, width=100, allow_unicode=True)


def check_prefect_yaml(root: Path) -> str | None:
    """``None`` when ``<root>/prefect.yaml`` matches the registry, else why not."""
    path = root / PREFECT_FILE
    if not path.is_file():
        return f"{path} is missing; run `paperflows deploy --write`"
    if path.read_text() != render_prefect_yaml(registry.all_pipelines()):
        return f"{path} differs from the registered pipelines; run `paperflows deploy --write`"
    return None


def write_prefect_yaml(root: Path) -> Path:
    from components.io import save_text

    path = root / PREFECT_FILE
    save_text(render_prefect_yaml(registry.all_pipelines()), path)
    return path


def ensure_work_pool(name: str) -> bool:
    """Create the process work pool ``name`` unless it exists; True when it was created."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            pool = client.read_work_pool(name)
        except ObjectNotFound:
            client.create_work_pool(WorkPoolCreate(name=name, type="process"))
            return True
    if pool.type != "process":
        raise DeployError(
            f"work pool '{name}' exists with type '{pool.type}', not 'process'; set {WORK_POOL_ENV} to another name"
        )
    return False


def close_deployment_schemas(slugs: Sequence[str]) -> list[str]:
    """Close the parameter schema of each created deployment; returns their ids."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import DeploymentUpdate

    from paperflows.params import form_schema

    ids = []
    with get_client(sync_client=True) as client:
        for slug in slugs:
            found = client.read_deployment_by_name(deployment_name(registry.get(slug)))
            client.update_deployment(
                found.id,
                DeploymentUpdate(
                    parameter_openapi_schema=closed_schema(
                        form_schema(found.parameter_openapi_schema or {}, registry.params_model(slug))
                    ),
                    enforce_parameter_schema=True,
                ),
            )
            ids.append(str(found.id))
    return ids


def deploy(root: Path, pool: str | None = None, timeout: float = 600.0) -> list[str]:
    """Create the ``prefect.yaml`` deployments (and the work pool) on the server; returns their ids."""
    api_url = require_api_url()
    check_server(api_url)
    problem = check_prefect_yaml(root)
    if problem:
        raise DeployError(problem)
    pool = pool or work_pool_name()
    ensure_work_pool(pool)
    env = {**os.environ, "PWD": str(root), WORK_POOL_ENV: pool}
    proc = subprocess.run(
        [sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--all", "--prefect-file", str(root / PREFECT_FILE)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise DeployFailed(
            f"`prefect deploy --all` failed ({proc.returncode}):\n{(proc.stdout + proc.stderr).strip()[-3000:]}"
        )
    return close_deployment_schemas(registry.slugs())
