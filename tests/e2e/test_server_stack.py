"""The PostgreSQL-backed stack of scripts/stack.sh: up on free ports with databases of its own, one flow
run through worker -> Prefect server -> MLflow server, the run found in PostgreSQL itself, then down with
no process left and the databases dropped."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest

from tests.platform.test_deploy import MICRO, alive, api, clean_env, free_port, micro_project, wait_flow_run

PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}


def _stack(project: Path, env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(project / "scripts" / "stack.sh"), *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _query(dbname: str, sql: str, *args: object) -> list[tuple]:
    import psycopg2

    with psycopg2.connect(dbname=dbname, **PG) as conn, conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def _admin(sql: str) -> None:
    """Run one statement outside a transaction (DROP DATABASE, DROP ROLE) as the superuser."""
    import psycopg2

    conn = psycopg2.connect(dbname="postgres", **PG)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
    finally:
        conn.close()


def _drop(dbname: str) -> None:
    _admin(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


def _stack_processes(stack_dir: Path) -> list[psutil.Process]:
    """Every process of the stack: each pid-file group leader, its group and all descendants."""
    found: dict[int, psutil.Process] = {}
    groups = {int(p.read_text()) for p in (stack_dir / "pids").glob("*.pid")}
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) in groups:
                found[proc.pid] = proc
                for child in proc.children(recursive=True):
                    found[child.pid] = child
        except (psutil.NoSuchProcess, ProcessLookupError):
            continue
    return list(found.values())


@pytest.mark.slow
def test_stack_runs_a_flow_through_worker_and_postgres_backed_servers(tmp_path: Path) -> None:
    if shutil.which("psql") is None or shutil.which("pg_isready") is None:
        pytest.skip("SERVER STACK TEST NOT RUN: the PostgreSQL client (psql, pg_isready) is missing")
    project = micro_project(tmp_path / "repo")
    stack_dir = tmp_path / "stack"
    tag = uuid.uuid4().hex[:8]
    prefect_db, mlflow_db = f"paperflows_test_prefect_{tag}", f"paperflows_test_mlflow_{tag}"
    pool = f"paperflows-test-{tag}"
    role = f"paperflows_test_{tag}"
    # the servers' role and its password, with the characters a connection URL must encode
    env = clean_env(
        PAPERFLOWS_PG_USER=role,
        PAPERFLOWS_PG_PASSWORD="e2e p@ss/w:rd%'#?",
        PAPERFLOWS_STACK_DIR=str(stack_dir),
        PAPERFLOWS_PYTHON=sys.executable,
        PAPERFLOWS_PREFECT_DB=prefect_db,
        PAPERFLOWS_MLFLOW_DB=mlflow_db,
        PAPERFLOWS_PREFECT_PORT=str(free_port()),
        PAPERFLOWS_MLFLOW_PORT=str(free_port()),
        PAPERFLOWS_WORK_POOL=pool,
        PREFECT_WORKER_QUERY_SECONDS="2",
    )
    processes: list[psutil.Process] = []
    try:
        up = _stack(project, env, "up")
        processes = _stack_processes(stack_dir)
        assert up.returncode == 0, f"{up.stdout}\n{up.stderr}\n" + "\n".join(
            f"--- {log.name}\n{log.read_text()[-2500:]}" for log in (stack_dir / "logs").glob("*.log")
        )
        status = _stack(project, env, "status")
        assert status.returncode == 0 and status.stdout.count(" running ") == 3, status.stdout
        exports = dict(
            shlex.split(line.removeprefix("export "))[0].split("=", 1)
            for line in _stack(project, env, "env").stdout.splitlines()
        )
        api_url, tracking_uri = exports["PREFECT_API_URL"], exports["MLFLOW_TRACKING_URI"]
        assert exports["PAPERFLOWS_WORK_POOL"] == pool and tracking_uri.startswith("http://127.0.0.1:")

        # the prefect.yaml deployment: on the work pool, closed schema, form defaults from params.yaml
        status_code, deployment = api(api_url, "GET", "/deployments/name/nsot/nsot")
        assert status_code == 200, deployment
        assert deployment["work_pool_name"] == pool and deployment["enforce_parameter_schema"]
        assert deployment["parameter_openapi_schema"]["additionalProperties"] is False
        pull = deployment["pull_steps"][0]["prefect.deployments.steps.set_working_directory"]
        assert pull["directory"] == str(project)  # {{ $PWD }} resolved to the deployed checkout
        params = json.loads(json.dumps(deployment["parameter_openapi_schema"]["properties"]["params"]["default"]))
        assert params["train"]["steps"] == MICRO["train"]["steps"]
        params["seeds"] = [2]
        status_code, run = api(
            api_url, "POST", f"/deployments/{deployment['id']}/create_flow_run", {"parameters": {"params": params}}
        )
        assert status_code == 201, run
        finished = wait_flow_run(api_url, run["id"], timeout=420)
        processes = list({p.pid: p for p in processes + _stack_processes(stack_dir)}.values())
        worker_log = (stack_dir / "logs" / "worker.log").read_text()[-3000:]
        assert finished["state"]["type"] == "COMPLETED", (finished["state"], worker_log)

        # the stores themselves: Prefect's flow_run table and MLflow's runs/tags tables in PostgreSQL
        rows = _query(prefect_db, "SELECT state_type, deployment_id::text FROM flow_run WHERE id = %s", run["id"])
        assert rows == [("COMPLETED", deployment["id"])]
        runs = _query(
            mlflow_db,
            """
            SELECT r.run_uuid, r.status, r.artifact_uri, e.name FROM runs r
            JOIN tags t ON t.run_uuid = r.run_uuid JOIN experiments e ON e.experiment_id = r.experiment_id
            WHERE t.key = 'prefect.flow_run_id' AND t.value = %s
              AND NOT EXISTS (SELECT 1 FROM tags p WHERE p.run_uuid = r.run_uuid AND p.key = 'mlflow.parentRunId')
            """,
            run["id"],
        )
        assert len(runs) == 1, runs
        run_uuid, mlflow_status, artifact_uri, experiment = runs[0]
        assert mlflow_status == "FINISHED" and experiment == "nsot"
        seeds = _query(mlflow_db, "SELECT value FROM params WHERE run_uuid = %s AND key = 'seeds'", run_uuid)
        assert seeds == [("[2]",)]
        children = _query(
            mlflow_db, "SELECT count(*) FROM tags WHERE key = 'mlflow.parentRunId' AND value = %s", run_uuid
        )[0][0]
        assert children >= 6
        # artifacts went through the server's proxy into its destination folder
        assert artifact_uri.startswith("mlflow-artifacts:/")
        stored = list((stack_dir / "mlflow-artifacts").rglob(f"{run_uuid}/artifacts/tables/report.json"))
        assert len(stored) == 1
    finally:
        processes = list({p.pid: p for p in processes + _stack_processes(stack_dir)}.values())
        down = _stack(project, env, "down")
        left = alive(processes)
        for proc in left:
            proc.kill()
        for db in (prefect_db, mlflow_db):
            _drop(db)
        _admin(f'DROP ROLE IF EXISTS "{role}"')
    assert down.returncode == 0, down.stderr
    assert "SIGTERM" not in down.stderr and "SIGKILL" not in down.stderr, down.stderr  # SIGINT sufficed
    assert processes and not left, f"left running after `stack.sh down`: {left}"
    assert not list((stack_dir / "pids").glob("*.pid"))
    assert not _query("postgres", "SELECT datname FROM pg_database WHERE datname IN (%s, %s)", prefect_db, mlflow_db)
