"""``paperflows ui``: the MLflow UI and the Prefect UI of this project, on loopback, started and stopped together.

* MLflow: ``mlflow ui --backend-store-uri <the project's store> --default-artifact-root <its artifacts> --host
  127.0.0.1`` on the port of ``$PAPERFLOWS_MLFLOW_UI_URL`` (5000), where every link paperflows writes (Prefect
  logs, the results page) points. The URL printed opens MLflow's model-training view
  (``/#/experiments?workflowType=machine_learning``), not the GenAI overview MLflow 3 opens on.
* Prefect: ``prefect server start --host 127.0.0.1`` on the project's database (``PREFECT_HOME``, where
  ``paperflows run`` records its flow runs) on the port of ``$PAPERFLOWS_PREFECT_UI_URL`` (4200).

A tracking server (``MLFLOW_TRACKING_URI=http...``) or a Prefect server (``PREFECT_API_URL``) that the project
already uses is not started again: its URL is printed. Each server runs in a session of its own with its output in
``.paperflows/ui/<name>.log``; Ctrl-C or SIGTERM stops both (SIGTERM to each session, SIGKILL after a grace
period), and each server's main process also gets SIGTERM if this command is killed outright, so nothing
outlives it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from urllib.parse import urlsplit

from paperflows.settings import Settings

HOST = "127.0.0.1"
DEFAULT_MLFLOW_PORT = 5000
DEFAULT_PREFECT_PORT = 4200
START_TIMEOUT = 240.0  # seconds: a first Prefect start migrates a new database (measured up to ~75 s)
GRACE_SECONDS = 10.0
MLFLOW_VIEW = "/#/experiments?workflowType=machine_learning"


class UiError(RuntimeError):
    """A port is taken or a server cannot start (reported with exit code 2, nothing left running)."""


def port_of(url: str | None, default: int) -> int:
    """The port of a URL such as ``http://127.0.0.1:5000`` (``default`` when it names none)."""
    if not url:
        return default
    try:
        return urlsplit(url).port or default
    except ValueError:
        return default


def port_free(port: int, host: str = HOST) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def answers(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return reply.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _die_with_parent() -> None:
    """In the child before exec: a new session, and SIGTERM when the ``paperflows ui`` process dies (Linux)."""
    os.setsid()
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class Server:
    """One UI server: how to start it, where it answers, its process once started."""

    name: str
    argv: list[str]
    env: dict[str, str]
    health: str  # a URL that answers 200 once the server is up
    shown: str  # the URL printed for the user
    log: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - setsid + PDEATHSIG, no threads yet
            )

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def stop(self, grace: float = GRACE_SECONDS) -> None:
        """SIGTERM the server's session, then SIGKILL what is left after ``grace`` seconds."""
        if self.proc is None:
            return
        from paperflows.launcher import session_alive

        pgid = self.proc.pid
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and (session_alive(pgid) or self.proc.poll() is None):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=0.1)
                if not session_alive(pgid):
                    break
            if not session_alive(pgid):
                break
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass(frozen=True)
class Plan:
    """What ``paperflows ui`` starts (``servers``) and what it only points at (``existing``: name -> URL)."""

    servers: list[Server]
    existing: dict[str, str]


def plan(settings: Settings, mlflow_port: int | None = None, prefect_port: int | None = None) -> Plan:
    """The servers to start for this project, refusing taken ports before anything starts."""
    from paperflows.provenance import prefect_ui_url
    from paperflows.tracking import mlflow_ui

    logs = settings.root / ".paperflows" / "ui"
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_")}
    base_env.update(
        DO_NOT_TRACK="1", PREFECT_SERVER_ANALYTICS_ENABLED="false", MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING="false"
    )
    servers, existing = [], {}
    if settings.local_tracking:
        port = mlflow_port or port_of(os.environ.get("PAPERFLOWS_MLFLOW_UI_URL"), DEFAULT_MLFLOW_PORT)
        base = f"http://{HOST}:{port}"
        argv = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", settings.tracking_uri]
        if settings.tracking_uri.startswith("sqlite:"):
            argv += ["--default-artifact-root", settings.artifact_root.resolve().as_uri()]
        argv += ["--host", HOST, "--port", str(port), "--workers", "1"]
        servers.append(
            Server("MLflow", argv, dict(base_env), f"{base}/health", base + MLFLOW_VIEW, logs / "mlflow.log")
        )
    else:  # a tracking server: its own UI
        existing["MLflow"] = mlflow_ui(settings) + MLFLOW_VIEW
    api_url = os.environ.get("PREFECT_API_URL", "").strip().rstrip("/")
    if api_url:
        existing["Prefect"] = os.environ.get("PREFECT_UI_URL") or api_url.removesuffix("/api")
    else:
        port = prefect_port or port_of(prefect_ui_url(), DEFAULT_PREFECT_PORT)
        base = f"http://{HOST}:{port}"
        env = {**base_env, "PREFECT_HOME": str(settings.prefect_home), "PREFECT_UI_API_URL": f"{base}/api"}
        argv = [sys.executable, "-m", "prefect", "server", "start", "--host", HOST, "--port", str(port)]
        servers.append(Server("Prefect", argv, env, f"{base}/api/health", f"{base}/runs", logs / "prefect.log"))
    for server in servers:
        port = urlsplit(server.health).port
        if port is not None and not port_free(port):
            option = "--mlflow-port" if server.name == "MLflow" else "--prefect-port"
            raise UiError(
                f"port {port} on {HOST} is in use (another {server.name} UI?); stop it, or choose a free one "
                f"with {option} N"
            )
    return Plan(servers, existing)


def run(
    settings: Settings,
    mlflow_port: int | None = None,
    prefect_port: int | None = None,
    timeout: float = START_TIMEOUT,
    out: Callable[[str], None] = print,
) -> int:
    """Start the UIs, print their URLs, and keep them up until Ctrl-C / SIGTERM (128 + the signal) or until one of
    them exits by itself (1: the other is stopped too)."""
    chosen = plan(settings, mlflow_port, prefect_port)
    stopping: dict[str, int] = {}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.setdefault("signal", signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    started: list[Server] = []
    try:
        if settings.local_tracking and settings.tracking_uri.startswith("sqlite:"):
            _ensure_tracking_store(settings)
        prefect = next((s for s in chosen.servers if s.name == "Prefect"), None)
        for server in chosen.servers:
            if server is not prefect:
                server.start()
                started.append(server)
        if prefect is not None:
            from paperflows.settings import PREFECT_DATABASE_READY, first_prefect_start

            if (settings.prefect_home / PREFECT_DATABASE_READY).is_file():
                prefect.start()
                started.append(prefect)
            else:  # a new database: migrated by one server at a time (as `paperflows run` does)
                out(f"paperflows ui: creating the Prefect database in {settings.prefect_home} (up to a minute) ...")
                with first_prefect_start(settings.prefect_home):
                    prefect.start()
                    started.append(prefect)
                    _wait(started, [prefect], timeout, stopping)
        out(
            "paperflows ui: starting "
            + " and ".join(f"{s.name} ({s.shown.split('/#')[0].removesuffix('/runs')})" for s in started)
            + " ..."
        )
        failed = _wait(started, started, timeout, stopping)
        if "signal" in stopping:
            return 128 + stopping["signal"]
        if failed is not None:
            out(f"paperflows ui: the {failed.name} UI did not start; its log ({failed.log}) ends:\n{failed.tail()}")
            return 1
        width = max(len(n) for n in [*(s.name for s in started), *chosen.existing])
        for server in started:
            out(f"  {server.name:<{width}}  {server.shown}")
        for name, url in chosen.existing.items():
            out(f"  {name:<{width}}  {url}  (the server this project uses; not started here)")
        out(f"paperflows ui: logs in {settings.root / '.paperflows' / 'ui'}; Ctrl-C stops both")
        while "signal" not in stopping:
            gone = next((s for s in started if s.exited() is not None), None)
            if gone is not None:
                out(f"paperflows ui: the {gone.name} UI exited ({gone.exited()}); its log ends:\n{gone.tail()}")
                return 1
            time.sleep(0.2)
        return 128 + stopping["signal"]
    finally:
        for server in reversed(started):
            server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if started:
            out("paperflows ui: stopped")


def _wait(started: list[Server], servers: list[Server], timeout: float, stopping: dict[str, int]) -> Server | None:
    """Wait until every server of ``servers`` answers its health URL; the first that exits or times out instead
    (None when all answer, or a signal came)."""
    deadline = time.monotonic() + timeout
    pending = list(servers)
    while pending and "signal" not in stopping:
        for server in list(pending):
            if server.exited() is not None:
                return server
            if answers(server.health):
                pending.remove(server)
        if time.monotonic() > deadline:
            return pending[0]
        time.sleep(0.3)
    return None


def _ensure_tracking_store(settings: Settings) -> None:
    """Create a missing SQLite store whole before the UI opens it (a half-migrated file breaks every later run)."""
    from paperflows.tracking import _sqlite_file, tracking_client

    path = _sqlite_file(settings.tracking_uri)
    if path is not None and not path.exists():
        tracking_client(settings)


__all__ = ["MLFLOW_VIEW", "Plan", "Server", "UiError", "plan", "run"]
