"""MM-Ego: parameter errors, the real-narration path, and one tiny Prefect flow (with the LLM engine); a malformed
narration file refused before any work: rows of tests/reliability/test_bad_inputs.py."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from components.egovideo.qa import read_jsonl
from components.io import load_json, load_table, load_tensors
from paperflows.contract import StageContext
from paperflows.engine import run_stage
from paperflows.params import ParamsError, validate
from pipelines.mm_ego.params import MmEgoParams
from pipelines.mm_ego.pipeline import BUCKETS, PIPELINE

TINY: dict[str, Any] = {
    "seeds": [0],
    "data": {"bucket_frames": [8, 16, 32], "videos_per_bucket": [24, 12, 8]},
    "qa": {"per_clip": 6},
    "model": {"d_model": 32, "d_ff": 64, "k": 4},
    "pretrain": {"steps": 20, "batch_size": 16},
    "train": {"steps": 20, "batch_size": 16},
    "debias": {"llm": "tiny"},
}


def _run_stages(params: MmEgoParams, project: Path, names: tuple[str, ...]) -> Path:
    root = project / "out"
    for name in names:
        run_stage(
            StageContext(
                pipeline=PIPELINE, stage=PIPELINE.stage(name), params=params, root=root, progress=False, project=project
            )
        )
    return root


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"data": {"bucket_frames": [64, 32, 128]}}, "mm_ego.data.bucket_frames"),
        ({"train": {"methods": ["mpp", "random"]}}, "mm_ego.train.methods"),
        ({"train": {"methods": ["mpp", "mpp"]}}, "methods repeat"),
        ({"train": {"threads": 4}}, "mm_ego.train.threads"),
        ({"qa": {"qtypes": ["when"]}}, "mm_ego.qa.qtypes"),
        ({"model": {"d_model": 30, "n_heads": 4}}, "mm_ego.model: Value error, n_heads (4) must divide d_model (30)"),
        ({"train": {"methods": ["mpp", "uniform"]}, "debias": {"llm": "none"}}, "no blind model left"),
    ],
)
def test_bad_params_name_the_key(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate(MmEgoParams, section, "mm_ego")


def test_paper_scale_and_mask_models() -> None:
    paper = MmEgoParams(scale="paper")
    assert paper.model.d_model == 3584 and paper.data.bucket_frames[-1] == 3600 and paper.model.k == 8
    assert MmEgoParams().mask_models() == ("blind", "llm")
    assert MmEgoParams.model_validate({"debias": {"use_blind_network": False}}).mask_models() == ("llm",)


def test_real_ego4d_narrations_become_clips_and_questions(project: Path) -> None:
    """A narration.json in the official shape (real phrasing) drives clips, frames and template questions."""
    rng = np.random.default_rng(0)
    objects, places = ["knife", "cup", "plate", "pan", "bowl"], ["drawer", "fridge", "cabinet", "sink", "shelf"]
    videos: dict[str, Any] = {}
    for v in range(8):
        items, t = [], 2.0
        for _ in range(30):
            o, p = rng.choice(objects), rng.choice(places)
            kind = rng.integers(3)
            text = (f"#C C picks a {o} from the {p}", f"#C C puts the {o} in the {p}", f"#C C opens the {p}")[kind]
            items.append({"timestamp_sec": t, "timestamp_frame": int(t * 30), "narration_text": text})
            t += float(rng.uniform(0.6, 1.6))
        videos[f"ego4d-{v}"] = {
            "narration_pass_1": {"narrations": items, "summaries": []},
            "narration_pass_2": {"narrations": items[:3]},
            "status": "complete",
        }
    videos["ego4d-redacted"] = {"status": "redacted"}
    videos["ego4d-pass2-only"] = {"narration_pass_2": {"narrations": items[:5]}}
    (project / "narration.json").write_text(json.dumps(videos))
    params = MmEgoParams.model_validate({**TINY, "data": {**TINY["data"], "narrations_path": "narration.json"}})
    root = _run_stages(params, project, ("narrations", "qa"))
    clips = load_json(root / "data" / "clips.json")
    assert clips["source"].endswith("narration.json")
    assert (clips["redacted_videos"], clips["videos_without_pass"]) == (1, 1)
    assert {c["bucket"] for c in clips["clips"]} == set(BUCKETS)
    frames = load_tensors(root / "data" / "frames.safetensors")
    for c in clips["clips"]:
        assert frames[c["clip_id"]].shape == (c["n_frames"], 4, 32)
    rows = read_jsonl(root / "data" / "qa.jsonl")
    assert rows and {r["video_uid"] for r in rows} <= set(videos)
    text = {
        (uid, n["timestamp_sec"]): n["narration_text"]
        for uid, v in videos.items()
        if "narration_pass_1" in v
        for n in v["narration_pass_1"]["narrations"]
    }
    for r in rows:  # evidence points at real narrations naming the answer
        assert all((r["video_uid"], ts) in text for ts in r["evidence_ts"])
        if r["qtype"] == "last_put":
            assert text[(r["video_uid"], r["evidence_ts"][0])].endswith(f"in the {r['answer']}")


# 3 usable videos, 13 narrations in Ego4D phrasing, each video long enough for one short (32 s) clip
SMALL_FILE = {
    "vid-a": [
        (1.2, "#C C picks a knife from the table"),
        (5.8, "#C C cuts the onion on the board"),
        (10.4, "#C C puts the knife on the table"),
        (15.0, "#C C opens the fridge"),
        (19.6, "#C C picks a bottle from the fridge"),
    ],
    "vid-b": [
        (0.5, "#C C opens the drawer"),
        (6.1, "#C C picks a spoon from the drawer"),
        (11.9, "#C C places the spoon in the bowl"),
        (18.3, "#O man X walks into the kitchen"),
    ],
    "vid-c": [
        (2.4, "#C C takes a cup from the shelf"),
        (8.0, "#C C puts the cup in the sink"),
        (13.7, "#C C opens the tap"),
        (21.2, "#C C washes the cup"),
    ],
}


def test_small_real_file_at_default_params(project: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A first try with a small valid narration.json (default params, only the path set) runs end to end:
    the videos the reader skips are counted in the narrations metrics and logged, the buckets it cannot
    fill are reported empty (a note, not an error), and the claims are not resolved. Only the training is
    shortened (10 pre-training and 10 training steps) and the blind LLM is the tiny one, to keep the test short."""
    videos: dict[str, Any] = {}
    for uid, items in SMALL_FILE.items():
        rows = [
            {
                "timestamp_sec": t,
                "timestamp_frame": round(t * 30),
                "narration_text": text,
                "annotation_uid": f"{uid}-{i}",
            }
            for i, (t, text) in enumerate(items)
        ]
        videos[uid] = {
            "narration_pass_1": {"narrations": rows, "summaries": []},
            "narration_pass_2": {"narrations": rows[:2], "summaries": []},
            "status": "complete",
        }
    videos["vid-a"]["narration_pass_1"]["narrations"].append(
        {"timestamp_sec": 24.0, "timestamp_frame": 720, "narration_text": ""}
    )
    videos["vid-redacted"] = {"status": "redacted"}
    videos["vid-pass2"] = {"narration_pass_2": {"narrations": rows, "summaries": []}, "status": "complete"}
    videos["vid-empty"] = {"narration_pass_1": {"narrations": [], "summaries": []}, "status": "complete"}
    (project / "narration.json").write_text(json.dumps(videos), encoding="utf-8")
    params = MmEgoParams.model_validate({"data": {"narrations_path": "narration.json"}})
    assert len(params.seeds) >= 2
    params = params.model_copy(
        update={
            "pretrain": params.pretrain.model_copy(update={"steps": 10}),
            "train": params.train.model_copy(update={"steps": 10}),
            "debias": params.debias.model_copy(update={"llm": "tiny"}),
        }
    )
    with caplog.at_level("WARNING", logger="paperflows.mm_ego"):
        root = _run_stages(params, project, tuple(s.name for s in PIPELINE.stages))
    counts = load_json(root / "metrics" / "narrations.json")
    assert counts == {
        "videos": 3,
        "narrations": 13,
        "skipped/redacted_videos": 1,
        "skipped/videos_without_pass": 1,
        "skipped/videos_with_empty_pass": 1,
        "skipped/empty_texts": 1,
        "clips": 3,
        "clips/short": 3,
        "clips/medium": 0,
        "clips/long": 0,
    }
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert (
        "read 3 videos (13 narrations) of narration_pass_1; skipped 1 redacted videos, 1 videos without that "
        "pass, 1 with no narration text in it and 1 empty narration texts"
    ) in logged
    assert "short clips: 7 questions with biased share 1.00 (qa.biased_share 0.30 cannot be held)" in logged
    rows = read_jsonl(root / "data" / "qa.jsonl")
    stats = load_json(root / "metrics" / "qa.json")
    assert len(rows) == stats["questions"] == 7 and stats["sampling/short/share_held"] is False
    text = {(uid, t): n for uid, items in SMALL_FILE.items() for t, n in items}
    for r in rows:
        assert len(set(r["options"])) == 4 and r["options"][r["answer_idx"]] == r["answer"]
        assert all((r["video_uid"], ts) in text for ts in r["evidence_ts"])
        assert r["qtype"] != "last_put" or text[(r["video_uid"], r["evidence_ts"][0])].endswith(r["answer"])
    bench = load_json(root / "metrics" / "benchmark.json")
    assert bench["test/videos"] == 1 and bench["train/videos"] == 2 and bench["empty_buckets"] == ["medium", "long"]
    assert "no held-out question in bucket(s) ['medium', 'long']" in logged
    report = load_json(root / "report.json")
    assert all(c["verdict"] == "not resolved" for c in report["claims"])
    assert any(n.startswith("Empty bucket(s) medium, long") for n in report["notes"])
    mpp = report["rows"][0]
    assert mpp["debiased medium"] is None or math.isnan(mpp["debiased medium"])


def test_flow_smoke(project: Path, run_flow_and_check) -> None:
    """The whole flow at tiny size, with the LLM engine writing questions for 3 clips (the others and the
    rejected ones get template questions) and the tiny LLM as a second blind model."""
    params = MmEgoParams.model_validate({**TINY, "qa": {"per_clip": 6, "engine": "llm", "llm": "tiny", "llm_clips": 3}})
    report = run_flow_and_check(PIPELINE, params, project)
    root = next((project / "runs" / "mm_ego").iterdir())
    assert [r["model"].split(":")[0] for r in report["rows"]] == [
        "MPP (pointer top-k)",
        "oracle",
        "uniform-k frames",
        "all frames compressed",
        "blind network (no frames)",
        "blind LLM (option mean token log-prob)",
    ]
    assert report["rows"][0]["paper MDA"] == 61.27
    assert [c["id"] for c in report["claims"]] == ["mpp_beats_uniform_mda", "mpp_gap_grows_with_length"]
    assert report["claims"][0]["headline"] and not report["claims"][1]["headline"]
    assert all(c["verdict"] in ("holds", "does not hold", "not resolved") for c in report["claims"])
    assert report["checks"][0]["id"] == "debiased_blind_models_score_zero" and report["checks"][0]["passed"]
    for method in params.train.methods:
        assert (root / "models" / method / "seed0.safetensors").is_file()
    qa_stats = load_json(root / "metrics" / "qa.json")
    assert 0 < qa_stats["questions"] and abs(qa_stats["biased_share"] - 0.3) < 0.1
    llm = qa_stats["llm"]
    assert llm["attempted"] == 3 and llm["model"] == "tiny" and llm["accepted"] + llm["rejected"] == 3
    rows = read_jsonl(root / "data" / "qa.jsonl")
    assert sum(r["source"] == "llm" for r in rows) == llm["accepted"]
    preds = load_table(root / "tables" / "predictions.parquet")
    assert len(preds) == 6 * load_json(root / "metrics" / "evaluate.json")["test_questions"]
    csv = (root / "plots" / "accuracy_by_bucket.csv").read_text().splitlines()
    assert csv[0].startswith("bucket,mpp_raw,mpp_debiased") and len(csv) == 4
