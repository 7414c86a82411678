"""NSOT: a Prefect smoke run at tiny size, and the claim test on a reduced experiment."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.io import load_json, load_table
from pipelines.nsot.pipeline import PIPELINE, NsotParams
from paperflows.params import validate
from paperflows.runtime import execute
from paperflows.settings import load_settings

TINY = {"seeds": [0], "data": {"n_train": 24, "n_test": 16, "n_points": 16, "superset_points": 32},
        "train": {"steps": 10, "batch_size": 8, "betas": [0.2]},
        "eval": {"n_generated": 16, "euler_steps": [1, 2], "timing_points": [16, 32], "timing_steps": 1,
                 "pair_batches": 2}}


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    report = run_flow_and_check(PIPELINE, NsotParams.model_validate(TINY), project)
    assert [r["method"] for r in report["rows"]] == ["independent", "online_ot", "nsot", "nsot_b0.2"]


@pytest.mark.claim
def test_claims_on_the_reduced_experiment(project: Path) -> None:
    """Reduced experiment (3 seeds, fewer steps): the robust claims must hold, the others must be
    reported consistently with the measured table."""
    params = validate(NsotParams, {"train": {"steps": 200, "betas": [0.1]},
                                   "eval": {"euler_steps": [1, 2, 5], "timing_points": [64, 512]}}, "nsot")
    summary = execute(PIPELINE, params, load_settings(), project / "claim", entry="test", progress=False)
    claims = {c["claim"]: c for c in summary.report["claims"]}
    cost = load_json(project / "claim" / "metrics" / "couplings.json")["pair_cost"]
    # claim 1 is about the couplings themselves (no training noise): it must hold
    assert cost["nsot"] <= 1.2 * cost["online_ot"] and cost["nsot"] <= 0.5 * cost["independent"]
    assert claims["NSOT pair cost is within ~20% of exact per-sample OT and far below independent coupling"]["holds"]
    # claim 3 recomputed from the per-seed evaluation table
    rows = load_table(project / "claim" / "tables" / "eval.parquet")

    def few_step(method: str) -> float:
        values = [r["1nna_cd"] for r in rows if r["method"] == method]
        assert len(values) == len(params.seeds) * len(params.eval.euler_steps)
        return sum(values) / len(values)

    claim3 = next(c for name, c in claims.items() if name.startswith("At [1, 2, 5] Euler steps"))
    assert claim3["holds"] == (few_step("online_ot") < few_step("independent")
                               and few_step("nsot") < few_step("independent"))
    # the offline superset pairs lower the transport cost of the stored pairs by a large factor
    ot = load_json(project / "claim" / "metrics" / "ot_precompute.json")
    assert ot["mean_pair_cost"] < 0.5 * ot["mean_independent_cost"]
