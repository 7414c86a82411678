"""Deployments of every pipeline: prefect.yaml from the registry, the parameter form, `paperflows serve`
against a real Prefect server (validation of edited parameters, a tracked run, SIGTERM).

The helpers at the top (free ports, process groups, a throwaway Prefect server, the REST calls the UI
makes) are shared by the end-to-end tests in ``tests/e2e``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import typing
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from pydantic import BaseModel

from paperflows import deploy, registry
from paperflows.__main__ import main
from tests.conftest import REPO, clone_repo

BIN = Path(sys.executable).parent
# nsot with the smallest model that still runs every stage: the fastest pipeline for a served run
MICRO = {
    "seeds": [0],
    "data": {"n_train": 24, "n_test": 16, "n_points": 16, "superset_points": 32},
    "model": {"d_model": 8, "n_heads": 1, "n_layers": 1},
    "train": {"steps": 2, "batch_size": 8, "betas": [0.2]},
    "eval": {"n_generated": 16, "euler_steps": [1, 2], "timing_points": [16, 32], "timing_steps": 1, "pair_batches": 2},
}
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


# --------------------------------------------------------------------------------------------------
# shared helpers
# --------------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without project/Prefect/MLflow settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERFLOWS_", "MLFLOW_", "PREFECT_"))}
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING="false",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PAPERFLOWS_PROGRESS="0",
        **extra,
    )
    return env


def start_group(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start ``cmd`` as the leader of its own process group, output to ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def tree(proc: subprocess.Popen[bytes] | int) -> list[psutil.Process]:
    pid = proc if isinstance(proc, int) else proc.pid
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def stop_group(proc: subprocess.Popen[bytes], sig: int = signal.SIGINT, grace: float = 30.0) -> int | None:
    """Signal the whole group, wait, then SIGKILL whatever is left (the group and any descendant)."""
    members = tree(proc)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    psutil.wait_procs(alive(members), timeout=5)
    for p in alive(members):
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    return proc.returncode


def wait_for(
    predicate: typing.Callable[[], Any], timeout: float, what: str, interval: float = 0.5, log: Path | None = None
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    tail = log.read_text(errors="replace")[-4000:] if log is not None and log.is_file() else ""
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{tail}")


RETRYABLE = (429, 502, 503)  # what Prefect's own client retries (a 503 is e.g. SQLite busy under the services)


def api(
    api_url: str, method: str, path: str, body: Any = None, timeout: float = 30.0, attempts: int = 6
) -> tuple[int, Any]:
    """One REST call to the Prefect API: (HTTP status, decoded JSON). Like Prefect's client, a retryable
    status is retried with exponential backoff (the server rolled the request back)."""
    for attempt in range(attempts):
        request = urllib.request.Request(
            f"{api_url}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as err:
            raw = err.read()
            if err.code not in RETRYABLE or attempt == attempts - 1:
                return err.code, json.loads(raw) if raw else None
        time.sleep(0.5 * 2**attempt)
    raise AssertionError("unreachable")


def healthy(url: str) -> bool:
    """Whether ``url`` answers 200 to a browser (Prefect's server serves a UI page such as ``/runs`` only to a
    request that accepts HTML)."""
    request = urllib.request.Request(url, headers={"Accept": "text/html,application/json;q=0.9,*/*;q=0.8"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def wait_flow_run(api_url: str, run_id: str, timeout: float) -> dict[str, Any]:
    def final() -> dict[str, Any] | None:
        status, run = api(api_url, "GET", f"/flow_runs/{run_id}")
        return run if status == 200 and run["state"]["type"] in FINAL else None

    return wait_for(final, timeout, f"flow run {run_id} to finish", interval=1.0)


@contextlib.contextmanager
def prefect_server(home: Path, port: int | None = None, **extra_env: str) -> Iterator[str]:
    """``prefect server start`` (all services on: they record task runs and events) on a free loopback
    port with its own PREFECT_HOME; yields the API URL and leaves no process behind."""
    port = port or free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    home.mkdir(parents=True, exist_ok=True)
    env = clean_env(PREFECT_HOME=str(home), PREFECT_UI_API_URL=api_url, **extra_env)
    log = home / "server.log"
    proc = start_group(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)], home, env, log
    )
    try:
        wait_for(lambda: proc.poll() is not None or healthy(f"{api_url}/health"), 240, "the Prefect server", log=log)
        assert proc.poll() is None, log.read_text()[-3000:]
        yield api_url
    finally:
        members = tree(proc)
        stop_group(proc)
        assert not alive(members), f"Prefect server processes left: {alive(members)}"


def micro_project(dest: Path) -> Path:
    """A fresh copy of the repository whose nsot section is MICRO (so the served default is tiny)."""
    repo = clone_repo(dest)
    params = yaml.safe_load((repo / "params.yaml").read_text())

    def merge(base: dict, update: dict) -> dict:
        return {**base, **{k: merge(base[k], v) if isinstance(v, dict) else v for k, v in update.items()}}

    params["nsot"] = merge(params["nsot"], MICRO)
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return repo


def serve_env(project: Path, api_url: str) -> dict[str, str]:
    return clean_env(
        PREFECT_API_URL=api_url,
        PREFECT_RUNNER_POLL_FREQUENCY="1",
        MLFLOW_TRACKING_URI=f"sqlite:///{project / 'mlflow.db'}",
        PREFECT_HOME=str(project / ".paperflows" / "prefect"),
    )


@contextlib.contextmanager
def paperflows_serve(project: Path, api_url: str, *slugs: str) -> Iterator[subprocess.Popen[bytes]]:
    """``paperflows serve`` in ``project`` until its deployments are registered and polled."""
    log = project / "serve.log"
    proc = start_group([sys.executable, "-m", "paperflows", "serve", *slugs], project, serve_env(project, api_url), log)
    try:
        wait_for(
            lambda: proc.poll() is not None or "being served" in log.read_text(errors="replace"),
            240,
            "`paperflows serve` to register its deployments",
            log=log,
        )
        assert proc.poll() is None, log.read_text()[-3000:]
        yield proc
    finally:
        members = tree(proc)
        stop_group(proc, signal.SIGTERM)
        assert not alive(members), f"serve processes left: {alive(members)}"


def create_run(api_url: str, deployment_id: str, parameters: dict[str, Any]) -> tuple[int, Any]:
    return api(api_url, "POST", f"/deployments/{deployment_id}/create_flow_run", {"parameters": parameters})


def mlflow_parent_run(tracking_uri: str, slug: str, flow_run_id: str):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name(slug)
    assert experiment is not None, f"no MLflow experiment '{slug}' at {tracking_uri}"
    runs = client.search_runs(
        [experiment.experiment_id],
        f"tags.`prefect.flow_run_id` = '{flow_run_id}' and tags.`paperflows.entry` = 'prefect'",
    )
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1, f"expected one parent run tagged with flow run {flow_run_id}, found {len(parents)}"
    return client, parents[0]


# --------------------------------------------------------------------------------------------------
# prefect.yaml from the registry
# --------------------------------------------------------------------------------------------------
def test_prefect_yaml_is_generated_from_the_registry() -> None:
    text = (REPO / "prefect.yaml").read_text()
    assert text == deploy.render_prefect_yaml(registry.all_pipelines()), "run `paperflows deploy --write`"
    doc = yaml.safe_load(text)
    assert [d["name"] for d in doc["deployments"]] == registry.slugs()
    assert doc["pull"] == [{"prefect.deployments.steps.set_working_directory": {"directory": "{{ $PWD }}"}}]
    for entry, pipeline in zip(doc["deployments"], registry.all_pipelines()):
        assert entry["entrypoint"] == f"paperflows/flows.py:{pipeline.slug}_flow"
        assert entry["work_pool"]["name"] == "{{ $PAPERFLOWS_WORK_POOL }}"
        assert entry["enforce_parameter_schema"] is True
        assert entry["tags"] == ["paperflows", pipeline.slug, f"arxiv:{pipeline.arxiv}"]
        assert pipeline.arxiv in entry["description"] and pipeline.claim in entry["description"]


def test_deploy_check_detects_drift(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    monkeypatch.setenv("PAPERFLOWS_ROOT", str(tmp_path))
    assert main(["deploy", "--check"]) == 1
    assert "prefect.yaml is missing" in capsys.readouterr().err
    assert main(["deploy", "--write"]) == 0
    assert main(["deploy", "--check"]) == 0
    path = tmp_path / "prefect.yaml"
    path.write_text(path.read_text().replace("paperflows/flows.py:nsot_flow", "paperflows/flows.py:nsot"))
    assert main(["deploy", "--check"]) == 1
    assert "differs from the registered pipelines" in capsys.readouterr().err


def test_serve_and_deploy_need_a_server(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    for argv in (["serve"], ["deploy"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "PREFECT_API_URL is not set" in err and "prefect server start" in err
    monkeypatch.setenv("PREFECT_API_URL", f"http://127.0.0.1:{free_port()}/api")
    assert main(["serve", "nsot"]) == 2
    assert "no Prefect server answers at PREFECT_API_URL=http://127.0.0.1:" in capsys.readouterr().err
    assert main(["serve", "nosuch"]) == 2
    assert "unknown pipeline 'nosuch'" in capsys.readouterr().err
    assert main(["serve", "--limit", "0"]) == 2
    assert "--limit 0: must be at least 1" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------
# the parameter form
# --------------------------------------------------------------------------------------------------
def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node or ("allOf" in node and len(node["allOf"]) == 1):
        node = schema["definitions"][node["$ref"].split("/")[-1]] if "$ref" in node else node["allOf"][0]
    return node


def _check_model_in_schema(
    model: type[BaseModel], node: dict[str, Any], schema: dict[str, Any], where: str, seen: dict[str, int]
) -> None:
    """Every field of the pydantic model appears with its description, bounds and choices."""
    assert node.get("additionalProperties") is False, f"{where}: unknown keys would be accepted"
    for name, field in model.model_fields.items():
        prop = node["properties"][name]
        # the form's description is the field's, followed by its range where the text does not state it
        assert (prop.get("description") or "").startswith(field.description or ""), f"{where}.{name}: description"
        seen["described"] += field.description is not None
        # an optional field (``int | None``) carries its bounds on the non-null branch of anyOf
        branches = [b for b in prop.get("anyOf", []) if b.get("type") != "null"]
        bounded = branches[0] if len(branches) == 1 else prop
        for meta in field.metadata:
            for attr, key in (
                ("ge", "minimum"),
                ("le", "maximum"),
                ("gt", "exclusiveMinimum"),
                ("lt", "exclusiveMaximum"),
            ):
                if getattr(meta, attr, None) is not None:
                    assert bounded.get(key) == getattr(meta, attr), f"{where}.{name}: {key}"
                    seen["bounds"] += 1
        annotation = field.annotation
        if typing.get_origin(annotation) is typing.Literal:
            assert prop.get("enum") == list(typing.get_args(annotation)), f"{where}.{name}: enum"
            seen["enums"] += 1
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            _check_model_in_schema(annotation, _resolve(schema, prop), schema, f"{where}.{name}", seen)


@pytest.fixture(scope="module")
def deployments() -> dict[str, Any]:
    from paperflows.settings import pin_environment

    pin_environment()
    return {d.name: d for d in deploy.runner_deployments()}


def test_one_deployment_per_pipeline_with_the_paper_and_its_form(deployments: dict[str, Any]) -> None:
    from paperflows import flows
    from paperflows.params import form_values
    from paperflows.settings import load_settings

    assert list(deployments) == registry.slugs()
    for slug, deployment in deployments.items():
        pipeline = registry.get(slug)
        assert deployment.flow_name == slug and deployment.enforce_parameter_schema
        assert deployment.tags == ["paperflows", slug, f"arxiv:{pipeline.arxiv}"]
        assert pipeline.title in deployment.description and pipeline.claim in deployment.description
        defaults = flows.workspace_params(pipeline, load_settings())
        # the stored values are the defaults, with a path parameter's "no file" drawn as an empty text box
        assert deployment.parameters == {"params": form_values(defaults.model_dump(mode="json"), pipeline.params_model)}
        assert pipeline.params_model.model_validate(deployment.parameters["params"]) == defaults
        # what the server receives (Prefect drops unset keys of its schema model)
        schema = deployment._parameter_openapi_schema.model_dump(exclude_unset=True)
        assert schema["additionalProperties"] is False and list(schema["properties"]) == ["params"]
        seen = {"described": 0, "bounds": 0, "enums": 0}
        _check_model_in_schema(
            pipeline.params_model, _resolve(schema, schema["properties"]["params"]), schema, slug, seen
        )
        assert seen["described"] >= 10 and seen["bounds"] >= 5 and seen["enums"] >= 1, (slug, seen)


# --------------------------------------------------------------------------------------------------
# paperflows serve against a real server
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("serve")
    project = micro_project(base / "repo")
    with prefect_server(base / "prefect-home") as api_url, paperflows_serve(project, api_url) as proc:
        yield {"api_url": api_url, "project": project, "proc": proc}


@pytest.mark.slow
def test_served_deployments_are_on_the_server(served: dict[str, Any]) -> None:
    api_url = served["api_url"]
    for pipeline in registry.all_pipelines():
        status, found = api(api_url, "GET", f"/deployments/name/{pipeline.slug}/{pipeline.slug}")
        assert status == 200, found
        assert found["enforce_parameter_schema"] is True and found["work_pool_name"] is None
        assert found["tags"] == deploy.deployment_tags(pipeline)
        assert found["description"] == deploy.deployment_description(pipeline)
        assert found["parameter_openapi_schema"]["additionalProperties"] is False
        assert found["entrypoint"] == f"paperflows/flows.py:{pipeline.slug}_flow"
    nsot = api(api_url, "GET", "/deployments/name/nsot/nsot")[1]
    assert nsot["parameters"]["params"]["train"]["steps"] == MICRO["train"]["steps"]  # the project's params.yaml


@pytest.mark.slow
def test_edited_parameters_are_validated_before_a_run_exists(served: dict[str, Any]) -> None:
    api_url = served["api_url"]
    deployment = api(api_url, "GET", "/deployments/name/nsot/nsot")[1]
    good = deployment["parameters"]["params"]

    def edited(**changes: Any) -> dict[str, Any]:
        params = json.loads(json.dumps(good))
        for dotted, value in changes.items():
            *parents, leaf = dotted.split("__")
            node = params
            for part in parents:
                node = node[part]
            node[leaf] = value
        return params

    cases = [
        (
            {"params": edited(train__steps=10**9)},
            "Validation failed for field 'params.train.steps'. Failure reason: 1000000000 is greater than the maximum",
        ),
        ({"params": edited(train__steps="ten")}, "params.train.steps"),
        ({"params": edited(scale="gpu")}, "'gpu' is not one of ['cpu', 'evidence', 'paper']"),
        ({"params": edited(train__stepz=3)}, "Additional properties are not allowed ('stepz' was unexpected)"),
        ({"params": good, "parms": {}}, "Additional properties are not allowed ('parms' was unexpected)"),
    ]
    filter_body = {"deployments": {"id": {"any_": [deployment["id"]]}}}
    before = api(api_url, "POST", "/flow_runs/count", filter_body)[1]
    for parameters, message in cases:
        status, answer = create_run(api_url, deployment["id"], parameters)
        assert status == 409, (parameters, answer)
        assert message in answer["detail"], answer["detail"]
    assert api(api_url, "POST", "/flow_runs/count", filter_body)[1] == before


@pytest.mark.slow
def test_a_run_with_edited_parameters_is_tracked(served: dict[str, Any]) -> None:
    api_url, project = served["api_url"], served["project"]
    deployment = api(api_url, "GET", "/deployments/name/nsot/nsot")[1]
    defaults = deployment["parameters"]["params"]
    # a partial value, as `prefect deployment run nsot/nsot --param 'params={...}'` sends it: merged into the
    # params.yaml values, so the keys it does not name keep them (not the model's defaults)
    status, run = create_run(api_url, deployment["id"], {"params": {"seeds": [1], "train": {"steps": 3}}})
    assert status == 201, run
    finished = wait_flow_run(api_url, run["id"], timeout=300)
    assert finished["state"]["type"] == "COMPLETED", (finished["state"], (project / "serve.log").read_text()[-3000:])

    # every stage is a task run the UI shows (the server's services recorded them)
    tasks = api(api_url, "POST", "/task_runs/filter", {"flow_runs": {"id": {"any_": [run["id"]]}}})[1]
    assert sorted(t["name"] for t in tasks) == sorted(f"nsot.{s.name}" for s in registry.get("nsot").stages)
    assert all(t["state"]["type"] == "COMPLETED" for t in tasks)
    # the result table is a Prefect artifact of this run
    artifacts = api(api_url, "POST", "/artifacts/filter", {"artifacts": {"key": {"any_": ["nsot-results"]}}})[1]
    assert any(a["flow_run_id"] == run["id"] and a["type"] == "table" for a in artifacts)
    # MLflow: the parent run carries the flow-run and deployment ids and the edited values
    client, parent = mlflow_parent_run(f"sqlite:///{project / 'mlflow.db'}", "nsot", run["id"])
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["prefect.deployment_id"] == deployment["id"]
    assert parent.data.params["train.steps"] == "3" and parent.data.params["seeds"] == "[1]"
    kept = {k: v for k, v in defaults["train"].items() if k != "steps"}
    assert {k: parent.data.params[f"train.{k}"] for k in kept} == {k: str(v) for k, v in kept.items()}
    assert parent.info.run_name.startswith("nsot · ") and "train.steps=3" in parent.info.run_name
    assert parent.data.tags["mlflow.source.name"] == "paperflows/flows.py:nsot_flow"
    assert parent.data.tags["prefect.flow_run_url"] == f"{api_url.removesuffix('/api')}/runs/flow-run/{run['id']}"
    # each task's Prefect log says what the stage did and where its MLflow run is
    logs: list[dict[str, Any]] = []
    while True:  # the server returns at most 200 per call: page through all of them
        page = api(
            api_url,
            "POST",
            "/logs/filter",
            {
                "logs": {"flow_run_id": {"any_": [run["id"]]}},
                "sort": "TIMESTAMP_ASC",
                "limit": 200,
                "offset": len(logs),
            },
        )[1]
        logs += page
        if len(page) < 200:
            break
    summaries = [entry["message"] for entry in logs if ": done in " in entry["message"]]
    assert any(m.startswith("nsot.train: done in ") and "MLflow run: http" in m for m in summaries), summaries
    # and the training loops' progress reaches it too, not only the terminal of `paperflows serve`
    assert any(e["message"].startswith("nsot ") and "step 3/3 (100%), loss " in e["message"] for e in logs), [
        e["message"] for e in logs
    ][:40]
    # edited values: a run folder of its own, nothing written where DVC tracks outputs
    root = project / parent.data.tags["paperflows.output_root"]  # relative to the project: the checkout can move
    assert root.parent == project / "runs" / "nsot" and (root / "report.json").is_file()
    assert not (project / "outputs").exists()


@pytest.mark.slow
def test_sigterm_stops_serve_and_cancels_its_run(served: dict[str, Any]) -> None:
    """Last test of the module: it stops the served process of the fixture."""
    api_url, proc = served["api_url"], served["proc"]
    deployment = api(api_url, "GET", "/deployments/name/nsot/nsot")[1]
    params = json.loads(json.dumps(deployment["parameters"]["params"]))
    params["train"]["steps"] = 200_000  # hours: still running when the signal comes
    status, run = create_run(api_url, deployment["id"], {"params": params})
    assert status == 201, run
    wait_for(
        lambda: api(api_url, "GET", f"/flow_runs/{run['id']}")[1]["state"]["type"] == "RUNNING",
        240,
        "the long run to start",
        log=served["project"] / "serve.log",
    )
    members = tree(proc)
    assert any("prefect.engine" in " ".join(p.cmdline()) for p in alive(members[1:])), "no flow-run process"

    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)  # the serve process only, as a supervisor would
    assert proc.wait(timeout=60) == 0
    assert time.monotonic() - started < 60
    psutil.wait_procs(alive(members), timeout=10)
    assert not alive(members), f"left running after SIGTERM: {alive(members)}"
    final = wait_flow_run(api_url, run["id"], timeout=60)
    assert final["state"]["type"] == "CANCELLED", final["state"]
    assert "paperflows serve: stopped" in (served["project"] / "serve.log").read_text()
