"""The command line: exit codes and messages a script can rely on; bad input writes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def paperflows(*args: str, root: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PAPERFLOWS_ROOT": str(root),
        "MLFLOW_TRACKING_URI": f"sqlite:///{root / 'mlflow.db'}",
        "PREFECT_HOME": str(root / "prefect-home"),
    }
    return subprocess.run(
        [sys.executable, "-m", "paperflows", *args], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    return tmp_path


def _written(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.name != "params.yaml")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "nosuch"], "unknown pipeline 'nosuch'"),
        (["run", "knots", "--set", "lora.rank=8"], "knots.lora.rank: unknown parameter"),
        (["run", "knots", "--set", "lora.r=eight"], "knots.lora.r: Input should be a valid integer"),
        (["run", "knots", "--set", "lora.r=0"], "knots.lora.r: Input should be greater than or equal to 1"),
        (["run", "nsot", "--set", "train.betas=[1.5]"], "nsot.train.betas"),
        (["run", "knots", "--set", "novalue"], "expected key=value"),
        (["run", "all", "--set", "seeds=[0]"], "with several pipelines, keys start with a pipeline slug"),
        (["stage", "knots", "nosuch"], "has no stage 'nosuch'"),
        (["stage", "knots", "merge"], "outputs/knots/data/tasks.safetensors is missing"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_exits_2_names_the_problem_and_writes_nothing(root: Path, args: list[str], message: str) -> None:
    result = paperflows(*args, root=root)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert _written(root) == []


def test_malformed_params_file_is_reported_with_its_path(root: Path) -> None:
    (root / "params.yaml").write_text("knots: [1, 2\n")
    result = paperflows("run", "knots", root=root)
    assert result.returncode == 2 and "params.yaml: not valid YAML" in result.stderr
    (root / "params.yaml").write_text("knots:\n  lora:\n    r: -1\n")
    result = paperflows("stage", "knots", "prepare", root=root)
    assert result.returncode == 2 and "knots.lora.r" in result.stderr
    assert _written(root) == []


def test_list_and_dvc_yaml_check(root: Path) -> None:
    listed = paperflows("list", root=root)
    assert listed.returncode == 0 and "knots" in listed.stdout and "nsot" in listed.stdout
    (root / "dvc.yaml").write_text((REPO / "dvc.yaml").read_text())
    assert paperflows("dvc-yaml", "--check", root=root).returncode == 0
    (root / "dvc.yaml").write_text("stages: {}\n")
    drift = paperflows("dvc-yaml", "--check", root=root)
    assert drift.returncode == 1 and "differs" in drift.stderr


def test_report_without_runs_says_so(root: Path) -> None:
    result = paperflows("report", root=root)
    assert result.returncode == 0 and "(no run yet)" in result.stdout


def test_missing_real_data_folder_is_refused_before_work(root: Path) -> None:
    result = paperflows("run", "nsot", "--set", f"data.pc15k_root={root / 'nowhere'}", root=root)
    assert result.returncode == 2 and "nsot.data.pc15k_root: no folder at" in result.stderr
    assert "ShapeNetCore.v2.PC15k" in result.stderr and _written(root) == []


def test_a_malformed_data_file_in_params_yaml_stops_the_dvc_stage_before_work(root: Path) -> None:
    """`dvc repro` calls `paperflows stage`: the data-file check runs there too, before any output or run."""
    import yaml

    (root / "meals.csv").write_text('meal_description,carb\n"a bowl of rice",lots\n')
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["nutribench"]["data"]["path"] = "meals.csv"
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    result = paperflows("stage", "nutribench", "curate", root=root)
    assert result.returncode == 2 and "nutribench.data.path" in result.stderr, result.stderr
    assert _written(root) == ["meals.csv"]
