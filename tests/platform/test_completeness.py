"""Every registered paper has what the platform promises for it; `paperflows new` produces such a paper."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from paperflows import deploy, registry
from paperflows.dvcgen import stages_by_slug
from paperflows.scaffold import ScaffoldError, scaffold
from tests.conftest import REPO, clone_repo

MAX_PIPELINE_LINES = 300
PAPER_FILES = ("__init__.py", "params.py", "pipeline.py", "report.py", "plots.py")


@pytest.mark.parametrize("slug", registry.slugs())
def test_a_registered_paper_has_its_files_tests_params_row_and_deployment(slug: str) -> None:
    package = REPO / "pipelines" / slug
    assert all((package / name).is_file() for name in PAPER_FILES), f"pipelines/{slug} lacks one of {PAPER_FILES}"
    lines = len((package / "pipeline.py").read_text().splitlines())
    assert lines <= MAX_PIPELINE_LINES, f"pipelines/{slug}/pipeline.py has {lines} lines (at most {MAX_PIPELINE_LINES})"
    tests = REPO / "tests" / "pipelines" / slug
    assert (tests / "test_pipeline.py").is_file() and (tests / "test_report.py").is_file(), f"{tests} is incomplete"
    assert slug in (yaml.safe_load((REPO / "params.yaml").read_text()) or {}), f"params.yaml has no '{slug}' section"
    assert f"| `{slug}` |" in (REPO / "README.md").read_text(), f"README.md has no row for '{slug}'"
    pipeline = registry.get(slug)
    entrypoints = [d["entrypoint"] for d in yaml.safe_load((REPO / "prefect.yaml").read_text())["deployments"]]
    assert deploy.entrypoint(pipeline) in entrypoints, f"prefect.yaml has no deployment for '{slug}'"
    assert stages_by_slug(REPO / "dvc.yaml").get(slug) == [s.name for s in pipeline.stages]


def test_the_scaffold_refuses_to_overwrite(tmp_path: Path) -> None:
    (tmp_path / "pipelines" / "knots").mkdir(parents=True)
    (tmp_path / "params.yaml").write_text("knots: {}\n")
    (tmp_path / "README.md").write_text("| slug | paper | stages | headline claim |\n|---|---|---|---|\n")
    with pytest.raises(ScaffoldError, match="already exists"):
        scaffold(tmp_path, "knots", "T", "1", "c")
    with pytest.raises(ScaffoldError, match="slug 'Bad-Slug'"):
        scaffold(tmp_path, "Bad-Slug", "T", "1", "c")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["README.md", "knots", "params.yaml", "pipelines"]


@pytest.mark.slow
def test_paperflows_new_gives_a_paper_that_passes_the_checks_and_its_tests(tmp_path: Path) -> None:
    repo = clone_repo(tmp_path / "repo")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERFLOWS_", "MLFLOW_", "PREFECT_"))}
    env["PAPERFLOWS_ROOT"] = str(repo)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *args], cwd=repo, env=env, capture_output=True, text=True, timeout=600)

    made = run(
        "-m",
        "paperflows",
        "new",
        "demo_paper",
        "--title",
        "A demo",
        "--arxiv",
        "2501.00001",
        "--claim",
        "method > baseline",
    )
    assert made.returncode == 0, made.stderr
    for check in (("dvc-yaml", "--check"), ("deploy", "--check")):
        result = run("-m", "paperflows", *check)
        assert result.returncode == 0, result.stderr
    again = run("-m", "paperflows", "new", "demo_paper", "--title", "A demo", "--arxiv", "1", "--claim", "c")
    assert again.returncode == 2 and "already exists" in again.stderr
    tests = run(
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/pipelines/demo_paper",
        "tests/platform/test_completeness.py::test_a_registered_paper_has_its_files_tests_params_row_and_deployment",
    )
    assert tests.returncode == 0, tests.stdout[-3000:]
    assert "demo_paper" in tests.stdout or "passed" in tests.stdout
