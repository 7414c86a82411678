"""A process that works for another one stops when that one is gone.

``paperflows run`` does its work in a child session (:mod:`paperflows.launcher`), and ``dvc repro`` runs
each stage as ``sh -c "paperflows stage ..."``. When the supervising process is killed outright (SIGKILL,
or a SIGTERM to ``dvc`` alone), no handler of the worker runs: it would go on writing outputs that nobody
records, and the Prefect server it started would outlive it.

:func:`watch` starts a small watchdog process (``python -m paperflows.lifeline``) beside the worker. Twice
a second it checks the processes above the worker; when one is gone (its pid no longer exists, or now
belongs to a process started later) it sends the worker SIGTERM, which ends the run as a signal does
(MLflow runs end KILLED), waits up to a grace period for it to exit, then kills what is left: the whole
session when the worker leads one (the Prefect server and workers it started, the watchdog included),
else the worker. When the worker exits on its own, the watchdog exits too.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

GRACE_SECONDS = 5.0
POLL_SECONDS = 0.2


def start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (field 22 of /proc/<pid>/stat); None when gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[-1].split()
    except OSError:
        return None
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[-1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def ancestors(pid: int, levels: int) -> list[tuple[int, str]]:
    """``(pid, start time)`` of up to ``levels`` processes above ``pid``, stopping below init."""
    found = []
    for _ in range(levels):
        parent = _parent(pid)
        started = start_time(parent) if parent and parent > 1 else None
        if started is None:
            break
        found.append((parent, started))
        pid = parent
    return found


def lost(watched: list[tuple[int, str]]) -> tuple[int, str] | None:
    """The first watched process that is gone (or whose pid was reused), or None."""
    return next((w for w in watched if start_time(w[0]) != w[1]), None)


def watch(levels: int, what: str) -> subprocess.Popen | None:
    """Start the watchdog of this process over the ``levels`` processes above it (see the module)."""
    if not Path("/proc/self/stat").exists():  # no procfs: nothing to watch with
        return None
    me = os.getpid()
    watched = ancestors(me, levels)
    if not watched:
        return None
    argv = [
        sys.executable,
        "-m",
        "paperflows.lifeline",
        str(me),
        start_time(me) or "",
        what,
        *(f"{pid}:{started}" for pid, started in watched),
    ]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, close_fds=True)


def guard(worker: subprocess.Popen, what: str) -> subprocess.Popen | None:
    """Start a watchdog that stops ``worker`` (a process this one started, e.g. a server in a session of its
    own) when this process is gone."""
    me, worker_started = os.getpid(), start_time(worker.pid)
    mine = start_time(me)
    if not Path("/proc/self/stat").exists() or worker_started is None or mine is None:
        return None
    argv = [sys.executable, "-m", "paperflows.lifeline", str(worker.pid), worker_started, what, f"{me}:{mine}"]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, close_fds=True)


def _guard(worker: int, worker_started: str, what: str, watched: list[tuple[int, str]]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the worker itself; keep watching
    while start_time(worker) == worker_started:
        gone = lost(watched)
        if gone is None:
            time.sleep(POLL_SECONDS)
            continue
        print(f"paperflows: {what} (pid {gone[0]}) is gone: stopping pid {worker}", file=sys.stderr, flush=True)
        leads_session = os.getsid(0) == worker  # this watchdog is in the worker's session when it leads one
        try:  # a worker that leads a session of its own, without this watchdog (a server the supervisor started)
            own_session = not leads_session and os.getsid(worker) == worker
        except ProcessLookupError:
            own_session = False
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_SECONDS
        while start_time(worker) == worker_started and time.monotonic() < deadline:
            time.sleep(0.1)
        if leads_session:
            os.killpg(worker, signal.SIGKILL)  # the session's process group, this watchdog included
        elif own_session:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(worker, signal.SIGKILL)  # the worker and what it started
        elif start_time(worker) == worker_started:
            os.kill(worker, signal.SIGKILL)
        return 0
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m paperflows.lifeline")
    parser.add_argument("worker", type=int)
    parser.add_argument("worker_started")
    parser.add_argument("what")
    parser.add_argument("watched", nargs="+", help="pid:start-time of each process to watch")
    args = parser.parse_args(argv)
    watched = [(int(pid), started) for pid, _, started in (w.partition(":") for w in args.watched)]
    return _guard(args.worker, args.worker_started, args.what, watched)


if __name__ == "__main__":
    sys.exit(main())
