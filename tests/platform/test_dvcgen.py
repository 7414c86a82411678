"""dvc.yaml and params.yaml are derived from the declarations; they must not drift."""

from __future__ import annotations

import yaml

from paperflows import dvcgen, registry
from paperflows.params import load_section
from tests.conftest import REPO


def test_dvc_yaml_matches_the_stage_declarations() -> None:
    committed = (REPO / "dvc.yaml").read_text()
    assert committed == dvcgen.render(registry.all_pipelines()), \
        "dvc.yaml drifted from pipelines/<slug>/pipeline.py: run `paperflows dvc-yaml` and commit the result"


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
    data = yaml.safe_load((REPO / "params.yaml").read_text())
    assert set(data) == set(registry.slugs())
    for pipeline in registry.all_pipelines():
        loaded = load_section(pipeline.params_model, pipeline.slug, REPO / "params.yaml")
        assert loaded == pipeline.params_model(), f"params.yaml section '{pipeline.slug}' differs from the defaults"
        assert pipeline.params_model.PAPER_SCALE and pipeline.params_model.PAPER_SOURCE
        paper = pipeline.params_model.model_validate({"scale": "paper"})
        assert paper != loaded


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
    from paperflows.errors import StageInputError
    from paperflows.runtime import check_inputs

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
