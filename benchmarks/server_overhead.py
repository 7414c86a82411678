"""Prefect server overheads against their targets, side by side in one process.

1. Trigger -> Completed for a served deployment of a small flow (3 trivial tasks), created over REST
   the way the UI's Run button does, at serve's default poll interval (PREFECT_RUNNER_POLL_FREQUENCY=10 s)
   and at 1 s. Target: <= 15 s. (A process worker adds its own poll, PREFECT_WORKER_QUERY_SECONDS=10 s
   by default, plus a subprocess start; see orchestration-facts.md.)
2. Per-task overhead on a PostgreSQL-backed server: ms per trivial task above a task-free flow, first in
   one process with the server idle, then in each of 4 processes running their flows at the same time.
   Target: the concurrent figure within 2x the idle one (both measured here, on the same server).

Without ``--api-url`` the benchmark starts its own ``prefect server start`` on a free loopback port on a
PostgreSQL database of its own (created, then dropped); with it, it measures that server.

    python benchmarks/server_overhead.py [--api-url http://127.0.0.1:4200/api] [--tasks 200]
                                         [--concurrent 4] [--triggers 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TARGET_TRIGGER_S = 15.0
TARGET_CONCURRENT_RATIO = 2.0
FACTS_IDLE_MS = 4.9  # orchestration-facts.md: first 200-task batch, running server on PostgreSQL
PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}


# --------------------------------------------------------------------------------------------------
# child processes (a fresh interpreter each, like a real flow run)
# --------------------------------------------------------------------------------------------------
def child_tasks(n_tasks: int, start_at: float) -> None:
    """Time a task-free flow and an ``n_tasks`` flow against PREFECT_API_URL; print JSON."""
    from prefect import flow, task

    @task(persist_result=False)
    def noop(i: int) -> int:
        return i

    @flow(name="bench-no-tasks", persist_result=False)
    def no_tasks(n: int) -> int:
        return sum(int(i) for i in range(n))  # the same loop, plain calls

    @flow(name="bench-tasks", persist_result=False)
    def with_tasks(n: int) -> int:
        return sum(noop(i) for i in range(n))

    no_tasks(1)  # client and connection set-up, not measured
    time.sleep(max(0.0, start_at - time.time()))  # all concurrent children start together
    started, cpu = time.perf_counter(), time.process_time()
    no_tasks(n_tasks)
    base, base_cpu = time.perf_counter() - started, time.process_time() - cpu
    started, cpu = time.perf_counter(), time.process_time()
    with_tasks(n_tasks)
    loaded, loaded_cpu = time.perf_counter() - started, time.process_time() - cpu
    print(
        json.dumps(
            {
                "base_s": base,
                "tasks_s": loaded,
                "per_task_ms": 1000 * (loaded - base) / n_tasks,
                "cpu_per_task_ms": 1000 * (loaded_cpu - base_cpu) / n_tasks,
                "late_s": max(0.0, time.time() - start_at - base - loaded),
            }
        ),
        flush=True,
    )


def child_serve(name: str) -> None:
    from prefect import flow, task

    @task
    def step(i: int) -> int:
        return i * i

    @flow(name="bench-small")
    def small(n: int = 3) -> int:
        return sum(step(i) for i in range(n))

    small.serve(name=name)


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def call(api_url: str, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        f"{api_url}{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        raw = response.read()
        return json.loads(raw) if raw else None


def wait_until(predicate, timeout: float, what: str, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(urllib.error.URLError, OSError):
            value = predicate()
            if value:
                return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", **extra)
    return env


def stop(proc: subprocess.Popen, sig: int = signal.SIGINT) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@contextlib.contextmanager
def own_postgres_server(workdir: Path) -> Iterator[str]:
    import psycopg2

    dbname = f"paperflows_bench_prefect_{os.getpid()}"
    admin = psycopg2.connect(dbname="postgres", **PG)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{dbname}"')
    port = free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    env = child_env(
        PREFECT_HOME=str(workdir / "prefect-home"),
        PREFECT_SERVER_DATABASE_CONNECTION_URL=f"postgresql+asyncpg://{PG['user']}@{PG['host']}:{PG['port']}/{dbname}",
    )
    log = open(workdir / "server.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        started = time.perf_counter()
        wait_until(lambda: call(api_url, "GET", "/health") is True, 240, "the Prefect server")
        print(
            f"Prefect server on PostgreSQL ({dbname}) answered /health after {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        yield api_url
    finally:
        stop(proc)
        log.close()
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        admin.close()


# --------------------------------------------------------------------------------------------------
# measurements
# --------------------------------------------------------------------------------------------------
def trigger_to_completed(api_url: str, poll_s: int, triggers: int, workdir: Path) -> list[float]:
    name = f"poll-{poll_s}s"
    log = workdir / f"serve-{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--child-serve", name],
            env=child_env(PREFECT_API_URL=api_url, PREFECT_RUNNER_POLL_FREQUENCY=str(poll_s)),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(lambda: "being served" in log.read_text(errors="replace"), 240, f"serve ({name})")
        deployment = call(api_url, "GET", f"/deployments/name/bench-small/{name}")
        times = []
        for _ in range(triggers):
            started = time.perf_counter()
            run = call(api_url, "POST", f"/deployments/{deployment['id']}/create_flow_run", {"parameters": {}})
            final = wait_until(
                lambda: (
                    (r := call(api_url, "GET", f"/flow_runs/{run['id']}"))["state"]["type"]
                    in {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
                    and r
                ),
                300,
                "the run",
                interval=0.2,
            )
            if final["state"]["type"] != "COMPLETED":
                raise RuntimeError(f"served run ended {final['state']['type']}: {log.read_text()[-2000:]}")
            times.append(time.perf_counter() - started)
            print(f"  serve poll {poll_s:>2} s: trigger -> Completed {times[-1]:6.2f} s", flush=True)
        return times
    finally:
        stop(proc, signal.SIGTERM)


def per_task_overhead(api_url: str, n_tasks: int, processes: int) -> list[dict[str, float]]:
    start_at = time.time() + 15 + 5 * processes  # room for every child's imports on a loaded machine
    children = [
        subprocess.Popen(
            [sys.executable, __file__, "--child-tasks", str(n_tasks), "--start-at", str(start_at)],
            env=child_env(PREFECT_API_URL=api_url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    results = []
    for child in children:
        out, err = child.communicate(timeout=900)
        if child.returncode != 0:
            raise RuntimeError(f"benchmark child failed: {err[-2000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    late = max(r["late_s"] for r in results)
    if late > 0.5:
        print(f"  note: a child started {late:.1f} s after the common start time", flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api-url", default=None, help="measure this server instead of starting one")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--concurrent", type=int, default=4)
    parser.add_argument("--triggers", type=int, default=3)
    parser.add_argument("--child-tasks", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--child-serve", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_tasks is not None:
        child_tasks(args.child_tasks, args.start_at)
        return 0
    if args.child_serve is not None:
        child_serve(args.child_serve)
        return 0

    workdir = Path(tempfile.mkdtemp(prefix="paperflows-server-bench-"))
    with contextlib.nullcontext(args.api_url.rstrip("/")) if args.api_url else own_postgres_server(workdir) as api_url:
        print(f"server: {api_url}; logs in {workdir}", flush=True)
        triggers = {poll: trigger_to_completed(api_url, poll, args.triggers, workdir) for poll in (10, 1)}
        print(f"  per-task overhead, 1 process, server idle ({args.tasks} tasks)...", flush=True)
        idle_run = per_task_overhead(api_url, args.tasks, 1)[0]
        idle = idle_run["per_task_ms"]
        print(f"  per-task overhead, {args.concurrent} processes at once...", flush=True)
        busy_runs = per_task_overhead(api_url, args.tasks, args.concurrent)
        busy = statistics.median(r["per_task_ms"] for r in busy_runs)

    print(f"\n{'measure':<52}{'ours':>10}{'target':>10}{'ratio':>8}  verdict")
    for poll, times in triggers.items():
        median = statistics.median(times)
        print(
            f"{f'trigger -> Completed, serve poll {poll:>2} s (median of {len(times)})':<52}{median:>9.2f}s"
            f"{TARGET_TRIGGER_S:>9.1f}s{median / TARGET_TRIGGER_S:>8.2f}  "
            f"{'meets' if median <= TARGET_TRIGGER_S else 'misses'} (min {min(times):.2f}, max {max(times):.2f})"
        )
    print(
        f"{'per-task overhead, idle server (1 process)':<52}{idle:>8.2f}ms{FACTS_IDLE_MS:>8.1f}ms"
        f"{idle / FACTS_IDLE_MS:>8.2f}  vs the facts-file idle figure"
    )
    per_process = ", ".join(f"{r['per_task_ms']:.1f}" for r in busy_runs)
    print(
        f"{f'per-task overhead, {args.concurrent} concurrent runs (median)':<52}{busy:>8.2f}ms"
        f"{TARGET_CONCURRENT_RATIO * idle:>8.1f}ms{busy / idle:>8.2f}  "
        f"{'meets' if busy <= TARGET_CONCURRENT_RATIO * idle else 'misses'} 2x idle "
        f"(per process: {per_process} ms)"
    )
    busy_cpu = statistics.median(r["cpu_per_task_ms"] for r in busy_runs)
    print(
        f"{'client CPU per task: idle / concurrent (median)':<52}{idle_run['cpu_per_task_ms']:>8.2f}ms"
        f"{busy_cpu:>8.2f}ms{busy_cpu / idle_run['cpu_per_task_ms']:>8.2f}  the flow process's own work per "
        f"task; {args.concurrent} such processes share {os.cpu_count()} CPU(s) with the server"
    )
    print("A process worker adds its poll (PREFECT_WORKER_QUERY_SECONDS, default 10 s) to trigger -> Completed.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
