"""``paperflows run`` as a supervisor: what is up to date is skipped, the work runs in a child process.

The command a user types validates everything (params, data files) and asks DVC what is already up to
date, without importing torch or Prefect. The pipelines then run in a child process in a session of
its own, which holds the Prefect server, the flows and any worker they start. On SIGTERM or Ctrl-C the
supervisor asks the child to stop (SIGTERM: its MLflow runs end as KILLED), waits a few seconds, then
kills the child's whole session, ends as KILLED any MLflow run the child left RUNNING, and exits with
128 + the signal number (130 for Ctrl-C, 143 for SIGTERM). No process outlives the command.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from paperflows.settings import PREFECT_DATABASE_READY, Settings

STARTED_ENV = "PAPERFLOWS_COMMAND_STARTED"  # time.time() when `paperflows run` began: start-up is measured from it
CHILD_ENV = "PAPERFLOWS_RUN_CHILD"  # set in the child: do the work instead of supervising
GRACE_SECONDS = 5.0  # how long a stopping child may take before its session is killed


FRESH_ENV = "PAPERFLOWS_FRESH_STAGES"  # JSON {slug: [DVC stage names up to date]}: what the child may skip


def fresh_stages(settings: Settings, stages_by_slug: dict[str, list[str]]) -> dict[str, set[str]]:
    """Per slug, its DVC stages that are up to date (dvc.lock matches params, code and outputs), from one
    ``dvc status`` over every stage; nothing is fresh where DVC cannot tell."""
    from paperflows.dvcstate import stale_stages

    stale = stale_stages(settings.root)
    if stale is None:
        return {slug: set() for slug in stages_by_slug}
    return {slug: {n for n in names if n not in stale} for slug, names in stages_by_slug.items()}


def up_to_date(settings: Settings, stages_by_slug: dict[str, list[str]]) -> set[str]:
    """The slugs whose DVC stages are all up to date."""
    fresh = fresh_stages(settings, stages_by_slug)
    return {slug for slug, names in stages_by_slug.items() if names and fresh[slug] == set(names)}


def _kill_session(pgid: int, grace: float = 2.0, leader: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM every process of the session, then SIGKILL what is left after ``grace`` seconds. ``leader``: the
    session's first process when it is this process's child, reaped as it exits (an unreaped child stays in the
    session as a zombie, and the wait would always last ``grace``)."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if leader is not None:
                leader.poll()
            if not session_alive(pgid):
                return
            time.sleep(0.05)


def session_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Child:
    """One supervised ``paperflows run`` child: its own session, its output prefixed when several run."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], label: str | None):
        self.label = label
        out = subprocess.PIPE if label else None
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "paperflows", *argv],
            env=env,
            start_new_session=True,
            stdout=out,
            stderr=subprocess.STDOUT if label else None,
            text=True,
            bufsize=1,
        )
        self.reader = None
        if label:
            self.reader = threading.Thread(target=self._relay, daemon=True)
            self.reader.start()

    def _relay(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            sys.stdout.write(f"[{self.label}] {line}")
            sys.stdout.flush()

    def finish(self) -> None:
        if self.reader is not None:
            self.reader.join(timeout=5)


def run_supervised(
    jobs: list[list[str]],
    settings: Settings,
    parallel: int = 1,
    extra_env: dict[str, str] | None = None,
    server: LocalPrefectServer | None = None,
) -> int:
    """Run each ``paperflows <argv>`` of ``jobs`` in a child session (at most ``parallel`` at once, on one
    local Prefect server when more than one) and stop all of it cleanly on SIGTERM / Ctrl-C. ``server``: one
    launched already (:meth:`LocalPrefectServer.launch_early`), used and stopped here."""
    env = {**os.environ, **(extra_env or {}), CHILD_ENV: "1"}
    parallel = max(1, min(parallel, len(jobs)))
    stopping: dict[str, float | int] = {}
    running: list[_Child] = []
    codes: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if "signal" in stopping:  # a second signal: no more waiting
            stopping["deadline"] = 0.0
            return
        stopping["signal"], stopping["deadline"] = signum, time.monotonic() + GRACE_SECONDS
        print(
            f"\npaperflows: {signal.Signals(signum).name} received: stopping the run (at most "
            f"{GRACE_SECONDS:.0f} s) ...",
            file=sys.stderr,
            flush=True,
        )
        for child in running:
            try:
                os.kill(child.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    pending = list(jobs)
    killed_pids: set[int] = set()
    try:
        if parallel > 1:
            env["PAPERFLOWS_PROGRESS"] = "0"  # interleaved bars are noise: the stages' log lines say it all
            open_tracking_store(settings)  # before parallel writers: a first-use race corrupts it
        label = "the parallel runs" if parallel > 1 else "the run"
        if server is not None:
            env.update(server.announce(label))
        elif not os.environ.get("PREFECT_API_URL"):
            # one local server for the command's children, started now so that it boots while they import (an
            # embedded server per child would start only when its first flow is called)
            server = LocalPrefectServer(settings)
            env.update(server.start_once(label=label))
        while (pending or running) and not ("signal" in stopping and not running):
            while pending and len(running) < parallel and "signal" not in stopping:
                argv = pending.pop(0)
                running.append(_Child(argv, env, label=argv[argv.index("--only") + 1] if parallel > 1 else None))
            for child in list(running):
                code = child.proc.poll()
                if code is None:
                    if "signal" in stopping and time.monotonic() >= stopping["deadline"]:
                        stopping["forced"] = 1
                        killed_pids.add(child.proc.pid)
                        _kill_session(child.proc.pid, grace=0.0)
                    continue
                _kill_session(child.proc.pid, grace=1.0)  # whatever the child started goes with it
                child.finish()
                codes.append(code)
                running.remove(child)
            time.sleep(0.1)
    finally:
        for child in running:
            killed_pids.add(child.proc.pid)
            _kill_session(child.proc.pid, grace=0.0)
        if server is not None:
            server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if "signal" in stopping:
        if killed_pids:  # killed before they could end their MLflow runs themselves
            _end_orphan_runs(settings, killed_pids)
        signum = int(stopping["signal"])
        print(f"paperflows: stopped by {signal.Signals(signum).name}", file=sys.stderr, flush=True)
        return 128 + signum
    return max(codes, default=0)


def open_tracking_store(settings: Settings) -> None:
    """Open the MLflow tracking store (created whole if missing); the process keeps it for its runs."""
    from paperflows.tracking import tracking_client

    tracking_client(settings).search_experiments(max_results=1)


class LocalPrefectServer:
    """``prefect server start`` on a free local port for the children of one command, stopped with it."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def home(self) -> Path:
        return Path(os.environ.get("PREFECT_HOME") or self.settings.prefect_home)

    @classmethod
    def launch_early(cls, settings: Settings) -> LocalPrefectServer | None:
        """A server launched now, before the command knows whether it will run anything (``dvc status`` takes
        seconds: the server boots meanwhile), where one will be needed and its database exists (a first start
        migrates it, under a lock, in :meth:`start_once`); None otherwise. Announce it when it is used, or
        :meth:`stop` it."""
        server = cls(settings)
        if os.environ.get("PREFECT_API_URL") or not (server.home() / PREFECT_DATABASE_READY).is_file():
            return None
        server.launch(announce=False)
        return server

    def announce(self, label: str) -> dict[str, str]:
        """Say where the runs go; the environment that points the children at the server."""
        print(f"paperflows: local Prefect server for {label} on {self.url}", flush=True)
        return {"PREFECT_API_URL": self.url, API_PENDING_ENV: "1"}

    def launch(self, label: str = "the runs", announce: bool = True) -> dict[str, str]:
        """Start ``prefect server start`` on a free loopback port without waiting for it: the environment that
        points the children at it (they wait for it themselves, :func:`wait_for_api`, while they import)."""
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        home = self.home()
        home.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "PREFECT_HOME": str(home),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_UI_ENABLED": "false",
        }
        env.pop("PREFECT_API_URL", None)
        self._log = open(home / "server.log", "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        from paperflows import lifeline

        # killed outright (SIGKILL), this process runs no handler: the server then stops with its watchdog
        self._watchdog = lifeline.guard(self.proc, "the `paperflows run` that started this Prefect server")
        self.url = f"http://127.0.0.1:{port}/api"
        if announce:
            return self.announce(label)
        return {"PREFECT_API_URL": self.url, API_PENDING_ENV: "1"}

    def start(self, timeout: float = 180.0, label: str = "the runs") -> dict[str, str]:
        """:meth:`launch`, then wait until the server answers."""
        env = self.launch(label)
        assert self.proc is not None
        wait_for_api(self.url, timeout, self.proc, self.home() / "server.log")
        return {k: v for k, v in env.items() if k != API_PENDING_ENV}

    def start_once(self, timeout: float = 180.0, label: str = "the runs") -> dict[str, str]:
        """Start the server: at once, without waiting, when its database exists; the first time (a new
        database), under the first-start lock and waiting for it, so that one migration runs at a time."""
        from paperflows.settings import first_prefect_start

        if (self.home() / PREFECT_DATABASE_READY).is_file():
            return self.launch(label)
        with first_prefect_start(self.home()):
            return self.start(timeout, label)

    def stop(self) -> None:
        """Stop the server (a second call does nothing)."""
        if getattr(self, "_watchdog", None) is not None:
            self._watchdog.terminate()
            self._watchdog = None
        if self.proc is not None:
            _kill_session(self.proc.pid, grace=5.0, leader=self.proc)
            self.proc.wait(timeout=5)
            self._log.close()
            self.proc = None


API_PENDING_ENV = "PAPERFLOWS_PREFECT_BOOTING"  # the server at PREFECT_API_URL was started and may not answer yet


def wait_for_api(
    url: str, timeout: float = 180.0, proc: subprocess.Popen[bytes] | None = None, log: Path | None = None
) -> None:
    """Wait until the Prefect API at ``url`` answers its health check (RuntimeError on timeout, or when the
    server process ``proc`` exits first)."""
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the Prefect server exited ({proc.returncode}); see {log}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(
        f"the Prefect server at {url} did not answer within {timeout:.0f} s" + (f"; see {log}" if log else "")
    )


def _end_orphan_runs(settings: Settings, pids: set[int]) -> None:
    """MLflow runs the killed children could not end themselves are ended as KILLED."""
    try:
        from paperflows.tracking import reap_orphan_runs

        ended = reap_orphan_runs(settings, pids=pids)
    except Exception as err:  # noqa: BLE001 - the stop itself must not fail on the tracking store
        print(f"paperflows: could not end the stopped run's MLflow runs: {err}", file=sys.stderr)
        return
    if ended:
        print(f"paperflows: ended {len(ended)} MLflow run(s) as KILLED", file=sys.stderr)
