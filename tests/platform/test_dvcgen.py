"""dvc.yaml and params.yaml are derived from the declarations; they must not drift."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from paperflows import dvcgen, registry
from paperflows.contract import StageContext
from paperflows.engine import run_stage
from paperflows.errors import StageInputError
from paperflows.params import load_section
from tests.conftest import REPO

WALL_CLOCK_WORDS = frozenset({"sec", "secs", "second", "seconds", "ms", "time", "wall", "elapsed", "duration", "clock"})


def _wall_clock(key: str) -> bool:
    """A key naming a measurement of time: one of its words (split on anything but letters) is a time word, so
    ``train_seconds`` and ``step_ms`` count and ``preferdiff_gt_mse`` or ``claims`` do not."""
    return any(word in WALL_CLOCK_WORDS for word in re.split(r"[^a-z]+", key.lower()))


def test_dvc_yaml_matches_the_stage_declarations() -> None:
    committed = (REPO / "dvc.yaml").read_text()
    assert committed == dvcgen.render(registry.all_pipelines()), (
        "dvc.yaml drifted from pipelines/<slug>/pipeline.py: run `paperflows dvc-yaml` and commit the result"
    )


def test_every_stage_is_in_dvc_yaml_with_existing_code_deps() -> None:
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    for pipeline in registry.all_pipelines():
        for stage in pipeline.stages:
            entry = stages[pipeline.dvc_name(stage)]
            assert entry["cmd"] == f"paperflows stage {pipeline.slug} {stage.name}"
            for dep in entry["deps"]:
                if not dep.startswith("outputs/"):
                    assert (REPO / dep).exists(), f"{pipeline.dvc_name(stage)}: code dep {dep} does not exist"
    assert all(p.slug in stages for p in registry.all_pipelines()), "`dvc repro <slug>` needs a stage named <slug>"


def test_params_yaml_holds_the_validated_defaults_of_every_pipeline() -> None:
    text = (REPO / "params.yaml").read_text()
    assert dvcgen.completed_params_yaml(text, registry.all_pipelines()) == text, (
        "params.yaml lacks a declared key: run `paperflows dvc-yaml` and commit the result"
    )
    data = yaml.safe_load(text)
    assert set(data) == set(registry.slugs())
    for pipeline in registry.all_pipelines():
        loaded = load_section(pipeline.params_model, pipeline.slug, REPO / "params.yaml")
        assert loaded == pipeline.params_model(), f"params.yaml section '{pipeline.slug}' differs from the defaults"
        assert pipeline.params_model.PAPER_SCALE and pipeline.params_model.PAPER_SOURCE
        paper = pipeline.params_model.model_validate({"scale": "paper"})
        assert paper != loaded
        model = pipeline.params_model
        if model.EVIDENCE_SCALE:  # a preset states why it decides and what it cost when it was run
            evidence = model.model_validate({"scale": "evidence"})
            assert evidence != loaded and model.EVIDENCE_SOURCE, pipeline.slug
            assert {"cpu", "evidence"} <= set(model.SCALE_COST), f"{pipeline.slug}: SCALE_COST lacks a measured cost"


def test_every_param_field_has_a_description() -> None:
    def walk(model, prefix):
        for name, field in model.model_fields.items():
            assert field.description, f"{prefix}.{name} has no description (the Prefect form shows it)"
            sub = field.annotation
            if isinstance(sub, type) and hasattr(sub, "model_fields"):
                walk(sub, f"{prefix}.{name}")

    for pipeline in registry.all_pipelines():
        walk(pipeline.params_model, pipeline.slug)


def test_the_early_input_check_from_dvc_yaml_agrees_with_the_declarations(tmp_path) -> None:
    """`paperflows stage` refuses a stage run too early from dvc.yaml (no paper libraries imported): for
    every stage, on an empty workspace and with the earlier stages' outputs present, it finds what the
    engine's check of the declarations finds, with the same message."""
    from paperflows.engine import check_inputs
    from paperflows.errors import StageInputError

    def both(pipeline, stage, root):
        early = dvcgen.missing_input(REPO / "dvc.yaml", root, pipeline.slug, stage.name)
        try:
            check_inputs(pipeline, stage, root / "outputs" / pipeline.slug)
        except StageInputError as err:
            return str(early) if early else None, str(err)
        return str(early) if early else None, None

    for pipeline in registry.all_pipelines():
        for done, stage in enumerate(pipeline.stages):
            empty = tmp_path / f"{pipeline.slug}-{done}-empty"
            early, engine = both(pipeline, stage, empty)
            assert early == engine and (engine is not None) == bool(stage.deps), (pipeline.slug, stage.name, early)
            root = tmp_path / f"{pipeline.slug}-{done}"
            for earlier in pipeline.stages[:done]:
                for rel in earlier.written():
                    target = root / "outputs" / pipeline.slug / rel
                    if rel.endswith("/"):
                        target.mkdir(parents=True, exist_ok=True)
                    else:
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.touch()
            assert both(pipeline, stage, root) == (None, None), (pipeline.slug, stage.name)


class _Reads:
    """A view of a params model that records the dotted key of every value read through it (``train.lr``).
    A pydantic method (``model_dump``, ...) reads its whole section; methods and properties of the params
    classes themselves run on the view, so what they read is recorded too."""

    __slots__ = ("_model", "_prefix", "_log")

    def __init__(self, model: BaseModel, prefix: str, log: set[str]) -> None:
        object.__setattr__(self, "_model", model)
        object.__setattr__(self, "_prefix", prefix)
        object.__setattr__(self, "_log", log)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._model, name)
        if name in type(self._model).model_fields:
            if isinstance(value, BaseModel):
                return _Reads(value, f"{self._prefix}{name}.", self._log)
            self._log.add(f"{self._prefix}{name}")
            return value
        declared = getattr(type(self._model), name, None)
        if isinstance(declared, property):
            return declared.fget(self)
        if callable(declared) and not hasattr(BaseModel, name):
            return declared.__get__(self)
        self._log.add(self._prefix.rstrip(".") or "<every key>")
        return value


def _keys(tree: Any, prefix: str = "") -> list[str]:
    if isinstance(tree, dict):
        return [k for key, value in tree.items() for k in _keys(value, f"{prefix}{key}/")]
    return [prefix.rstrip("/")]


@pytest.mark.parametrize("slug", registry.slugs())
def test_every_stage_declares_every_param_it_reads(slug: str, tmp_path: Path) -> None:
    """Each stage runs at the paper's tiny test values on a view of the params that records every key read.
    A key read but not declared is a silent cache bug: DVC would keep the stage's old outputs after that key
    changed. The metric files DVC compares across commits and experiments hold no wall-clock measurement."""
    pipeline = registry.get(slug)
    tiny = importlib.import_module(f"tests.pipelines.{slug}.test_pipeline").TINY
    params = pipeline.params_model.model_validate(tiny)
    for stage in pipeline.stages:
        read: set[str] = set()
        run_stage(
            StageContext(
                pipeline=pipeline,
                stage=stage,
                params=_Reads(params, "", read),
                root=tmp_path,
                progress=False,
                threads=1,
                project=REPO,
            )
        )
        declared = pipeline.stage_params(stage)
        undeclared = sorted(k for k in read if not any(k == d or k.startswith(f"{d}.") for d in declared))
        assert not undeclared, f"{slug}.{stage.name} reads {undeclared} but declares only {declared}"
        for rel in stage.metrics:
            timed = [k for k in _keys(json.loads((tmp_path / rel).read_text())) if _wall_clock(k)]
            assert not timed, f"{slug}.{stage.name}: {rel} holds machine measurements {timed}; use timings="


def test_a_key_missing_from_params_yaml_is_added_with_its_default_and_the_rest_kept() -> None:
    knots = registry.get("knots")
    text = "# header line\n# second line\nknots:\n  lora:\n    r: 2\n  unknown: 1\n"
    done = yaml.safe_load(dvcgen.completed_params_yaml(text, [knots]))
    defaults = knots.params_model().model_dump(mode="json")
    assert done["knots"]["lora"]["r"] == 2  # the user's value stays
    assert done["knots"]["unknown"] == 1  # left for validation to refuse by name
    assert done["knots"]["lora"]["alpha"] == defaults["lora"]["alpha"] and done["knots"]["seeds"] == defaults["seeds"]
    assert list(done["knots"])[: len(defaults)] == list(defaults)  # the model's order
    assert dvcgen.completed_params_yaml(text, [knots]).startswith("# header line\n# second line\nknots:")
    with pytest.raises(StageInputError, match="top level"):
        dvcgen.completed_params_yaml("- 1\n", [knots])
