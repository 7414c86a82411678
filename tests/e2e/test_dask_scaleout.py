"""Scale-out by settings only: knots' per-task LoRA items on a Dask cluster, reporting to a Prefect
server, give the same files and metrics as the sequential run; the GPU slot serialises training items.

The stack is real and local: `prefect server start` on loopback (own PREFECT_HOME, SQLite), a `dask
scheduler` and two `dask worker --nthreads 1` processes. Flows run through the command line
(`python -m paperflows run knots`), exactly as a user would, with only environment variables changed.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

from tests.conftest import REPO
from tests.pipelines.knots.test_pipeline import TINY

BIN = Path(sys.executable).parent
# TINY, with LoRA items long enough (about 6 s on a free core) that overlapping or not is unambiguous in
# timestamps: a loaded machine has started the second Dask worker's item 2.5 s after the first one
ITEM_PARAMS = {**TINY, "lora": {**TINY["lora"], "steps": 300}}
ITEMS = TINY["data"]["tasks"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _overrides(tree: dict[str, Any], prefix: str = "") -> list[str]:
    """``--set key=<JSON>`` arguments for a nested parameter dict."""
    out: list[str] = []
    for key, value in tree.items():
        if isinstance(value, dict):
            out += _overrides(value, f"{prefix}{key}.")
        else:
            out += ["--set", f"{prefix}{key}={json.dumps(value)}"]
    return out


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERFLOWS_", "MLFLOW_", "PREFECT_"))}
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGINT to each process group (a Prefect server ignores SIGTERM for long), SIGKILL if it lingers."""
    for proc in procs:
        if proc.poll() is None:
            with _ignore_gone():
                os.killpg(proc.pid, signal.SIGINT)
    deadline = time.monotonic() + 20
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        with _ignore_gone():  # the group may hold children that outlived their parent
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


class _ignore_gone:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, *_: Any) -> bool:
        return kind is ProcessLookupError


def _wait_http(url: str, proc: subprocess.Popen, log: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer within {seconds}s:\n{log.read_text()[-3000:]}")


def _post(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A Prefect server, a Dask scheduler and two 1-thread workers, all stopped (process groups) at the end."""
    from distributed import Client

    base = tmp_path_factory.mktemp("stack")
    api_port, dask_port = _free_port(), _free_port()
    api_url, dask_address = f"http://127.0.0.1:{api_port}/api", f"tcp://127.0.0.1:{dask_port}"
    env = _clean_env(PREFECT_HOME=str(base / "prefect-home"), PREFECT_API_URL=api_url)
    procs: list[subprocess.Popen] = []
    logs: list[Path] = []

    def start(name: str, cmd: list[str]) -> subprocess.Popen:
        log = base / f"{name}.log"
        logs.append(log)
        with open(log, "w") as handle:
            proc = subprocess.Popen(
                cmd, cwd=base, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
            )
        procs.append(proc)
        return proc

    client = None
    try:
        server = start(
            "prefect-server",
            [
                "prefect",
                "server",
                "start",
                "--host",
                "127.0.0.1",
                "--port",
                str(api_port),
                "--no-ui",
                "--analytics-off",
            ],
        )
        start(
            "dask-scheduler", ["dask", "scheduler", "--host", "127.0.0.1", "--port", str(dask_port), "--no-dashboard"]
        )
        for i in range(2):
            # --preload: each worker imports the pipelines once at start, not inside the first item
            start(
                f"dask-worker-{i}",
                [
                    "dask",
                    "worker",
                    dask_address,
                    "--nthreads",
                    "1",
                    "--no-dashboard",
                    "--name",
                    f"w{i}",
                    "--preload",
                    "paperflows.flows",
                ],
            )
        _wait_http(f"{api_url}/health", server, base / "prefect-server.log", 150)
        client = Client(dask_address, timeout=60)
        client.wait_for_workers(2, timeout=120)
        worker_pids = set(client.run(os.getpid).values())
        yield {"api_url": api_url, "dask_address": dask_address, "worker_pids": worker_pids, "env": env, "base": base}
    except BaseException:
        for log in logs:
            print(f"---- {log.name}\n{log.read_text()[-2000:] if log.exists() else ''}")
        raise
    finally:
        if client is not None:
            client.close()
        _stop(procs)
        assert all(p.poll() is not None for p in procs)


def _run_knots(stack: dict[str, Any], project: Path, **settings: str) -> dict[str, Any]:
    """One `paperflows run knots` at ITEM_PARAMS with these PAPERFLOWS_* settings; its run folder and runs."""
    env = {
        **stack["env"],
        "PAPERFLOWS_ROOT": str(project),
        "PAPERFLOWS_TORCH_THREADS": "1",
        "MLFLOW_TRACKING_URI": f"sqlite:///{project / 'mlflow.db'}",
        **settings,
    }
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "paperflows", "run", "knots", "--no-progress", *_overrides(ITEM_PARAMS)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    seconds = time.perf_counter() - started
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    root = Path(re.search(r"-> (\S+) \(", result.stdout).group(1))
    client = MlflowClient(env["MLFLOW_TRACKING_URI"])
    parent = client.get_run(json.loads((root / "run.json").read_text())["mlflow_run_id"])
    children = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    items = {c.data.tags["paperflows.item"]: c for c in children if c.data.tags["paperflows.stage"] == "finetune"}
    others = [c for c in children if c.data.tags["paperflows.stage"] != "finetune"]
    return {
        "root": root,
        "parent": parent,
        "items": items,
        "others": others,
        "seconds": seconds,
        "log": result.stdout + result.stderr,
    }


def _files(root: Path) -> dict[str, bytes]:
    """Every output file's bytes (run.json holds the start time and run id, so it is left out)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "run.json"
    }


def _curves(run: Any) -> dict[str, float]:
    return {k: v for k, v in run.data.metrics.items() if k != "stage_seconds"}


def _seed_curves(project: Path, run: Any) -> dict[str, dict[str, float]]:
    """``{seed: its curves}`` of the per-seed runs under ``run``."""
    client = MlflowClient(f"sqlite:///{project / 'mlflow.db'}")
    kids = client.search_runs([run.info.experiment_id], f"tags.mlflow.parentRunId = '{run.info.run_id}'")
    return {k.data.tags["paperflows.seed"]: _curves(k) for k in kids}


def _interval(run: Any) -> tuple[int, int]:
    return run.info.start_time, run.info.end_time


@pytest.fixture(scope="module")
def project(stack: dict[str, Any]) -> Path:
    folder = stack["base"] / "project"
    folder.mkdir()
    shutil.copy(REPO / "params.yaml", folder / "params.yaml")
    return folder


@pytest.fixture(scope="module")
def sequential(stack: dict[str, Any], project: Path) -> dict[str, Any]:
    run = _run_knots(stack, project, PAPERFLOWS_TASK_RUNNER="sequential")
    assert sorted(run["items"]) == sorted(ITEMS)
    return run


@pytest.mark.slow
def test_items_run_on_dask_workers_and_match_the_sequential_run(
    stack: dict[str, Any], project: Path, sequential: dict[str, Any]
) -> None:
    dask = _run_knots(stack, project, PAPERFLOWS_TASK_RUNNER="dask", PAPERFLOWS_DASK_ADDRESS=stack["dask_address"])
    print(f"knots ({ITEM_PARAMS}) sequential {sequential['seconds']:.1f}s, dask {dask['seconds']:.1f}s")

    # where things ran: items in the two worker processes, the other stages in the flow's process
    item_pids = {int(r.data.tags["host.pid"]) for r in dask["items"].values()}
    flow_pids = {int(r.data.tags["host.pid"]) for r in dask["others"]}
    assert item_pids == stack["worker_pids"], (item_pids, stack["worker_pids"])
    assert len(flow_pids) == 1 and not flow_pids & stack["worker_pids"]
    assert all(r.data.tags["host.name"] == socket.gethostname() for r in dask["items"].values())
    assert {int(r.data.tags["host.pid"]) for r in sequential["items"].values()} == {
        int(r.data.tags["host.pid"]) for r in sequential["others"]
    }
    # submitted together: the two items ran at the same time (no GPU slot limit exists yet)
    (s1, e1), (s2, e2) = (_interval(r) for r in dask["items"].values())
    assert max(s1, s2) < min(e1, e2), "items did not overlap: they were not run concurrently"

    # the same numbers: every output file, each item's logged curves, and the parent run's metrics
    assert _files(dask["root"]) == _files(sequential["root"])
    for item in ITEMS:
        assert dask["items"][item].info.status == "FINISHED"
        assert _curves(dask["items"][item]) == _curves(sequential["items"][item])
        # each seed's curves go to a run of that seed under the item's run (logged from the worker)
        seeds = _seed_curves(project, dask["items"][item])
        assert seeds.get("0") and seeds == _seed_curves(project, sequential["items"][item])
    parent_keys = {k for k in dask["parent"].data.metrics if k.startswith("lora/")}
    assert {k: dask["parent"].data.metrics[k] for k in parent_keys} == {
        k: sequential["parent"].data.metrics[k] for k in parent_keys
    }


@pytest.mark.slow
def test_a_gpu_slot_of_one_serialises_the_training_items(
    stack: dict[str, Any], project: Path, sequential: dict[str, Any]
) -> None:
    limit = "test-gpu"
    created = subprocess.run(
        ["prefect", "gcl", "create", limit, "--limit", "1"],
        env=stack["env"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert created.returncode == 0, created.stdout + created.stderr
    run = _run_knots(
        stack,
        project,
        PAPERFLOWS_TASK_RUNNER="dask",
        PAPERFLOWS_DASK_ADDRESS=stack["dask_address"],
        PAPERFLOWS_GPU_LIMIT=limit,
    )
    assert f"GPU slot '{limit}' held by training stages" in run["log"]
    first, second = sorted(run["items"].values(), key=lambda r: r.info.start_time)
    assert first.info.end_time <= second.info.start_time, (_interval(first), _interval(second))

    # the second item's task had started (and was waiting for the slot) before the first one finished
    flow_run_id = run["parent"].data.tags["prefect.flow_run_id"]
    deadline, starts = time.monotonic() + 60, {}
    while time.monotonic() < deadline:
        task_runs = _post(f"{stack['api_url']}/task_runs/filter", {"flow_runs": {"id": {"any_": [flow_run_id]}}})
        starts = {
            t["name"]: t["start_time"]
            for t in task_runs
            if t["name"].startswith("knots.finetune[") and t["state_type"] == "COMPLETED" and t["start_time"]
        }
        if len(starts) == len(ITEMS):
            break
        time.sleep(1)
    assert len(starts) == len(ITEMS), starts
    queued_at = datetime.fromisoformat(starts[f"knots.finetune[{second.data.tags['paperflows.item']}]"])
    assert queued_at.timestamp() * 1000 < first.info.end_time, (
        f"the second item's task started {queued_at.timestamp() - first.info.end_time / 1000:.2f} s after the first "
        f"item ended ({(first.info.end_time - first.info.start_time) / 1000:.2f} s long): it did not wait on the slot"
    )
    # holding the slot changes nothing in the numbers
    assert _files(run["root"]) == _files(sequential["root"])


# --------------------------------------------------------------------------------------------------
# settings and the pieces that make an item portable (no stack needed)
# --------------------------------------------------------------------------------------------------
def test_dask_without_a_prefect_server_is_refused_before_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Dask workers are other processes that report to the Prefect API: a flow started with no server to report to
    is refused before anything is written. (`paperflows run` starts a local server for each command and gives its
    children its URL, so this guards a flow called some other way, e.g. from Python.)"""
    import dataclasses

    from paperflows import flows
    from paperflows.settings import SettingsError, load_settings

    monkeypatch.setattr(flows, "prefect_api_url", lambda: None)  # Prefect's settings may be loaded already
    monkeypatch.setenv("PAPERFLOWS_ROOT", str(tmp_path))
    settings = dataclasses.replace(load_settings(), task_runner="dask")
    with pytest.raises(SettingsError, match="PAPERFLOWS_TASK_RUNNER=dask needs a Prefect server: set PREFECT_API_URL"):
        flows.make_task_runner(settings)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("PAPERFLOWS_TASK_RUNNER", "ray", "PAPERFLOWS_TASK_RUNNER must be one of sequential, dask; got 'ray'"),
        ("PAPERFLOWS_DASK_ADDRESS", "10.0.0.5", "PAPERFLOWS_DASK_ADDRESS must be a scheduler address"),
        ("PAPERFLOWS_TORCH_THREADS", "0", "PAPERFLOWS_TORCH_THREADS must be a whole number >= 1; got '0'"),
        ("PAPERFLOWS_DASK_WORKERS", "two", "PAPERFLOWS_DASK_WORKERS must be a whole number >= 1; got 'two'"),
    ],
)
def test_bad_scale_out_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    from paperflows.settings import SettingsError, load_settings

    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=re.escape(message)):
        load_settings()


def test_scale_out_settings_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from paperflows.settings import load_settings

    for name in (
        "PAPERFLOWS_TASK_RUNNER",
        "PAPERFLOWS_DASK_ADDRESS",
        "PAPERFLOWS_TORCH_THREADS",
        "PAPERFLOWS_DASK_WORKERS",
        "PAPERFLOWS_GPU_LIMIT",
    ):
        monkeypatch.delenv(name, raising=False)
    default = load_settings()
    assert (default.task_runner, default.dask_address, default.torch_threads, default.gpu_limit) == (
        "sequential",
        None,
        1,
        "gpu",
    )  # one thread unless set: small CPU models, two pipelines on two cores
    monkeypatch.setenv("PAPERFLOWS_TASK_RUNNER", "dask")
    monkeypatch.setenv("PAPERFLOWS_DASK_ADDRESS", "tcp://10.0.0.5:8786")
    monkeypatch.setenv("PAPERFLOWS_TORCH_THREADS", "3")
    monkeypatch.setenv("PAPERFLOWS_GPU_LIMIT", "a100")
    s = load_settings()
    assert (s.task_runner, s.dask_address, s.torch_threads, s.gpu_limit) == ("dask", "tcp://10.0.0.5:8786", 3, "a100")


def test_a_stage_runs_with_the_thread_count_of_its_context(tmp_path: Path) -> None:
    import torch

    from components.io import save_json
    from paperflows.contract import Pipeline, Stage, StageContext
    from paperflows.engine import run_stage
    from paperflows.paper import Paper
    from tests.platform.test_runtime import ToyParams

    seen: list[int] = []

    def probe(ctx: StageContext) -> None:
        """Record the thread count."""
        seen.append(torch.get_num_threads())
        save_json({"threads": seen[-1]}, ctx.path("report.json"))

    pipeline = Pipeline(
        paper=Paper("toy", "", "", ""), params_model=ToyParams, stages=(Stage("probe", probe, outs=("report.json",)),)
    )
    before = torch.get_num_threads()
    target = 2 if before == 1 else 1
    run_stage(
        StageContext(pipeline=pipeline, stage=pipeline.stages[0], params=ToyParams(), root=tmp_path, threads=target)
    )
    run_stage(StageContext(pipeline=pipeline, stage=pipeline.stages[0], params=ToyParams(), root=tmp_path))
    assert seen == [target, before] and torch.get_num_threads() == before


def test_the_tracker_travels_without_its_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a Dask worker receives: settings and slug; it builds its own client and logs to the same store."""
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.setenv("PAPERFLOWS_ROOT", str(tmp_path))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))
    from paperflows.flows import PortableTracker
    from paperflows.settings import load_settings

    here = PortableTracker(load_settings(), "knots")
    run_id = here.start("knots.parent", {})
    payload = pickle.dumps(here)
    assert b"MlflowClient" not in payload and b"_buffers" not in payload
    there = pickle.loads(payload)
    assert there._tracker is None  # nothing built until it is used
    there.log_metrics(run_id, {"x": 1.5}, step=3)
    there.flush(run_id)
    assert there.experiment_id == here.experiment_id
    assert MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_run(run_id).data.metrics["x"] == 1.5


def test_quoted_arguments_survive_pickling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Prefect's own quote() comes back from pickle wrapping a tuple; the flows' variant stays intact."""
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.setenv("PAPERFLOWS_ROOT", str(tmp_path))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))
    import cloudpickle
    from prefect.utilities.annotations import quote

    from paperflows.flows import portable_quote

    payload = {"item": "rotate90"}
    assert cloudpickle.loads(cloudpickle.dumps(quote(payload))).unwrap() == (payload,)  # the upstream behaviour
    back = cloudpickle.loads(cloudpickle.dumps(portable_quote(payload)))
    assert isinstance(back, quote) and back.unwrap() == payload
