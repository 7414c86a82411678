"""``paperflows run`` as a supervisor: what is up to date is skipped, the work runs in a child process.

The command a user types validates everything (params, data files) and asks DVC what is already up to
date, without importing torch or Prefect. The pipelines then run in a child process in a session of
its own, which holds the Prefect server, the flows and any worker they start. On SIGTERM or Ctrl-C the
supervisor asks the child to stop (SIGTERM: its MLflow runs end as KILLED), waits a few seconds, then
kills the child's whole session, ends as KILLED any MLflow run the child left RUNNING, and exits with
128 + the signal number (130 for Ctrl-C, 143 for SIGTERM). No process outlives the command.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType

from paperflows.settings import Settings

CHILD_ENV = "PAPERFLOWS_RUN_CHILD"   # set in the child: do the work instead of supervising
GRACE_SECONDS = 5.0                  # how long a stopping child may take before its session is killed


def up_to_date(settings: Settings, stages_by_slug: dict[str, list[str]]) -> set[str]:
    """The slugs whose DVC stages are all up to date (dvc.lock matches params, code and outputs)."""
    if not (settings.root / ".dvc").is_dir() or not (settings.root / "dvc.lock").is_file():
        return set()
    names = [n for names in stages_by_slug.values() for n in names]
    proc = subprocess.run([sys.executable, "-m", "dvc", "status", "--json", *names], cwd=settings.root,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return set()
    try:
        changed = json.loads(proc.stdout.strip() or "{}")
    except json.JSONDecodeError:
        return set()
    locked = _locked_stages(settings)
    return {slug for slug, names in stages_by_slug.items()
            if names and not any(n in changed for n in names) and all(n in locked for n in names)}


def _locked_stages(settings: Settings) -> set[str]:
    import yaml

    data = yaml.safe_load((settings.root / "dvc.lock").read_text()) or {}
    return set((data.get("stages") or {}).keys())


def _kill_session(pgid: int, grace: float = 2.0) -> None:
    """SIGTERM every process of the session, then SIGKILL what is left after ``grace`` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
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


def run_supervised(argv: Sequence[str], settings: Settings) -> int:
    """Run ``paperflows <argv>`` in a child session and stop all of it cleanly on SIGTERM / Ctrl-C."""
    env = {**os.environ, CHILD_ENV: "1"}
    child = subprocess.Popen([sys.executable, "-m", "paperflows", *argv], env=env, start_new_session=True)
    stopping: dict[str, float | int] = {}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if "signal" in stopping:  # a second signal: no more waiting
            stopping["deadline"] = 0.0
            return
        stopping["signal"], stopping["deadline"] = signum, time.monotonic() + GRACE_SECONDS
        print(f"\npaperflows: {signal.Signals(signum).name} received: stopping the run (at most "
              f"{GRACE_SECONDS:.0f} s) ...", file=sys.stderr, flush=True)
        try:
            os.kill(child.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            try:
                code = child.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                if "signal" in stopping and time.monotonic() >= stopping["deadline"]:
                    stopping["forced"] = 1
                    _kill_session(child.pid, grace=0.0)
        # whatever the child started (the Prefect server, workers) goes with it
        _kill_session(child.pid, grace=1.0)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if "signal" in stopping:
        if "forced" in stopping:  # killed before it could end its MLflow runs itself
            _end_orphan_runs(settings, child.pid)
        signum = int(stopping["signal"])
        print(f"paperflows: stopped by {signal.Signals(signum).name}", file=sys.stderr, flush=True)
        return 128 + signum
    return code


def _end_orphan_runs(settings: Settings, pid: int) -> None:
    """MLflow runs the killed child could not end itself are ended as KILLED."""
    try:
        from paperflows.tracking import reap_orphan_runs

        ended = reap_orphan_runs(settings, pids={pid})
    except Exception as err:  # noqa: BLE001 - the stop itself must not fail on the tracking store
        print(f"paperflows: could not end the stopped run's MLflow runs: {err}", file=sys.stderr)
        return
    if ended:
        print(f"paperflows: ended {len(ended)} MLflow run(s) as KILLED", file=sys.stderr)
