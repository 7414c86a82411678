"""The start-up benchmark's tiny knots run stays a valid run (it ran on task names knots no longer had)."""

from __future__ import annotations

import importlib.util

from paperflows.params import validate
from pipelines.knots.params import KnotsParams
from tests.conftest import REPO

SPEC = importlib.util.spec_from_file_location("cli_startup", REPO / "benchmarks" / "cli_startup.py")
assert SPEC is not None and SPEC.loader is not None
cli_startup = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(cli_startup)


def test_the_tiny_knots_run_validates() -> None:
    params = validate(KnotsParams, cli_startup.TINY_KNOTS, "knots")
    assert params.data.tasks == ["mnist", "fashion"] and params.base.steps == 30
