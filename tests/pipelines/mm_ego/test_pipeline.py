"""MM-Ego: parameter errors, the real-narration path, a Prefect smoke run, and the claim test."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from components.egovideo.qa import read_jsonl
from components.io import load_json, load_table, load_tensors
from pipelines.mm_ego.pipeline import BUCKETS, CHANCE, PIPELINE, MmEgoParams
from paperflows.params import ParamsError, validate
from paperflows.runtime import StageContext, StageInputError, execute, run_stage
from paperflows.settings import load_settings

TINY: dict[str, Any] = {
    "seeds": [0], "data": {"bucket_frames": [8, 16, 32], "videos_per_bucket": [24, 12, 8]},
    "qa": {"per_clip": 6}, "model": {"d_model": 32, "d_ff": 64, "k": 4},
    "train": {"steps": 20, "batch_size": 16}, "debias": {"llm": "tiny"}}


def _run_stages(params: MmEgoParams, root: Path, names: tuple[str, ...]) -> None:
    for name in names:
        run_stage(StageContext(pipeline=PIPELINE, stage=PIPELINE.stage(name), params=params, root=root,
                               progress=False))


def test_bad_params_name_the_key() -> None:
    with pytest.raises(ParamsError, match=r"mm_ego.data.bucket_frames"):
        validate(MmEgoParams, {"data": {"bucket_frames": [64, 32, 128]}}, "mm_ego")
    with pytest.raises(ParamsError, match=r"mm_ego.train.methods"):
        validate(MmEgoParams, {"train": {"methods": ["mpp", "random"]}}, "mm_ego")
    with pytest.raises(ParamsError, match="no blind model left"):
        validate(MmEgoParams, {"train": {"methods": ["mpp", "uniform"]}, "debias": {"llm": "none"}}, "mm_ego")
    with pytest.raises(ParamsError, match=r"mm_ego.qa.qtypes"):
        validate(MmEgoParams, {"qa": {"qtypes": ["when"]}}, "mm_ego")
    paper = MmEgoParams(scale="paper")
    assert paper.model.d_model == 3584 and paper.data.bucket_frames[-1] == 3600 and paper.model.k == 8


def test_missing_narration_file_fails_before_writing(project: Path) -> None:
    params = MmEgoParams.model_validate({**TINY, "data": {**TINY["data"], "narrations_path": "nope/narration.json"}})
    with pytest.raises(StageInputError, match=r"mm_ego.data.narrations_path: no file at .*nope/narration.json"):
        _run_stages(params, project / "out", ("narrations",))
    assert not (project / "out" / "data" / "narration.json").exists()


def test_real_ego4d_narrations_become_clips_and_questions(project: Path) -> None:
    """A narration.json in the official shape (real phrasing) drives clips, frames and template questions."""
    rng = np.random.default_rng(0)
    objects, places = ["knife", "cup", "plate", "pan", "bowl"], ["drawer", "fridge", "cabinet", "sink", "shelf"]
    videos = {}
    for v in range(8):
        items, t = [], 2.0
        for _ in range(30):
            o, p = rng.choice(objects), rng.choice(places)
            kind = rng.integers(3)
            text = (f"#C C picks a {o} from the {p}", f"#C C puts the {o} in the {p}", f"#C C opens the {p}")[kind]
            items.append({"timestamp_sec": t, "timestamp_frame": int(t * 30), "narration_text": text})
            t += float(rng.uniform(0.6, 1.6))
        videos[f"ego4d-{v}"] = {"narration_pass_1": {"narrations": items, "summaries": []},
                                "narration_pass_2": {"narrations": items[:3]}, "status": "complete"}
    videos["ego4d-redacted"] = {"status": "redacted"}
    (project / "narration.json").write_text(json.dumps(videos))
    params = MmEgoParams.model_validate({**TINY, "data": {**TINY["data"], "narrations_path": "narration.json"}})
    root = project / "out"
    _run_stages(params, root, ("narrations", "qa"))
    clips = load_json(root / "data" / "clips.json")
    assert clips["source"].endswith("narration.json")
    assert {c["bucket"] for c in clips["clips"]} == set(BUCKETS)
    frames = load_tensors(root / "data" / "frames.safetensors")
    for c in clips["clips"]:
        assert frames[c["clip_id"]].shape == (c["n_frames"], 4, 32)
    rows = read_jsonl(root / "data" / "qa.jsonl")
    assert rows and {r["video_uid"] for r in rows} <= set(videos)
    text = {(uid, n["timestamp_sec"]): n["narration_text"] for uid, v in videos.items() if "narration_pass_1" in v
            for n in v["narration_pass_1"]["narrations"]}
    for r in rows:   # evidence points at real narrations naming the answer
        assert all((r["video_uid"], ts) in text for ts in r["evidence_ts"])
        if r["qtype"] == "last_put":
            assert text[(r["video_uid"], r["evidence_ts"][0])].endswith(f"in the {r['answer']}")


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    params = MmEgoParams.model_validate(TINY)
    report = run_flow_and_check(PIPELINE, params, project)
    root = next((project / "runs" / "mm_ego").iterdir())
    assert [r["model"].split(":")[0] for r in report["rows"]][:4] == [
        "MPP (pointer top-k)", "uniform-k frames", "all frames compressed", "blind network (no frames)"]
    assert report["rows"][0]["paper MDA"] == 61.27
    for method in params.train.methods:
        assert (root / "models" / method / "seed0.safetensors").is_file()
    qa_stats = load_json(root / "metrics" / "qa.json")
    assert 0 < qa_stats["questions"] and abs(qa_stats["biased_share"] - 0.3) < 0.1
    assert (root / "plots" / "pointer_scores.png").is_file()


def test_llm_engine_reports_its_acceptance_rate(project: Path) -> None:
    params = MmEgoParams.model_validate({**TINY, "qa": {"engine": "llm", "llm": "tiny", "llm_clips": 3}})
    root = project / "out"
    _run_stages(params, root, ("narrations", "qa"))
    stats = load_json(root / "metrics" / "qa.json")["llm"]
    assert stats["attempted"] == 3 and 0 <= stats["acceptance_rate"] <= 1
    assert stats["accepted"] + sum(stats["rejected"].values()) == 3
    rows = read_jsonl(root / "data" / "qa.jsonl")
    assert rows   # the rejected clips fell back to template questions
    assert sum(r["source"] == "llm" for r in rows) == stats["accepted"]


def _mean(rows: list[dict[str, Any]], model: str, key: str) -> float:
    values = [r[key] for r in rows if r["model"] == model]
    return float(np.mean(values))


@pytest.mark.claim
def test_claims_on_the_reduced_experiment(project: Path) -> None:
    """A reduced experiment; the report's claim verdicts are recomputed here from the accuracy table."""
    params = MmEgoParams.model_validate({
        "seeds": [0], "data": {"bucket_frames": [16, 48, 144], "videos_per_bucket": [120, 48, 24]},
        "train": {"steps": 250, "batch_size": 24}, "debias": {"llm": "tiny"}})
    summary = execute(PIPELINE, params, load_settings(), project / "claim", entry="test", progress=False)
    rows = load_table(project / "claim" / "tables" / "accuracy.parquet")
    preds = load_table(project / "claim" / "tables" / "predictions.parquet")
    pointer = next(c for c in summary.report["claims"] if c["claim"].startswith("MPP beats uniform-k"))
    debias = next(c for c in summary.report["claims"] if c["claim"].startswith("The blind model scores"))

    # claim 1 from the table: MDA and the per-bucket debiased gaps
    gaps = [_mean(rows, "mpp", f"debiased_{b}") - _mean(rows, "uniform", f"debiased_{b}") for b in BUCKETS]
    assert pointer["holds"] == (_mean(rows, "mpp", "mda") > _mean(rows, "uniform", "mda")
                                and gaps[0] < gaps[1] < gaps[2])
    assert pointer["numbers"]["gap_long"] == pytest.approx(gaps[2])

    # claim 2: the blind network's accuracy on the biased subset, recomputed from the predictions
    blind = [p for p in preds if p["model"] == "blind" and p["biased"]]
    acc = 100 * float(np.mean([p["correct"] for p in blind]))
    assert debias["numbers"]["blind_acc_biased"] == pytest.approx(acc)
    z = (acc - CHANCE) / (100 * math.sqrt(0.25 * 0.75 / len(blind)))
    inflation = {m: _mean(rows, m, "inflation") for m in {r["model"] for r in rows}}
    others = [m for m in inflation if m not in ("blind", "llm")]
    exploit = {m: _mean(rows, m, "acc_biased") - _mean(rows, m, "acc_unbiased") for m in others}
    order_e = sorted(others, key=lambda m: exploit[m])
    order_i = sorted(others, key=lambda m: inflation[m])
    rho = debias["numbers"]["spearman_exploit_inflation"]
    assert debias["holds"] == (z > 2 and max(inflation, key=inflation.get) in ("blind", "llm")
                               and (math.isnan(rho) or rho > 0))
    if order_e == order_i:
        assert rho == pytest.approx(1.0)

    # structural facts of de-biasing: the mask-defining models score 0 on what is left, nothing kept is
    # a question a blind model answered
    assert _mean(rows, "blind", "mda") == 0.0
    kept = {p["q"] for p in preds if p["kept"] and p["model"] == "mpp"}
    assert not any(p["q"] in kept and p["correct"] for p in preds if p["model"] in ("blind", "llm"))
    # the debiased buckets hold fewer questions than the raw ones, and MPP's pointer does better than k/T
    evaluate = load_json(project / "claim" / "metrics" / "evaluate.json")
    assert evaluate["pointer/long/recall_at_k"] > params.model.k / params.data.bucket_frames[-1]
