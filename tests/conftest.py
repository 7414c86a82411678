"""Test-wide settings: offline, quiet Prefect, and helpers for throwaway project folders."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Offline by construction: any accidental hub call fails fast instead of hanging.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "false")
os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")


# the slow tier: whole-system tests (a fresh clone, servers, browsers, kills) and each paper's end-to-end flow;
# `make test-fast` leaves them out (`-m "not slow"`), `make test` (what CI runs) runs everything
SLOW_FOLDERS = ("e2e",)
SLOW_FILES = ("test_kills.py", "test_hostile_files.py")
SLOW_NAMES = ("test_flow_smoke",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.fspath))
        if (
            any(part in SLOW_FOLDERS for part in path.relative_to(REPO / "tests").parts[:-1])
            or path.name in SLOW_FILES
            or item.name.startswith(SLOW_NAMES)
        ):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory: pytest.TempPathFactory):
    """One temporary Prefect server (own SQLite DB) for every flow test of the session."""
    home = tmp_path_factory.mktemp("prefect-home")
    os.environ["PREFECT_HOME"] = str(home)
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=240):
        yield


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project root with the repository's params.yaml; MLflow and outputs go there."""
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.setenv("PAPERFLOWS_ROOT", str(tmp_path))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("PAPERFLOWS_MLFLOW_ARTIFACTS", str(tmp_path / "mlruns"))
    return tmp_path


def clone_repo(dest: Path) -> Path:
    """A copy of the tracked (and not ignored) files of the working tree, as a fresh git repository."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "snapshot"]):
        subprocess.run(cmd, cwd=dest, check=True, env=env, capture_output=True)
    return dest


def keep_test_artifacts(folder: Path, name: str) -> Path:
    """Copy ``folder`` (screenshots of a browser test) to ``test-artifacts/<name>/`` of the checkout, replacing
    what an earlier run left there, so CI and a developer can look at them after the test."""
    kept = REPO / "test-artifacts" / name
    if kept.exists():
        shutil.rmtree(kept)
    shutil.copytree(folder, kept)
    return kept
