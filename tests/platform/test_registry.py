"""Discovery of the paper packages: nothing listed by hand, a broken paper named and isolated."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from paperflows import registry
from paperflows.registry import PipelineImportError, Registry, UnknownPipelineError

GOOD_INIT = """from paperflows.paper import Paper
ABOUT = Paper(slug="good", title="A good paper", arxiv="0000.00001", claim="it works")
"""
GOOD_PARAMS = """from paperflows.params import PipelineParams
class GoodParams(PipelineParams):
    PAPER_SCALE = {"seeds": [0, 1, 2, 3]}
"""
GOOD_PIPELINE = '''from components.io import save_json
from paperflows import Pipeline, stage
from pipelines_fixture.good import ABOUT
from pipelines_fixture.good.params import GoodParams

@stage(outs=("report.json",))
def report(ctx):
    """Write the report."""
    save_json({}, ctx.path("report.json"))

PIPELINE = Pipeline(paper=ABOUT, params_model=GoodParams, stages=(report,))
'''


@pytest.fixture()
def fixture_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Registry:
    root = tmp_path / "pipelines_fixture"
    (root / "good").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "good" / "__init__.py").write_text(GOOD_INIT)
    (root / "good" / "params.py").write_text(GOOD_PARAMS)
    (root / "good" / "pipeline.py").write_text(GOOD_PIPELINE)
    (root / "broken").mkdir()
    (root / "broken" / "__init__.py").write_text(GOOD_INIT.replace('"good"', '"broken"'))
    (root / "broken" / "pipeline.py").write_text("import a_module_that_does_not_exist\n")
    (root / "_template").mkdir()  # not a paper: skipped
    (root / "notes").mkdir()  # no pipeline.py: not a paper
    (root / "notes" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield Registry("pipelines_fixture")
    for name in [m for m in sys.modules if m.startswith("pipelines_fixture")]:
        del sys.modules[name]


def test_packages_are_discovered_not_listed(fixture_package: Registry) -> None:
    assert fixture_package.slugs() == ["broken", "good"]


def test_a_broken_paper_is_named_and_does_not_stop_the_others(fixture_package: Registry) -> None:
    loaded, broken = fixture_package.load_all()
    assert [p.slug for p in loaded] == ["good"]
    assert list(broken) == ["broken"]
    assert "a_module_that_does_not_exist" in str(broken["broken"]) and "'broken'" in str(broken["broken"])
    with pytest.raises(PipelineImportError, match="broken"):
        fixture_package.get("broken")
    # its card still reads: `paperflows list` can show it as broken
    assert fixture_package.paper("broken").title == "A good paper"


def test_params_model_comes_from_params_py_alone(fixture_package: Registry) -> None:
    model = fixture_package.params_model("good")
    assert model.__name__ == "GoodParams"
    assert "pipelines_fixture.good.pipeline" not in sys.modules


def test_unknown_slug_lists_the_known_ones(fixture_package: Registry) -> None:
    with pytest.raises(UnknownPipelineError, match="known: broken, good"):
        fixture_package.get("nosuch")


def test_the_project_registry_finds_every_paper_package() -> None:
    folders = sorted(p.parent.name for p in (Path(registry.__file__).parents[1] / "pipelines").glob("*/pipeline.py"))
    assert registry.slugs() == folders
    for slug in folders:
        pipeline = registry.get(slug)
        assert pipeline.slug == slug and registry.params_model(slug) is pipeline.params_model
