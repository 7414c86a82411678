"""Code deps of a stage are derived from the code it runs: a component used by one stage is its dep only."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from paperflows import registry
from paperflows.codedeps import stage_code_files

HELPER = """import json

from components.metrics.classification import accuracy
from components.data.toy import MOONS_CENTRE


def used_by_a():
    from components.merging import task_vectors  # a lazy import counts
    return accuracy, task_vectors


def constant_user():
    return MOONS_CENTRE  # a constant names no module: its import statement does
"""
PIPELINE = """from components.io import save_json
from pipelines_deps.toy import helpers


def stage_a(ctx):
    helpers.used_by_a()


def stage_b(ctx):
    save_json({}, "x")


class Thing:
    def method(self):
        return helpers.constant_user()


def stage_c(ctx):
    Thing().method()
"""


@pytest.fixture()
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    pkg = tmp_path / "pipelines_deps" / "toy"
    pkg.mkdir(parents=True)
    (tmp_path / "pipelines_deps" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text(HELPER)
    (pkg / "pipeline.py").write_text(PIPELINE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module("pipelines_deps.toy.pipeline")
    yield module
    for name in [m for m in sys.modules if m.startswith("pipelines_deps")]:
        del sys.modules[name]


def test_functions_of_the_paper_package_are_followed_to_the_components_they_use(toy) -> None:
    a, b, c = (stage_code_files(getattr(toy, name)) for name in ("stage_a", "stage_b", "stage_c"))
    assert "components/metrics/classification.py" in a and "components/merging/task_vectors.py" in a
    assert "components/metrics/classification.py" not in b and "components/merging/task_vectors.py" not in b
    assert "components/io.py" in b
    assert "components/data/toy.py" in c  # through a class method and a constant
    # every stage depends on the engine's seeding
    assert all("paperflows/seeds.py" in deps for deps in (a, b, c))


def test_a_component_used_by_one_knots_stage_is_a_dep_of_that_stage_only() -> None:
    pipeline = registry.get("knots")
    deps = {s.name: stage_code_files(s.run) for s in pipeline.stages}
    users = [name for name, files in deps.items() if "components/merging/knots.py" in files]
    assert users == ["merge"]
    assert [n for n, files in deps.items() if "components/data/images.py" in files] == ["prepare"]
    assert all("pipelines/knots/pipeline.py" in files for files in deps.values())
    assert "pipelines/knots/report.py" in deps["report"]
