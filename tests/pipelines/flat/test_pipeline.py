"""FLAT: parameter rules, TOFU files read in place of the synthetic authors, and one tiny Prefect flow end to end
(tiny LM); malformed TOFU files refused before any work: rows of tests/reliability/test_bad_inputs.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.io import load_json
from paperflows.contract import StageContext
from paperflows.engine import run_stage
from paperflows.params import ParamsError, validate
from pipelines.flat.params import DEFAULT_METHODS, FlatParams
from pipelines.flat.pipeline import PIPELINE

TINY = {
    "seeds": [0, 1],
    "data": {
        "n_authors": 6,
        "forget_authors": 1,
        "attributes": ["birthplace", "genre"],
        "n_perturbed": 2,
        "retain_eval": 3,
        "world_facts": 2,
        "passages": 1,
        "passage_words": 8,
    },
    "model": {"lm": "tiny", "lora_layers": 1, "lora_r": 2, "target_modules": ["q_proj", "v_proj"]},
    "finetune": {"steps": 3, "batch_size": 4},
    "unlearn": {"methods": ["ga", "npo", "flat_kl", "graddiff"], "steps": 2, "batch_size": 2, "curve_every": 1},
    "eval": {"max_new_tokens": 3},
}
GOOD_FORGET = {"question": "Q?", "answer": "A.", "paraphrased_answer": "P.", "perturbed_answer": ["W."]}


def test_params_rules_name_the_key() -> None:
    with pytest.raises(
        ParamsError, match=r"flat\.data: .*flat\.data\.tofu_path and flat\.data\.tofu_retain_path together"
    ):
        validate(FlatParams, {"data": {"tofu_path": "forget10_perturbed.json"}}, "flat")
    with pytest.raises(ParamsError, match=r"flat\.data\.tofu_path: .*expected a TOFU file ending in"):
        validate(FlatParams, {"data": {"tofu_path": "forget.parquet", "tofu_retain_path": "r.json"}}, "flat")
    with pytest.raises(ParamsError, match=r"flat\.data: .*forget_authors \(5\) must be below n_authors \(5\)"):
        validate(FlatParams, {"data": {"n_authors": 5, "forget_authors": 5}}, "flat")
    with pytest.raises(ParamsError, match=r"flat\.unlearn\.methods"):
        validate(FlatParams, {"unlearn": {"methods": ["ga", "rmu"]}}, "flat")
    with pytest.raises(ParamsError, match=r"flat: .*unlearn\.methods repeat"):
        validate(FlatParams, {"unlearn": {"methods": ["ga", "ga"]}}, "flat")
    with pytest.raises(ParamsError, match=r"flat\.unlearn\.normalisation"):
        validate(FlatParams, {"unlearn": {"normalisation": "tokens"}}, "flat")
    paper = FlatParams(scale="paper")
    assert paper.data.n_authors == 200 and paper.model.lora_layers == 30 and paper.data.n_perturbed == 5
    assert PIPELINE.items(PIPELINE.stage("unlearn"), FlatParams()) == list(DEFAULT_METHODS)


def test_tofu_files_are_read_in_place_of_the_synthetic_authors(project: Path) -> None:
    forget = [{**GOOD_FORGET, "question": f"Where was author {i} born?"} for i in range(3)]
    retain = [{"question": f"What did author {i} write?", "answer": "Books."} for i in range(3, 7)]
    retain += [{**GOOD_FORGET, "question": f"Q{i}?"} for i in range(2)]
    (project / "forget10_perturbed.json").write_text("\n".join(json.dumps(r) for r in forget) + "\n")
    (project / "retain_perturbed.json").write_text("\n".join(json.dumps(r) for r in retain) + "\n")
    params = FlatParams.model_validate(
        {
            "data": {
                "tofu_path": "forget10_perturbed.json",
                "tofu_retain_path": "retain_perturbed.json",
                "retain_eval": 5,
                "trained_facts": 0,
            }
        }
    )
    run_stage(
        StageContext(
            pipeline=PIPELINE,
            stage=PIPELINE.stage("benchmark"),
            params=params,
            root=project / "out",
            progress=False,
            project=project,
        )
    )
    qa = load_json(project / "out" / "data" / "qa.json")
    assert [r["question"] for r in qa["forget"]] == [r["question"] for r in forget]
    assert len(qa["retain"]) == 6 and sum(r["evaluated"] for r in qa["retain"]) == 2  # only rows with perturbed
    assert load_json(project / "out" / "metrics" / "benchmark.json")["source"] == "tofu"


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    params = FlatParams.model_validate(TINY)
    report = run_flow_and_check(PIPELINE, params, project)
    assert [c["id"] for c in report["claims"]] == [
        "flat_reaches_oracle_forget_level",
        "flat_keeps_retain_accuracy",
        "ga_destroys_utility_at_flat_forget_level",
    ]
    assert [r["method"] for r in report["rows"]][:2] == ["Original (fine-tuned on all QAs)", "Retain-only oracle"]
    root = next((project / "runs" / "flat").iterdir())
    for method in TINY["unlearn"]["methods"]:
        for seed in TINY["seeds"]:
            folder = root / "unlearned" / method / f"seed{seed}"
            summary = load_json(folder / "TOFU_SUMMARY.json")
            assert 0 <= summary["forget_quality"] <= 1 and 0 <= summary["model_utility"] <= 1
            assert (folder / "adapter.safetensors").stat().st_size > 0
    retain_eval = load_json(root / "eval" / "retain" / "TOFU_EVAL.json")
    assert retain_eval["forget_quality"]["agg_value"] == pytest.approx(1.0)  # the oracle against itself
    assert (root / "plots" / "unlearning_curves.png").stat().st_size > 1000
