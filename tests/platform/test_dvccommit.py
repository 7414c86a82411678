"""``python -m paperflows.dvccommit``: several stages recorded in dvc.lock with one write, exactly as
``dvc commit --force`` records them one by one."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from paperflows.dvccommit import commit_stages
from paperflows.launcher import _kill_session

DVC_YAML = """stages:
  first:
    cmd: python -c "open('a.txt', 'w').write('a')"
    deps: [code.py]
    params: [alpha]
    outs: [a.txt]
  second:
    cmd: python -c "open('b.txt', 'w').write('b')"
    deps: [a.txt]
    outs: [b.txt]
  third:
    cmd: python -c "open('c.txt', 'w').write('c')"
    deps: [code.py]
    outs: [c.txt]
"""


def _project(root: Path) -> Path:
    root.mkdir()
    subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=root, check=True)
    (root / "dvc.yaml").write_text(DVC_YAML)
    (root / "params.yaml").write_text("alpha: 1\n")
    (root / "code.py").write_text("print('code')\n")
    for name, text in (("a.txt", "a"), ("b.txt", "b"), ("c.txt", "c")):  # outputs made outside DVC, as a flow does
        (root / name).write_text(text)
    return root


def test_one_write_records_what_dvc_commit_records(tmp_path: Path) -> None:
    ours, theirs = _project(tmp_path / "ours"), _project(tmp_path / "theirs")
    assert commit_stages(["first", "second"], ours) == ["first", "second"]
    subprocess.run(
        [sys.executable, "-m", "dvc", "commit", "--force", "--quiet", "first", "second"], cwd=theirs, check=True
    )
    lock = (ours / "dvc.lock").read_text()
    assert lock == (theirs / "dvc.lock").read_text()
    assert "first:" in lock and "second:" in lock and "third:" not in lock  # only the stages named
    assert "md5: 0cc175b9c0f1b6a831c399e269772661" in lock  # a.txt's content hash, moved into the cache
    status = subprocess.run(
        [sys.executable, "-m", "dvc", "status", "first", "second"], cwd=ours, capture_output=True, text=True
    )
    assert "up to date" in status.stdout, status.stdout + status.stderr


def test_an_unknown_stage_is_an_error_that_names_it(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    proc = subprocess.run(
        [sys.executable, "-m", "paperflows.dvccommit", "first", "nope"], cwd=root, capture_output=True, text=True
    )
    assert proc.returncode == 1 and "nope" in proc.stderr
    assert not (root / "dvc.lock").exists()  # nothing half-recorded


def test_stopping_a_session_returns_when_its_reaped_leader_is_gone() -> None:
    """The supervisor stops its Prefect server with a grace period; an exited but unreaped leader kept the
    session looking alive, so every stop waited the whole grace (5 s at the end of every run)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    started = time.monotonic()
    _kill_session(proc.pid, grace=30.0, leader=proc)
    assert time.monotonic() - started < 10.0, "waited out the grace for a process that had exited on SIGTERM"
    assert proc.returncode is not None


def test_no_stage_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from paperflows.dvccommit import main

    assert main([]) == 2
    assert "usage" in capsys.readouterr().err
