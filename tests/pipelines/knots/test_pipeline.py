"""KnOTS: one tiny Prefect run end to end, and the parameter rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from paperflows.params import ParamsError, validate
from pipelines.knots.params import KnotsParams
from pipelines.knots.pipeline import PIPELINE

TINY = {
    "seeds": [0],
    "data": {"tasks": ["animal", "digits"], "max_train": 100, "n_val": 40, "n_test": 40, "pretrain_per_dataset": 200},
    "base": {"steps": 30},
    "lora": {"steps": 20, "head_steps": 10},
    "merge": {"lambdas": [0.5, 1.0], "top_ks": [20.0, 100.0]},
}


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    report = run_flow_and_check(PIPELINE, KnotsParams.model_validate(TINY), project)
    assert [r["method"] for r in report["rows"]] == ["no merge (λ = 0)", *KnotsParams().merge.methods]
    assert [c["id"] for c in report["claims"]] == ["knots_ties_beats_ties"] and report["claims"][0]["headline"]
    assert report["claims"][0]["verdict"] == "not resolved"  # one seed: no interval
    assert {g["reference"] for g in report["claims"][0]["gates"]} >= {"no merge (λ = 0)"}
    assert report["checks"][0]["id"] == "knots_ta_equals_ta" and report["checks"][0]["passed"]


@pytest.mark.parametrize(
    "data, key",
    [
        ({"base": {"d_model": 30, "n_heads": 4}}, "knots.base"),
        ({"data": {"tasks": ["animal", "animal"]}}, "knots.data.tasks"),
        ({"data": {"tasks": ["rotate90", "mnist"]}}, "knots.data.tasks"),
        ({"base": {"input_size": 50}}, "knots.base.input_size"),
        ({"base": {"encoder": "vit_b32"}}, "knots.base.encoder"),
        ({"merge": {"top_ks": [150.0]}}, "knots.merge.top_ks"),
    ],
)
def test_inconsistent_params_are_refused_with_the_key(data: dict, key: str) -> None:
    with pytest.raises(ParamsError, match=key.replace(".", r"\.")):
        validate(KnotsParams, data, "knots")


def test_the_paper_preset_uses_the_pretrained_vit_s14() -> None:
    p = KnotsParams.model_validate({"scale": "paper"})
    assert p.base.encoder == "vit_s14" and p.lora.r == 16 and max(p.merge.lambdas) > 1.0
    assert KnotsParams().base.encoder == "tiny" and len(KnotsParams().seeds) >= 8


def test_the_evidence_preset_repeats_the_default_regime_over_more_seeds_with_the_claims_arms() -> None:
    default, evidence = KnotsParams(), KnotsParams.model_validate({"scale": "evidence"})
    assert len(evidence.seeds) == 20 > len(default.seeds)
    assert evidence.merge.methods == ["ta", "ties", "knots_ta", "knots_ties"]  # the headline's arms and TA's check
    assert evidence.lora == default.lora and evidence.base == default.base and evidence.data == default.data
    assert evidence.merge.lambdas == default.merge.lambdas


def test_the_default_lambda_grid_reaches_below_the_best_merges() -> None:
    """Small LoRA steps put the best lambda of TIES / KnOTS-TIES near the paper's 0.3-0.6; the grid reaches below
    and above so that a chosen lambda on an edge (a gate of the claim) means the optimum lies outside."""
    lambdas = KnotsParams().merge.lambdas
    assert min(lambdas) < 0.1 and max(lambdas) >= 2.0 and KnotsParams().lora.lr <= 1e-3
