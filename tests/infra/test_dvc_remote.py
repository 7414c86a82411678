"""The DVC remotes: the committed local default (push/pull round trip on a real stage's output in a copy
of the project) and the S3-compatible one set from the environment by infra/dvc-remote.sh."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import clone_repo

BIN = str(Path(sys.executable).parent)


def _env(repo: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERFLOWS_", "MLFLOW_", "PREFECT_", "AWS_"))}
    env.update(PATH=BIN + os.pathsep + env.get("PATH", ""), PAPERFLOWS_ROOT=str(repo), **extra)
    return env


def _run(cmd: list[str], repo: Path, ok: bool = True, **extra: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, cwd=repo, env=_env(repo, **extra), capture_output=True, text=True, timeout=600)
    if ok:
        assert result.returncode == 0, f"{cmd}:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    return result


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return clone_repo(tmp_path_factory.mktemp("dvc") / "repo")


@pytest.mark.slow
def test_push_and_pull_round_trip_through_the_local_default_remote(repo: Path) -> None:
    assert _run(["dvc", "remote", "default"], repo).stdout.strip() == "local"
    remote = repo / ".paperflows" / "dvc-remote"
    # the remote's URL is relative to .dvc/, so it is the project's own .paperflows folder, git-ignored
    assert _run(["dvc", "remote", "list"], repo).stdout.split()[:2] == ["local", str(remote)]
    assert _run(["git", "check-ignore", "-q", str(remote / "files")], repo).returncode == 0

    _run(["dvc", "repro", "--single-item", "knots-prepare"], repo)
    output = repo / "outputs" / "knots" / "data" / "tasks.safetensors"
    digest = hashlib.md5(output.read_bytes()).hexdigest()
    pushed = _run(["dvc", "push", "knots-prepare"], repo)
    assert "1 file pushed" in pushed.stdout, pushed.stdout
    stored = remote / "files" / "md5" / digest[:2] / digest[2:]
    assert stored.is_file() and stored.read_bytes() == output.read_bytes()

    # a checkout that has neither the output nor the cache gets it back from the remote
    output.unlink()
    shutil.rmtree(repo / ".dvc" / "cache")
    pulled = _run(["dvc", "pull", "knots-prepare"], repo)
    assert hashlib.md5(output.read_bytes()).hexdigest() == digest, pulled.stdout
    assert "up to date" in _run(["dvc", "status", "knots-prepare"], repo).stdout


def test_s3_remote_is_set_from_the_environment_in_config_local_only(repo: Path) -> None:
    script = str(repo / "infra" / "dvc-remote.sh")
    committed = (repo / ".dvc" / "config").read_text()
    out = _run([script, "s3"], repo, PAPERFLOWS_DVC_REMOTE_URL="s3://paperflows-dvc/cache",
               PAPERFLOWS_DVC_S3_ENDPOINT="http://127.0.0.1:9000",
               AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="do-not-write-me").stdout
    assert "default remote: s3" in out
    local = (repo / ".dvc" / "config.local").read_text()
    assert "url = s3://paperflows-dvc/cache" in local and "endpointurl = http://127.0.0.1:9000" in local
    assert "AKIDEXAMPLE" not in local and "do-not-write-me" not in local
    assert (repo / ".dvc" / "config").read_text() == committed
    assert _run(["git", "status", "--porcelain", ".dvc"], repo).stdout.strip() == ""  # nothing for git to commit
    assert _run(["dvc", "remote", "default"], repo).stdout.strip() == "s3"

    _run([script, "local"], repo)
    assert _run(["dvc", "remote", "default"], repo).stdout.strip() == "local"
    assert "s3" not in _run(["dvc", "remote", "list"], repo).stdout


@pytest.mark.parametrize(("url", "message"), [
    ("", "set PAPERFLOWS_DVC_REMOTE_URL=s3://<bucket>/<prefix>"),
    ("minio:9000/bucket", "PAPERFLOWS_DVC_REMOTE_URL must start with s3://"),
])
def test_s3_remote_without_a_valid_url_is_refused(repo: Path, url: str, message: str) -> None:
    script = str(repo / "infra" / "dvc-remote.sh")
    _run([script, "local"], repo)
    result = _run([script, "s3"], repo, ok=False, PAPERFLOWS_DVC_REMOTE_URL=url)
    assert result.returncode != 0 and message in result.stderr
    assert _run(["dvc", "remote", "default"], repo).stdout.strip() == "local"
    assert "s3" not in _run(["dvc", "remote", "list"], repo).stdout
