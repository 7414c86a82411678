"""NutriBench: parameter checks, the real file read in place of curation, and one Prefect flow at tiny size (tiny
LM and encoder); malformed real files refused before any work: rows of tests/reliability/test_bad_inputs.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.io import load_json, load_table
from paperflows.contract import StageContext
from paperflows.engine import run_stage
from paperflows.params import ParamsError, validate
from pipelines.nutribench.params import LLM_STRATEGIES, STRATEGIES, TRUE_BOLUS, NutribenchParams
from pipelines.nutribench.pipeline import PIPELINE

TINY = {
    "data": {"n_meals": 80},
    "estimate": {
        "lm": "tiny",
        "encoder": "tiny",
        "llm_meals": 4,
        "few_shot": 1,
        "max_new_tokens": 6,
        "cot_max_new_tokens": 10,
        "completion_tokens": 3,
        "rag_max_facts": 2,
    },
    "risk": {"meals": 4, "patients": ["adult#001", "adult#002"], "duration_min": 180, "reference_check": False},
}


def test_params_errors_name_the_key() -> None:
    with pytest.raises(ParamsError, match=r"nutribench\.data\.path: .*expected a file ending in one of"):
        validate(NutribenchParams, {"data": {"path": "meals.xlsx"}}, "nutribench")
    with pytest.raises(ParamsError, match=r"nutribench\.estimate\.strategies"):
        validate(NutribenchParams, {"estimate": {"strategies": ["base", "oracle"]}}, "nutribench")
    with pytest.raises(ParamsError, match=r"nutribench\.estimate\.strategies: .*strategies repeat"):
        validate(NutribenchParams, {"estimate": {"strategies": ["base", "base"]}}, "nutribench")
    with pytest.raises(ParamsError, match=r"nutribench\.risk: .*plot_patient"):
        validate(NutribenchParams, {"risk": {"patients": ["adult#002"]}}, "nutribench")
    with pytest.raises(ParamsError, match=r"nutribench\.risk: .*meal_time_min"):
        validate(NutribenchParams, {"risk": {"duration_min": 120, "meal_time_min": 200}}, "nutribench")
    with pytest.raises(ParamsError, match=r"nutribench\.seeds"):
        validate(NutribenchParams, {"seeds": [0, 1]}, "nutribench")
    paper = NutribenchParams(scale="paper")
    assert paper.data.n_meals == 11_857 and paper.estimate.llm_meals is None
    assert paper.estimate.cot_max_new_tokens == 4096 and paper.estimate.max_new_tokens == 4096
    default = NutribenchParams().estimate
    assert default.cot_max_new_tokens >= 256 and default.completion_tokens > 0 and default.prompt_set == "official"
    with pytest.raises(ParamsError, match=r"nutribench\.estimate\.prompt_set"):
        validate(NutribenchParams, {"estimate": {"prompt_set": "mine"}}, "nutribench")
    assert PIPELINE.items(PIPELINE.stage("estimate"), NutribenchParams()) == list(STRATEGIES)


def test_real_file_is_read_in_place_of_curation(project: Path) -> None:
    rows = [
        {
            "meal_description": f"{n} slices of whole wheat bread",
            "carb": 12.9 * n,
            "serving_type": "natural",
            "country": "USA",
        }
        for n in range(1, 9)
    ]
    (project / "v2.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    params = NutribenchParams.model_validate({"data": {"path": "v2.jsonl", "eval_share": 0.5}})
    run_stage(
        StageContext(
            pipeline=PIPELINE,
            stage=PIPELINE.stage("curate"),
            params=params,
            root=project / "out",
            progress=False,
            project=project,
        )
    )
    meals = load_table(project / "out" / "data" / "meals.parquet")
    assert [m["carb"] for m in meals] == pytest.approx([r["carb"] for r in rows])
    assert {m["source"] for m in meals} == {"v2.jsonl"} and sum(m["split"] == "eval" for m in meals) == 4
    assert load_json(project / "out" / "metrics" / "curation.json")["meals"] == 8


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    params = NutribenchParams.model_validate(TINY)
    report = run_flow_and_check(PIPELINE, params, project, expect_weights=False)
    assert [r["strategy"] for r in report["rows"]] == [*STRATEGIES, TRUE_BOLUS]
    assert [c["id"] for c in report["claims"]] == ["rag_cot_base_acc", "rag_cot_base_mae"]
    assert report["claims"][0]["headline"] and report["claims"][0]["verdict"] == "not resolved"  # a random LM
    assert [c["id"] for c in report["checks"]][0] == "lookup_ridge_mean_curated"
    assert {c["id"] for c in report["checks"]} >= {"error_worsens_tir"}
    root = next((project / "runs" / "nutribench").iterdir())
    scores = load_table(root / "tables" / "estimation.parquet")
    for strategy in STRATEGIES:
        mine = [r for r in scores if r["strategy"] == strategy]
        assert len(mine) == (4 if strategy in LLM_STRATEGIES else 20)
        assert all(r["hit"] <= r["answered"] for r in mine)  # an abstention is never a hit
        assert all(r["answered_first"] <= r["answered"] for r in mine)  # the cue only adds answers
        predictions = load_table(root / "predictions" / strategy / "predictions.parquet")
        if strategy in LLM_STRATEGIES:  # the random tiny LM states no number: every answer gets the cue
            assert all(r["truncated"] and r["completion"] is not None for r in predictions)
            assert [r["completed"] for r in mine] == [True] * 4
        else:
            assert all(r["completion"] is None and r["pred_first"] == r["pred"] for r in predictions)
    risk = load_table(root / "tables" / "risk.parquet")
    for strategy in STRATEGIES:  # each strategy: its first risk.meals answered meals x 2 patients
        assert sum(r["strategy"] == strategy for r in risk) == 4 * 2
    assert (root / "plots" / "glucose_traces.png").stat().st_size > 1000
    assert (root / "plots" / "glucose_traces.csv").read_text().startswith("minute,true_carbs,")
