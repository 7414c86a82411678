"""DeCapBench: parameter rules, real files scored offline by the sentence-embedding judge and by the chat judge (a
fake OpenAI-compatible endpoint on loopback), the SFT captioner learning to describe its scene, and one tiny
Prefect flow end to end (real files refused before any work: rows of tests/reliability/test_bad_inputs.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.io import load_json, load_jsonl, load_table
from paperflows.contract import StageContext
from paperflows.engine import run_stage
from paperflows.params import ParamsError, check_data_files, validate
from pipelines.decapbench.params import DecapbenchParams
from pipelines.decapbench.pipeline import PIPELINE
from tests.components.captions.fake_chat import FakeChatServer, choices

TINY = {
    "seeds": [0, 1],
    "data": {"n_images": 16, "max_objects": 5},
    "feedquill": {
        "train_scenes": 8,
        "pref_scenes": 4,
        "eval_scenes": 4,
        "samples": 2,
        "max_new_tokens": 24,
        "max_objects": 2,
    },
    "captioner": {"n_layers": 1, "d_model": 32, "n_heads": 2},
    "sft": {"steps": 3, "batch_size": 8},
    "dpo": {"steps": 2, "batch_size": 4},
}
ORACLE = {
    "image_name": "aar_test_04746.jpg",
    "oracle_caption": "A red cat on a blue mat. A lamp stands behind.",
    "oracle_facts": ["There is a cat.", "The cat is red.", "There is a mat.", "The mat is blue."],
}
CANDIDATE = {
    "image_path": "aar_test_04746.jpg",
    "caption": "A red cat sits on a mat. The room feels cozy.",
    "oracle_caption": ORACLE["oracle_caption"],
}


def test_params_rules_name_the_key() -> None:
    with pytest.raises(
        ParamsError,
        match=r"decapbench\.data: .*oracle_path and decapbench\.data\.candidates_path go "
        r"together",
    ):
        validate(DecapbenchParams, {"data": {"oracle_path": "o.jsonl"}}, "decapbench")
    with pytest.raises(ParamsError, match=r"decapbench\.data\.candidates_path: .*JSON Lines file ending in"):
        validate(DecapbenchParams, {"data": {"oracle_path": "o.jsonl", "candidates_path": "c.csv"}}, "decapbench")
    with pytest.raises(ParamsError, match=r"decapbench\.data: .*decapbench\.data\.images_dir is only read with real"):
        validate(DecapbenchParams, {"data": {"images_dir": "images"}}, "decapbench")
    with pytest.raises(ParamsError, match=r"decapbench\.captions: .*coverage: the range's low end"):
        validate(DecapbenchParams, {"captions": {"coverage": [0.9, 0.2]}}, "decapbench")
    with pytest.raises(ParamsError, match=r"decapbench\.feedquill: .*min_objects \(5\) must not exceed"):
        validate(DecapbenchParams, {"feedquill": {"min_objects": 5, "max_objects": 3}}, "decapbench")
    with pytest.raises(ParamsError, match=r"decapbench\.captioner: .*n_heads \(3\) must divide d_model"):
        validate(DecapbenchParams, {"captioner": {"n_heads": 3}}, "decapbench")
    with pytest.raises(ParamsError, match=r"decapbench\.judge\.relevant_credit"):
        validate(DecapbenchParams, {"judge": {"relevant_credit": "some"}}, "decapbench")
    paper = DecapbenchParams(scale="paper")
    assert paper.data.n_images == 400 and paper.dpo.steps == 200 and paper.feedquill.max_objects == 8
    assert paper.judge.n_match == paper.judge.n_verify == 3 and paper.judge.max_tries == 5


def _write(path: Path, rows: list[Any]) -> None:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")


def test_the_chat_judge_needs_its_endpoint_settings_but_a_stage_without_it_does_not(tmp_path: Path) -> None:
    # the CLI's refusal of real files without an endpoint: tests/reliability/test_bad_inputs.py (PAPERS)
    params = validate(DecapbenchParams, {"judge": {"backend": "chat"}}, "decapbench")
    with pytest.raises(ParamsError, match=r"decapbench: judge\.backend is 'chat'.*PAPERFLOWS_JUDGE_MODEL"):
        check_data_files(params, tmp_path, "decapbench")
    check_data_files(params, tmp_path, "decapbench", groups=("seeds", "feedquill", "sft"))  # a stage without the judge


def _judge_answer(body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
    """A fake judge: one unit per caption sentence (relevance 0 when it 'feels'), the first unit matched to
    oracle fact 0, every unit verified except relevance-0 ones; ``n`` choices per call."""
    content = body["messages"][1]["content"]
    prompt = content if isinstance(content, str) else content[-1]["text"]
    if prompt.startswith("Split the image caption"):
        caption = prompt.rsplit("Caption: ", 1)[1].split("\nFacts:")[0]
        rows = [
            {"fact": s.strip() + ".", "relevance": 0 if "feels" in s else 1} for s in caption.split(".") if s.strip()
        ]
    else:
        facts = json.loads(re.search(r"```json\n(.*?)\n```", prompt, re.S).group(1))
        rows = (
            [{"fact": f["fact"], "matched_oracle_id": 0 if i == 0 else "None"} for i, f in enumerate(facts)]
            if prompt.startswith("You compare two sets")
            else [{"fact": f["fact"], "verification": int("feels" not in f["fact"])} for f in facts]
        )
    return 200, choices(["```json\n" + json.dumps(rows) + "\n```"] * body["n"], (50, 5)), {}


@pytest.fixture()
def endpoint() -> Iterator[FakeChatServer]:
    fake = FakeChatServer(_judge_answer)
    yield fake
    fake.close()


def _real_files(project: Path) -> list[dict[str, Any]]:
    second = {**ORACLE, "image_name": "b.jpg"}
    _write(project / "oracle.jsonl", [ORACLE, second])
    scores = [0.9, 0.2, 0.6, 0.4, 0.7, 0.1, 0.8, 0.3, 0.5, 0.65]
    candidates = [
        {
            **CANDIDATE,
            "image_path": ("aar_test_04746.jpg", "b.jpg")[i % 2],
            "human_score": s,
            "caption": " ".join(["A red cat sits on a mat."] * (1 + i % 3) + ["The room feels cozy."] * (i % 2)),
        }
        for i, s in enumerate(scores)
    ]
    _write(project / "candidates.jsonl", candidates)
    return candidates


def test_real_files_are_scored_offline_by_the_local_judge(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No endpoint settings: a user's captions are scored by the sentence-embedding judge (MiniLM, offline)."""
    for var in ("PAPERFLOWS_JUDGE_BASE_URL", "PAPERFLOWS_JUDGE_MODEL", "PAPERFLOWS_JUDGE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    candidates = _real_files(project)
    params = DecapbenchParams.model_validate(
        {"data": {"oracle_path": "oracle.jsonl", "candidates_path": "candidates.jsonl"}}
    )
    check_data_files(params, project, "decapbench")  # no endpoint needed
    out = project / "out"
    for name in ("world", "dcscore", "meta_eval"):
        run_stage(
            StageContext(
                pipeline=PIPELINE, stage=PIPELINE.stage(name), params=params, root=out, progress=False, project=project
            )
        )
    summary = load_json(out / "metrics" / "dcscore.json")
    assert summary["judge"] == "minilm" and summary["valid"] == len(candidates) and summary["tokens"] == 0
    details = load_json(out / "dcscore" / "1.json")["eval_details"]
    # "A red cat sits on a mat." is close to the reference's "A red cat on a blue mat." (cosine 0.89: verified,
    # matched to "The cat is red."); "The room feels cozy." is close to no reference sentence (relevance 0)
    assert [u["relevance"] for u in details["pred_atomic_facts"]] == [1, 0]
    assert details["mappings_with_human"][0] == {"A red cat sits on a mat.": 1, "The room feels cozy.": "None"}
    assert details["precision"] == pytest.approx(0.5) and details["precision_relevant"] == pytest.approx(1.0)
    assert details["recall"] == pytest.approx(0.25) and details["consume_token"] == [0, 0, 0]
    with pytest.raises(ParamsError, match=r"judge\.backend 'rule' parses the synthetic world"):
        validate(
            DecapbenchParams,
            {"data": {"oracle_path": "o.jsonl", "candidates_path": "c.jsonl"}, "judge": {"backend": "rule"}},
            "decapbench",
        )


def test_real_files_are_scored_by_the_chat_judge(
    project: Path, endpoint: FakeChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAPERFLOWS_JUDGE_BASE_URL", endpoint.url)
    monkeypatch.setenv("PAPERFLOWS_JUDGE_MODEL", "fake-judge")
    candidates = _real_files(project)
    params = DecapbenchParams.model_validate(
        {"data": {"oracle_path": "oracle.jsonl", "candidates_path": "candidates.jsonl"}, "judge": {"backend": "chat"}}
    )
    check_data_files(params, project, "decapbench")  # the endpoint is set: accepted
    out = project / "out"
    for name in ("world", "dcscore", "meta_eval"):
        run_stage(
            StageContext(
                pipeline=PIPELINE, stage=PIPELINE.stage(name), params=params, root=out, progress=False, project=project
            )
        )
    assert [r["image_path"] for r in load_jsonl(out / "data" / "candidates.jsonl")] == [
        c["image_path"] for c in candidates
    ]
    record = load_json(out / "dcscore" / "1.json")  # the official per-caption record
    assert record["valid"] and record["image_path"] == "b.jpg"
    details = record["eval_details"]
    # units: "A red cat sits on a mat." (matched, verified) and "The room feels cozy." (relevance 0, not verified)
    assert details["precision"] == pytest.approx(0.5) and details["recall"] == pytest.approx(0.25)
    assert details["precision_relevant"] == pytest.approx(1.0) and len(details["scores"]["trials"]) == 9
    assert details["consume_token"] == [65, 65, 65]
    assert (out / "dcscore" / "results.txt").read_text().startswith("DCScore: ")
    summary = load_json(out / "metrics" / "dcscore.json")
    assert summary["judge"] == "chat" and summary["valid"] == 10 and summary["invalid"] == 0
    assert len(endpoint.requests) == 30  # 3 calls per caption, n = 3 in one call
    meta = load_table(out / "tables" / "meta_eval.parquet")
    assert {r["seed"] for r in meta} == {None} and {r["subset"] for r in meta} == {"all", "long", "short"}


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    report = run_flow_and_check(PIPELINE, DecapbenchParams.model_validate(TINY), project)
    assert [c["id"] for c in report["claims"]] == [
        "dcscore_beats_ngram_metrics",
        "gap_largest_on_long_captions",
        "dcscore_beats_capture",
        "dpo_lowers_hallucination",
        "dpo_raises_dcscore",
        "dpo_keeps_recall",
    ]
    assert [r["metric"] for r in report["rows"]][:2] == ["DCScore", "DCScore precision term"]
    # the default judge reads text only: its win over n-gram metrics is a claim, with no by-construction check
    assert [c["id"] for c in report["checks"]] == ["oracle_caption_scores_100"]
    assert report["checks"][0]["passed"]
    headline = report["claims"][0]
    assert headline["headline"] and [(g["arm"], g["passed"]) for g in headline["gates"][:2]] == [
        ("DCScore (minilm judge)", True),
        ("human score (raters)", True),
    ]
    root = next((project / "runs" / "decapbench").iterdir())
    assert len(list((root / "dcscore").glob("*.json"))) == 2 * 16
    assert (root / "dcscore" / "results.txt").read_text().startswith("DCScore: ")
    assert sorted(p.name for p in (root / "models" / "dpo").iterdir()) == ["seed0.safetensors", "seed1.safetensors"]
    rows = load_table(root / "tables" / "captioners.parquet")
    assert {(r["seed"], r["captioner"]) for r in rows} == {(s, c) for s in (0, 1) for c in ("sft", "dpo")}
    for plot in ("metric_vs_human.png", "training.png", "feedquill.png"):
        assert (root / "plots" / plot).stat().st_size > 1000


@pytest.mark.slow
def test_the_sft_captioner_learns_to_describe_its_scene() -> None:
    """What the FeedQuill claims need (their gates): at the evidence preset's SFT length the captioner states more
    correct than false units about a held-out scene, far more than its own captions read against other scenes
    (a captioner blind to its input) and than the untrained captioner."""
    from components.captions.dcscore import DCScoreConfig
    from components.captions.evaluation import evaluate_captions, summarize
    from components.captions.feedquill import train_sft
    from components.captions.rule_judge import RuleJudge
    from pipelines.decapbench.feedquill import (
        blind_hallucination,
        eval_captions,
        feedquill_scenes,
        new_captioner,
        sft_data,
        train_config,
    )

    evidence = DecapbenchParams.EVIDENCE_SCALE
    p = DecapbenchParams.model_validate(
        {
            "feedquill": {"max_objects": evidence["feedquill.max_objects"], "eval_scenes": 40},
            "sft": {
                "steps": evidence["sft.steps"],
                "lr": evidence["sft.lr"],
                "warmup_steps": evidence["sft.warmup_steps"],
            },
        }
    )
    train, _, scenes = feedquill_scenes(p, 0)
    prompts, targets = sft_data(p, train, 0)

    def precision_recall(lm: Any) -> tuple[float, float, float]:
        texts = eval_captions(lm, scenes, p.feedquill, 0)
        s = summarize(evaluate_captions(scenes, texts, RuleJudge({x.name: x for x in scenes}), DCScoreConfig()))
        return 1 - s["hallucination"], s["recall"], 1 - blind_hallucination(scenes, texts)

    untrained = precision_recall(new_captioner(p, 0))
    lm = new_captioner(p, 0)
    train_sft(lm, prompts, targets, train_config(p.sft, 0, "sft", False), p.sft.batch_size)
    precision, recall, blind = precision_recall(lm)
    assert precision > 0.5 and precision > blind + 0.3, (precision, blind)
    assert precision > untrained[0] + 0.3 and recall > 0.3, (precision, recall, untrained)
