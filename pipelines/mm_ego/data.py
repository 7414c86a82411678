"""mm_ego's data wiring (one paper's helpers, kept out of ``pipeline.py`` so that it reads like the method): the
narration source (the synthetic streams, or a real Ego4D ``narration.json`` with what its reader skipped), the
clips' synthesised frame features, the clips with their narrated events for the QA engine, and the summaries of
question sampling and of the held-out split (with their warnings)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch

from components.egovideo.narrations import (
    MIN_CLIP_NARRATIONS,
    NarrationFormatError,
    NarrationSet,
    read_narrations,
    write_narrations,
)
from components.egovideo.qa import Clip
from components.egovideo.synthetic import (
    BUCKETS,
    ClipSpec,
    FrameConfig,
    WorldConfig,
    events_of_clip,
    generate_videos,
    select_clips,
    synthesize_frames,
)
from paperflows import StageInputError, derive_seed
from pipelines.mm_ego.params import DataParams, MmEgoParams, QAParams

LOG = logging.getLogger("paperflows.mm_ego")  # collected by Prefect; a warning reaches stderr elsewhere
Narrations = tuple[list[ClipSpec], dict[str, Any], dict[str, int]]  # clips to cut, source, reader counts


def stored_pass(p: MmEgoParams) -> int:
    """The pass the written narration.json holds: the chosen one for a real file, pass 1 when synthetic."""
    return p.data.narration_pass if p.data.narrations_path else 1


def synthetic_narrations(d: DataParams, out: Path) -> Narrations:
    """Generate the synthetic egocentric streams, write them to ``out`` as Ego4D narrations; one whole-video clip
    per stream."""
    streams, videos = generate_videos(
        d.bucket_frames, d.videos_per_bucket, WorldConfig(habit=d.habit, event_rate=d.event_rate, fps=d.fps), d.seed
    )
    specs = sorted((ClipSpec(uid, uid, bucket, 0.0, n) for uid, (bucket, n) in videos.items()), key=lambda c: c.clip_id)
    write_narrations(streams, out)
    return specs, {"source": "synthetic"}, NarrationSet(videos=streams, narration_pass=1).counts()  # nothing skipped


def real_narrations(d: DataParams, path: Path, out: Path) -> Narrations:
    """Read the user's narration file, cut clips per bucket from its videos and write the videos they come from
    to ``out``; what the reader skipped goes to the source description and, when anything was, to a warning."""
    try:
        real = read_narrations(path, d.narration_pass)
    except NarrationFormatError as err:
        raise StageInputError(f"mm_ego.data.narrations_path: {err}") from None
    specs = select_clips(real.videos, d.bucket_frames, d.videos_per_bucket, d.fps)
    if not specs:
        raise StageInputError(
            f"mm_ego.data.narrations_path: {path} has no video long enough for a "
            f"{d.bucket_frames[0] / d.fps:.0f}-second clip with {MIN_CLIP_NARRATIONS} narrations"
        )
    write_narrations({c.video_uid: real.videos[c.video_uid] for c in specs}, out, narration_pass=d.narration_pass)
    source = {
        "source": str(path),
        "redacted_videos": len(real.skipped),
        "videos_without_pass": len(real.without_pass),
        "videos_with_empty_pass": len(real.empty_pass),
        "empty_texts": real.empty_texts,
    }
    counts = real.counts()
    if any(n for k, n in counts.items() if k.startswith("skipped/")):
        LOG.warning(
            "mm_ego.narrations: %s: read %d videos (%d narrations) of narration_pass_%d; skipped %d "
            "redacted videos, %d videos without that pass, %d with no narration text in it and %d "
            "empty narration texts",
            path,
            counts["videos"],
            counts["narrations"],
            d.narration_pass,
            *(
                counts[f"skipped/{k}"]
                for k in ("redacted_videos", "videos_without_pass", "videos_with_empty_pass", "empty_texts")
            ),
        )
    return specs, source, counts


def clip_features(
    stored: dict[str, Any], specs: list[ClipSpec], p: MmEgoParams
) -> tuple[dict[str, torch.Tensor], list[dict[str, Any]]]:
    """Each clip's frame features, synthesised from the narrated events it covers in the ``stored`` videos, and
    its description row (video, bucket, start, frames, fps, events)."""
    d = p.data
    cfg = FrameConfig(
        d_feat=p.frames.d_feat,
        patches=p.frames.patches,
        noise=p.frames.noise,
        pooled_detail=p.frames.pooled_detail,
        seed=d.seed,
    )
    frames, clips = {}, []
    for c in specs:
        events = events_of_clip(stored[c.video_uid], c.start_sec, c.n_frames, d.fps)
        frames[c.clip_id] = synthesize_frames(events, c.n_frames, cfg, seed=derive_seed(d.seed, "frames", c.clip_id))
        clips.append(
            {
                "clip_id": c.clip_id,
                "video_uid": c.video_uid,
                "bucket": c.bucket,
                "start_sec": c.start_sec,
                "n_frames": c.n_frames,
                "fps": d.fps,
                "events": len(events),
            }
        )
    return frames, clips


def question_clips(stored: dict[str, Any], clip_rows: list[dict[str, Any]]) -> list[Clip]:
    """The clips the QA engine asks about, each with the narrated events it covers in the ``stored`` videos."""
    return [
        Clip(
            c["clip_id"],
            c["video_uid"],
            c["bucket"],
            c["start_sec"],
            c["n_frames"],
            c["fps"],
            tuple(events_of_clip(stored[c["video_uid"]], c["start_sec"], c["n_frames"], c["fps"])),
        )
        for c in clip_rows
    ]


def warn_sampling(stats: dict[str, Any], qa: QAParams) -> None:
    """Warn for every bucket whose biased share could not be held or that lost template questions for lack of
    distinct distractors."""
    for bucket in BUCKETS:
        if stats.get(f"sampling/{bucket}/share_held") is False or stats.get(f"sampling/{bucket}/no_options"):
            LOG.warning(
                "mm_ego.qa: %s clips: %d questions with biased share %.2f (qa.biased_share %.2f%s); %d "
                "template questions left out for lack of distinct distractors",
                bucket,
                stats[f"sampling/{bucket}/questions"],
                stats[f"sampling/{bucket}/biased_share"],
                qa.biased_share,
                "" if stats[f"sampling/{bucket}/share_held"] else " cannot be held",
                stats[f"sampling/{bucket}/no_options"],
            )


def split_summary(
    train_v: list[str], test_v: list[str], train_rows: list[dict[str, Any]], test: list[dict[str, Any]]
) -> dict[str, Any]:
    """Videos and questions on each side of the held-out split, per bucket, with the test side's biased share;
    the buckets left without a held-out question (a warning names them)."""
    summary: dict[str, Any] = {
        "train/videos": len(train_v),
        "test/videos": len(test_v),
        "train/questions": len(train_rows),
        "test/questions": len(test),
    }
    for bk in BUCKETS:
        sel = [r["biased"] for r in test if r["length_bucket"] == bk]
        summary[f"train/{bk}/questions"] = sum(r["length_bucket"] == bk for r in train_rows)
        summary.update(
            {f"test/{bk}/questions": len(sel), **({f"test/{bk}/biased_share": float(np.mean(sel))} if sel else {})}
        )
    summary["empty_buckets"] = [bk for bk in BUCKETS if not summary[f"test/{bk}/questions"]]  # a list: no metric
    if summary["empty_buckets"]:
        LOG.warning(
            "mm_ego.benchmark: no held-out question in bucket(s) %s (training questions: %s); they are "
            "reported as empty and MDA is the mean over the other buckets",
            summary["empty_buckets"],
            [summary[f"train/{bk}/questions"] for bk in summary["empty_buckets"]],
        )
    return summary
