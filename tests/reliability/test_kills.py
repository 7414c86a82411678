"""Stopping a run, however it is stopped, leaves no process, no RUNNING MLflow run and no half-made outputs.

Signals on ``paperflows run`` (one pipeline, and ``all``), on ``paperflows stage`` and on ``dvc repro``:
every process is gone within seconds, MLflow runs end KILLED (or are ended as KILLED by the next start when
the whole process tree was killed outright), a fan-out stage leaves no mix of items, and a rerun after the
kill gives the same outputs as an uninterrupted run.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient

from tests.conftest import REPO, clone_repo

# long enough that the run is still in its stages when the signal arrives
SLOW = ["--set", "seeds=[0]", "--set", "base.steps=100000"]
# knots small enough to run in seconds, with fine-tuning items long enough (~3 s each) for a kill to land inside
KILLABLE = {
    "seeds": [0],
    "data": {"tasks": ["digits", "animal"], "max_train": 300, "n_val": 40, "n_test": 40, "pretrain_per_dataset": 200},
    "base": {"steps": 30},
    "lora": {"steps": 600, "head_steps": 20},
    "merge": {"lambdas": [0.5], "top_ks": [20.0]},
}
GONE_WITHIN = 10.0


def processes_with(marker: str) -> list[int]:
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


def all_gone(marker: str, within: float = GONE_WITHIN) -> list[int]:
    deadline = time.monotonic() + within
    while (left := processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def clean_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERFLOWS_", "MLFLOW_", "PREFECT_"))}
    env.update(
        PAPERFLOWS_ROOT=str(root),
        PAPERFLOWS_PROGRESS="0",
        PATH=str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""),
    )
    return env


def wait_for(predicate, proc: subprocess.Popen, what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"exited before {what}: {proc.stdout.read() if proc.stdout else ''}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def mlflow_statuses(root: Path) -> dict[str, list[str]]:
    """status -> runs: a stage run by its name (``knots.pretrain``), a pipeline's parent run by its slug."""
    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    found: dict[str, list[str]] = {}
    for run in runs:
        parent = "mlflow.parentRunId" not in run.data.tags
        found.setdefault(run.info.status, []).append(run.data.tags["paperflows.slug"] if parent else run.info.run_name)
    return found


def prefect_states(root: Path) -> dict[str, list[str]]:
    """state type -> flow and task runs (``flow`` / ``task``) in the project's Prefect database."""
    import sqlite3

    db = root / ".paperflows" / "prefect" / "prefect.db"
    found: dict[str, list[str]] = {}
    with sqlite3.connect(db) as con:
        for kind in ("flow", "task"):
            for (state,) in con.execute(f"SELECT state_type FROM {kind}_run"):
                found.setdefault(str(state), []).append(kind)
    return found


# what a run writes beside its results and DVC does not track: the run record (its times, its Prefect and MLflow
# runs), measured seconds and the rendered report
UNTRACKED = ("run.json", "report.md", "timings/")


def tree_hashes(folder: Path) -> dict[str, str]:
    """The hash of every file under ``folder`` that DVC tracks (the run record and timings left out)."""
    return {
        rel: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not (rel := str(p.relative_to(folder))).startswith(UNTRACKED)
    }


@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_the_run_and_everything_it_started(tmp_path: Path, signum: int, code: int) -> None:
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    marker = f"PAPERFLOWS_ROOT={tmp_path}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "paperflows", "run", "knots", *SLOW, "--no-progress"],
        cwd=tmp_path,
        env=clean_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # the task data written: the first stage is done and pretraining (100k steps) is under way
        wait_for(lambda: list((tmp_path / "runs" / "knots").glob("*/data/tasks.safetensors")), proc, "the run")
        time.sleep(2.0)
        sent = time.monotonic()
        proc.send_signal(signum)
        assert proc.wait(timeout=30) == code, proc.stdout.read()
        stopped_after = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    # typically 5 s (the grace period); at most 5 s + 2 s of designed waiting (grace, then the session kill), plus
    # ending the MLflow runs and the interpreters, which on a loaded 2-core machine has taken up to 17 s
    assert stopped_after < 25, f"took {stopped_after:.1f} s to stop"
    assert all_gone(marker, within=1.0) == [], "processes outlived the run"
    statuses = mlflow_statuses(tmp_path)
    assert "RUNNING" not in statuses and "knots" in statuses.get("KILLED", []), statuses


@pytest.mark.slow
def test_a_killed_supervisor_takes_its_run_with_it_and_the_next_start_ends_what_was_left(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    marker, env = f"PAPERFLOWS_ROOT={tmp_path}", clean_env(tmp_path)
    command = [sys.executable, "-m", "paperflows", "run", "knots", *SLOW, "--no-progress"]
    runs = tmp_path / "runs" / "knots"
    for whole_tree in (False, True):
        proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: len(list(runs.glob("*/data/tasks.safetensors"))) == 1 + whole_tree, proc, "the run")
            time.sleep(1.0)
            # SIGKILL: no handler runs. The supervisor alone (its run notices), or every process at once
            victims = processes_with(marker) if whole_tree else [proc.pid]
            for pid in victims:
                os.kill(pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait()
        assert all_gone(marker) == [], f"processes outlived the killed run (whole tree: {whole_tree})"
    statuses = mlflow_statuses(tmp_path)
    assert statuses.get("KILLED", []).count("knots") == 1, statuses  # the run whose supervisor alone was killed
    assert statuses.get("RUNNING", []).count("knots") == 1, statuses  # nobody was left to end this one
    assert "flow" in prefect_states(tmp_path).get("RUNNING", []), prefect_states(tmp_path)  # nor the Prefect runs

    # the next start ends the runs of the processes that are gone as KILLED
    tiny = [
        sys.executable,
        "-m",
        "paperflows",
        "run",
        "knots",
        "--no-progress",
        "--set",
        "seeds=[0]",
        "--set",
        "base.steps=20",
        "--set",
        "lora.steps=10",
        "--set",
        "lora.head_steps=10",
    ]
    done = subprocess.run(tiny, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "were still RUNNING; ended as KILLED" in done.stdout
    statuses = mlflow_statuses(tmp_path)
    assert "RUNNING" not in statuses and statuses["KILLED"].count("knots") == 2, statuses
    # ... and the Prefect flow and task runs of the killed processes as Crashed
    assert "Prefect flow run(s) of a killed process were still RUNNING; ended as Crashed" in done.stdout
    states = prefect_states(tmp_path)
    assert "RUNNING" not in states and "PENDING" not in states and "flow" in states.get("CRASHED", []), states


@pytest.mark.slow
def test_sigterm_stops_run_all_before_the_next_pipeline(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    marker = f"PAPERFLOWS_ROOT={tmp_path}"
    # several pipelines share run-all's supervisor ('all' is every slug in order); hrf is listed first
    command = [sys.executable, "-m", "paperflows", "run", "hrf,knots,nsot", "--no-progress", "--jobs", "1"]
    proc = subprocess.Popen(
        command, cwd=tmp_path, env=clean_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        # pipelines run in the order given: the signal lands while hrf, the first, trains
        wait_for(lambda: (tmp_path / "outputs" / "hrf" / "data" / "lowdim.safetensors").is_file(), proc, "hrf")
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 143, proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert all_gone(marker) == []
    assert sorted(p.name for p in (tmp_path / "outputs").iterdir()) == ["hrf"], "a later pipeline started"
    statuses = mlflow_statuses(tmp_path)
    assert "RUNNING" not in statuses and "hrf" in statuses.get("KILLED", []), statuses


@pytest.mark.slow
def test_killing_dvc_repro_or_a_stage_leaves_no_writer_and_no_mix(tmp_path: Path) -> None:
    repo = clone_repo(tmp_path / "repo")
    params = yaml.safe_load((repo / "params.yaml").read_text())
    for section, values in KILLABLE.items():
        params["knots"][section] = {**params["knots"][section], **values} if isinstance(values, dict) else values
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    marker, env = f"PAPERFLOWS_ROOT={repo}", clean_env(repo)
    loras, staged = repo / "outputs/knots/models/lora", repo / "outputs/knots/models/lora.partial"

    def run(*cmd: str) -> None:
        done = subprocess.run(list(cmd), cwd=repo, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    run("dvc", "repro", "knots-pretrain")
    for signum, command in (
        (signal.SIGKILL, ["dvc", "repro", "knots-finetune"]),
        (signal.SIGTERM, ["dvc", "repro", "knots-finetune"]),
        (signal.SIGTERM, [sys.executable, "-m", "paperflows", "stage", "knots", "finetune"]),
    ):
        started = time.time()
        proc = subprocess.Popen(command, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

        def second_item() -> bool:  # this attempt's first item done, its second under way
            second = staged / "animal"
            return second.is_dir() and second.stat().st_mtime >= started and any((staged / "digits").glob("*"))

        try:
            wait_for(second_item, proc, "the second fine-tuning item")
            proc.send_signal(signum)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert all_gone(marker) == [], f"a writer outlived `{' '.join(command)}` ({signum.name})"
        assert not loras.exists(), "a stopped fan-out stage made its outputs visible"
        if command[0] != "dvc":
            assert proc.returncode == 143 and "Traceback" not in proc.stdout.read()

    run("dvc", "repro", "knots")
    after_kills = tree_hashes(repo / "outputs" / "knots")
    run("dvc", "repro", "--force", "knots-finetune", "knots-merge", "knots")  # the last stage is named for the paper
    uninterrupted = tree_hashes(repo / "outputs" / "knots")
    assert after_kills == uninterrupted
