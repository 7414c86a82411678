"""TVM: parameter rules, the user's solutions file (trained on and re-ranked; refused before any work when
malformed or missing: rows of tests/reliability/test_bad_inputs.py), and one tiny Prefect flow."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from components.io import load_json, load_jsonl, load_table
from components.reasoning.datasets import sample_synthetic
from components.reasoning.policy import SlipPolicy
from paperflows.contract import StageContext
from paperflows.engine import run_stage
from paperflows.params import ParamsError, validate
from pipelines.tvm.params import TvmParams
from pipelines.tvm.pipeline import PIPELINE

TINY: dict[str, Any] = {
    "seeds": [0],
    "data": {"train_questions": 12, "test_questions": 4, "samples": 4},
    "verifier": {"steps": 4, "batch_size": 8},
    "search": {"beams": 2, "per_beam": 2},
}


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"verifier": {"kinds": ["orm", "orm"]}}, "kinds repeat"),
        ({"verifier": {"kinds": ["rm"]}}, "tvm.verifier.kinds"),
        ({"data": {"operand_max": 50, "cap": 20}}, "cap"),
        ({"data": {"solutions_path": "s.jsonl"}, "verifier": {"kinds": ["prm", "tvm"]}}, "'prm' needs step labels"),
        ({"policy": {"slip_carry": 1.5}}, "tvm.policy.slip_carry"),
        (
            {"data": {"source": "champ", "solutions_path": "s.jsonl"}, "verifier": {"kinds": ["orm", "tvm"]}},
            "two sources of solutions",
        ),
        ({"data": {"source": "champ"}, "verifier": {"kinds": ["orm", "prm"]}}, "CHAMP annotates the first wrong step"),
        ({"data": {"source": "champ", "champ_models": ["GPT-5"]}}, "tvm.data.champ_models.0"),
        ({"data": {"source": "champ", "champ_settings": ["0-Shot", "0-Shot"]}}, "entries repeat"),
        ({"data": {"source": "champ", "champ_problems": 1}}, "tvm.data.champ_problems"),
        ({"data": {"source": "web"}}, "tvm.data.source"),
        ({"policy": {"generator": "smollm2"}, "data": {"source": "champ"}}, "does not apply to data.source 'champ'"),
        (
            {"policy": {"generator": "smollm2"}, "verifier": {"kinds": ["orm", "prm"]}},
            "SmolLM2's solutions do not carry",
        ),
        ({"policy": {"generator": "gpt"}}, "tvm.policy.generator"),
        ({"policy": {"temperature": 0}}, "tvm.policy.temperature"),
    ],
)
def test_bad_params_name_the_key(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamsError, match=message):
        validate(TvmParams, section, "tvm")


def _solutions(questions: int = 6, samples: int = 4) -> list[dict[str, Any]]:
    train, _, _ = sample_synthetic(questions, 1, samples, 3, 9, 30, SlipPolicy(0.4, 0.2, 0.3), seed=2)
    return [{k: r[k] for k in ("question", "solution", "answer", "correct")} for r in train]


def test_users_solutions_train_and_rerank(project: Path) -> None:
    (project / "mine.jsonl").write_text("\n".join(json.dumps(r) for r in _solutions()) + "\n")
    params = TvmParams.model_validate(
        {
            "seeds": [0],
            "data": {"solutions_path": "mine.jsonl", "test_fraction": 0.34},
            "verifier": {"steps": 2, "batch_size": 8},  # the default kinds: PRM dropped, no step labels in a file
        }
    )
    assert params.verifier.kinds == ["orm", "tvm"]
    root = project / "out"
    for name in ("sample", "labels", "train", "search", "report"):
        run_stage(
            StageContext(
                pipeline=PIPELINE, stage=PIPELINE.stage(name), params=params, root=root, progress=False, project=project
            )
        )
    data = load_json(root / "metrics" / "data.json")
    assert data["source"] == "file" and (data["train_questions"], data["test_questions"]) == (4, 2)
    assert data["regrade_agreement"] == 1.0
    assert len(load_jsonl(root / "data" / "test.jsonl")) == 8
    rows = load_table(root / "tables" / "search.parquet")
    assert {(r["method"], r["verifier"]) for r in rows} == {
        ("single", "none"),
        ("majority", "none"),
        ("best_of_n", "orm"),
        ("best_of_n", "tvm"),
    }
    report = load_json(root / "report.json")
    beam = next(c for c in report["claims"] if c["id"] == "beam_tvm_ge_orm")
    assert beam["verdict"] == "not resolved" and "synthetic policy" in beam["evidence"]


def test_champ_default_kinds_drop_prm() -> None:
    assert TvmParams.model_validate({"data": {"source": "champ"}}).verifier.kinds == ["orm", "tvm"]
    assert TvmParams.model_validate(
        {"data": {"source": "champ"}, "verifier": {"kinds": ["orm", "prm", "tvm"]}}
    ).verifier.kinds == ["orm", "tvm"]
    assert TvmParams.model_validate({}).verifier.kinds == ["orm", "prm", "tvm"]
    assert TvmParams.model_validate({"policy": {"generator": "smollm2"}}).verifier.kinds == ["orm", "tvm"]


@pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("champ_dataset") is None, reason="champ-dataset is not installed"
)
def test_champ_solutions_rerank_without_beam_search(project: Path) -> None:
    params = TvmParams.model_validate(
        {
            "seeds": [0],
            "data": {
                "source": "champ",
                "champ_problems": 6,
                "champ_settings": ["0-Shot", "No C w/o H", "Direct C w/ H"],
                "champ_max_chars": 80,
                "test_fraction": 0.34,
            },
            "verifier": {"steps": 2, "batch_size": 8},
        }
    )
    root = project / "out"
    for name in ("sample", "labels", "train", "search", "report"):
        run_stage(
            StageContext(
                pipeline=PIPELINE, stage=PIPELINE.stage(name), params=params, root=root, progress=False, project=project
            )
        )
    data = load_json(root / "metrics" / "data.json")
    assert data["source"] == "champ" and (data["train_questions"], data["test_questions"]) == (4, 2)
    assert data["problems_used"] == 6 and data["test_solutions"] == 6 and data["regrade_agreement"] == 1.0
    assert data["models"]["GPT-3.5"]["solutions"] == 18
    test = load_jsonl(root / "data" / "test.jsonl")
    assert all(r["solution"].count("\n") >= 1 and r["model"] == "GPT-3.5" for r in test)
    assert all(len(r["solution"].rsplit("\nanswer: ", 1)[0]) <= 80 for r in test)
    rows = load_table(root / "tables" / "search.parquet")
    assert {(r["method"], r["verifier"]) for r in rows} == {
        ("single", "none"),
        ("majority", "none"),
        ("best_of_n", "orm"),
        ("best_of_n", "tvm"),
        ("best_of_n", "oracle"),
    }
    by = {(r["method"], r["verifier"], r["seed"]): r["accuracy"] for r in rows}
    assert all(by[("best_of_n", k, s)] <= by[("best_of_n", "oracle", s)] for k in ("orm", "tvm") for s in (0,))
    report = load_json(root / "report.json")
    beam = next(c for c in report["claims"] if c["id"] == "beam_tvm_ge_orm")
    assert beam["verdict"] == "not resolved" and "synthetic policy" in beam["evidence"]
    assert "CHAMP" in " ".join(report["notes"]) and any("CHAMP models" in k for k in report["extra_tables"])


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    report = run_flow_and_check(PIPELINE, TvmParams.model_validate(TINY), project, expect_weights=False)
    assert [c["id"] for c in report["claims"]] == ["beam_tvm_ge_orm", "prefix_auc_tvm_gt_orm"]
    assert {c["id"] for c in report["checks"]} == {"exact_value_matches_sampling", "tvm_labels_closer_to_value"}
    assert next(c for c in report["checks"] if c["id"] == "tvm_labels_closer_to_value")["passed"]
    methods = [(r["method"], r["verifier"]) for r in report["rows"]]
    assert ("step beam search (b=2, K=2)", "TVM (token labels)") in methods and len(methods) == 10
