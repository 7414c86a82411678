"""The harness of the reliability tests: a throwaway project, and a CLI call that must be refused.

``refused(argv)`` runs ``paperflows <argv>`` in this process against a copy of the project and records
what a user would see and what was left behind: the exit code, the output, whether a traceback was
printed, and every file or folder added or changed under the project. The work itself is replaced by a
recorder, so an input that should have been refused but was accepted shows up as "reached the work".
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from paperflows.__main__ import main

REPO = Path(__file__).resolve().parents[2]
VARIABLES = ("MLFLOW_TRACKING_URI", "PREFECT_HOME", "PREFECT_API_URL", "PAPERFLOWS_MLFLOW_ARTIFACTS",
             "PAPERFLOWS_TASK_RUNNER", "PAPERFLOWS_DASK_ADDRESS", "PAPERFLOWS_DASK_WORKERS",
             "PAPERFLOWS_TORCH_THREADS", "PAPERFLOWS_GPU_LIMIT", "PAPERFLOWS_HELD_LOCKS", "PAPERFLOWS_RUN_CHILD")


@dataclass
class Outcome:
    code: int
    output: str
    reached: list[str] = field(default_factory=list)   # the work that was started ("run", "stage")
    changed: list[str] = field(default_factory=list)   # paths added or modified under the project

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.output


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size if p.is_file() else -1)
            for p in root.rglob("*")}


@pytest.fixture()
def cli_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A project root holding the repository's params.yaml and dvc.yaml, used by the in-process CLI."""
    root = tmp_path / "project"
    root.mkdir()
    for name in ("params.yaml", "dvc.yaml"):
        shutil.copy(REPO / name, root / name)
    saved = dict(os.environ)
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAPERFLOWS_ROOT", str(root))
    monkeypatch.chdir(root)
    yield root
    os.environ.clear()  # the CLI pins Prefect/MLflow variables for the process once work would start
    os.environ.update(saved)


@pytest.fixture()
def refused(cli_project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
            ) -> Callable[..., Outcome]:
    """``refused(argv, env={...})``: the outcome of ``paperflows <argv>`` with the work replaced by a recorder."""
    reached: list[str] = []

    def supervised(jobs: list[list[str]], *args: object, **kwargs: object) -> int:
        reached.append("run")
        return 0

    def stage(*args: object, **kwargs: object) -> dict[str, object]:
        reached.append("stage")
        return {"seconds": 0.0}

    monkeypatch.setattr("paperflows.launcher.run_supervised", supervised)
    monkeypatch.setattr("paperflows.runtime.run_stage", stage)

    def call(argv: list[str], env: dict[str, str] | None = None) -> Outcome:
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        before = snapshot(cli_project)
        reached.clear()
        capsys.readouterr()
        try:
            code = main(argv)
        except SystemExit as stop:  # argparse
            code = int(stop.code or 0)
        captured = capsys.readouterr()
        after = snapshot(cli_project)
        changed = sorted(k for k in after if before.get(k) != after[k])
        return Outcome(code=code, output=captured.out + captured.err, reached=list(reached), changed=changed)

    return call
