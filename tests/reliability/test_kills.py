"""SIGTERM and Ctrl-C stop `paperflows run` within seconds, end its MLflow runs as KILLED, leave no process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from tests.conftest import REPO

# long enough that the run is still in its stages when the signal arrives
SLOW = ["--set", "seeds=[0]", "--set", "base.steps=100000"]


def _processes_with(marker: str) -> list[int]:
    """Pids of live processes whose environment holds ``marker`` (every descendant inherits it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().split(") ", 1)[1][0]
        except (OSError, IndexError):
            continue
        if marker.encode() in environ and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_the_run_and_everything_it_started(tmp_path: Path, signum: int, code: int) -> None:
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    marker = f"PAPERFLOWS_ROOT={tmp_path}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERFLOWS_", "MLFLOW_", "PREFECT_"))}
    env.update(PAPERFLOWS_ROOT=str(tmp_path), PAPERFLOWS_PROGRESS="0")
    proc = subprocess.Popen([sys.executable, "-m", "paperflows", "run", "knots", *SLOW, "--no-progress"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 180
        # the task data written: the first stage is done and pretraining (100k steps) is under way
        while not list((tmp_path / "runs" / "knots").glob("*/data/tasks.safetensors")) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stdout.read()
            time.sleep(0.5)
        assert list((tmp_path / "runs" / "knots").glob("*/data/tasks.safetensors")), "the run never started"
        time.sleep(2.0)
        sent = time.monotonic()
        proc.send_signal(signum)
        assert proc.wait(timeout=30) == code, proc.stdout.read()
        stopped_after = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert stopped_after < 15, f"took {stopped_after:.1f} s to stop"  # typically 5 s: the grace period
    time.sleep(0.5)
    assert _processes_with(marker) == [], "processes outlived the run"
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert runs and all(r.info.status == "KILLED" for r in runs if r.info.status != "FINISHED"), \
        [(r.info.run_name, r.info.status) for r in runs]
    assert any(r.info.run_name == "knots" and r.info.status == "KILLED" for r in runs)
