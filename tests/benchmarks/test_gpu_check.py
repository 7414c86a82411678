"""benchmarks/gpu_check.py on CPU with the papers' tiny test settings: the check itself runs and counts steps."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest

from tests.conftest import REPO

SPEC = importlib.util.spec_from_file_location("gpu_check", REPO / "benchmarks" / "gpu_check.py")
assert SPEC is not None and SPEC.loader is not None
gpu_check = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(gpu_check)


def test_every_paper_has_a_short_paper_preset() -> None:
    from paperflows import registry
    from paperflows.params import merge_trees, validate

    assert set(gpu_check.SHORT) == set(registry.slugs())
    for slug, short in gpu_check.SHORT.items():
        params = validate(registry.params_model(slug), merge_trees({"scale": "paper"}, short), slug)
        assert params.scale == "paper" and list(params.seeds) == [0], slug


@pytest.mark.parametrize("slug", ["nsot", "star"])
def test_the_check_times_the_training_stages_and_counts_their_steps(slug: str, project: Path) -> None:
    tiny = importlib.import_module(f"tests.pipelines.{slug}.test_pipeline").TINY
    rows = gpu_check.check(slug, overrides={**tiny, "seeds": [0]}, paper=False)
    assert rows and all(r["device"] == "cpu" and r["optimiser steps"] > 0 and r["seconds"] > 0 for r in rows)
    assert all(r["peak memory (GiB)"] > 0 for r in rows)
