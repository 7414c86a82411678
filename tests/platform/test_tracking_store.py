"""The local MLflow store is created whole or not at all: a process stopped while MLflow builds its SQLite
schema leaves no half-migrated mlflow.db behind for every later run to fail on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from paperflows.tracking import _sqlite_file, tracking_client
from tests.conftest import REPO


def test_sqlite_file_of_a_tracking_uri() -> None:
    assert _sqlite_file("sqlite:////abs/mlflow.db") == Path("/abs/mlflow.db")
    assert _sqlite_file("sqlite:///mlflow.db") == Path("mlflow.db")
    assert _sqlite_file("http://127.0.0.1:5000") is None
    assert _sqlite_file("postgresql://u@h/db") is None


def test_a_missing_store_is_built_aside_and_linked_into_place(tmp_path: Path) -> None:
    db = tmp_path / "sub" / "mlflow.db"
    client = tracking_client(SimpleNamespace(tracking_uri=f"sqlite:///{db}"))
    assert db.is_file() and [e.name for e in client.search_experiments()] == ["Default"]
    assert sorted(p.name for p in db.parent.iterdir()) == ["mlflow.db"]
    client.create_experiment("kept")
    again = tracking_client(SimpleNamespace(tracking_uri=f"sqlite:///{db}"))  # an existing store is used as is
    assert "kept" in [e.name for e in again.search_experiments()]


def test_a_store_build_killed_midway_leaves_no_store(tmp_path: Path) -> None:
    """SIGKILL the process while MLflow migrates the new schema: the final file never appears, and the next
    process builds a good one."""
    db = tmp_path / "mlflow.db"
    script = (
        "import sys; from types import SimpleNamespace; from paperflows.tracking import tracking_client; "
        "tracking_client(SimpleNamespace(tracking_uri=sys.argv[1]))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, f"sqlite:///{db}"], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    deadline = time.time() + 120
    while (
        time.time() < deadline
        and proc.poll() is None
        and not any(p.name.endswith(".creating") for p in tmp_path.iterdir())
    ):
        time.sleep(0.005)
    assert proc.poll() is None, "the process ended before it started building the store"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert not db.exists(), "a killed build made a store visible"
    assert any(p.name.endswith(".creating") for p in tmp_path.iterdir())
    client = tracking_client(SimpleNamespace(tracking_uri=f"sqlite:///{db}"))
    assert [e.name for e in client.search_experiments()] == ["Default"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db"], "the killed build's file was not cleared"
