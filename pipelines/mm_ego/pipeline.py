"""MM-Ego: egocentric QA synthesis, the EgoMemoria benchmark and Memory Pointer Prompting (arXiv 2410.07177).

Reproduces, at CPU scale, the EgoMemoria table (accuracy per video-length bucket, raw and de-biased,
and the mean de-biased accuracy MDA) for Memory Pointer Prompting against its frame-selection baselines:

1. **narrations** (§3.1): Ego4D-shaped ``narration.json`` (written by the synthetic-stream generator, or a
   real file given in ``data.narrations_path``) read back through the Ego4D reader; clips cut per length
   bucket and their frame features synthesised from the parsed narrations (4 patch tokens per frame);
2. **qa** (§3.1, the narration-to-QA data engine): multiple-choice questions with evidence timestamps and
   frame ids, by templates or by the local LLM, with a controlled share of language-biased questions;
3. **benchmark** (§4, EgoMemoria): held-out videos form the test set, grouped by length bucket;
4. **train** (§3.2): one network per method, fanned out over ``train.methods``: ``mpp`` (global glimpse
   over compressed frames -> memory-pointer scores -> top-k frames at full resolution, pointer supervised
   by the evidence frames), ``uniform`` (k evenly spaced frames at full resolution), ``compressed`` (all
   frames, compressed only) and ``blind`` (the same network without frames);
5. **evaluate** (§4): de-biasing with the blind models (the blind network and the local LLM scoring the
   options by log-probability): questions a blind model gets right are dropped; debiased accuracy per
   bucket and MDA;
6. **report**: the paper-shaped table and the claims, decided from the measured numbers.
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from pydantic import Field, field_validator, model_validator

from components.egovideo.benchmark import (
    accuracy_table,
    blind_llm_choices,
    debias_mask,
    split_videos,
)
from components.egovideo.mpp import (
    EgoQAModel,
    MPPConfig,
    Vocab,
    batch_sampler,
    encode_rows,
    length_groups,
    make_batch,
    make_loss,
    predict,
)
from components.egovideo.narrations import Narration, read_narrations, write_narrations
from components.egovideo.qa import (
    TEMPLATES,
    Clip,
    SampleConfig,
    llm_candidates,
    question_priors,
    read_jsonl,
    sample_questions,
    template_candidates,
    to_record,
    write_jsonl,
)
from components.egovideo.synthetic import (
    BUCKETS,
    FrameConfig,
    WorldConfig,
    cut_clips,
    events_of_clip,
    generate_videos,
    synthesize_frames,
)
from components.io import (
    load_json,
    load_table,
    load_tensors,
    save_json,
    save_table,
    save_tensors,
)
from components.training import TrainConfig, fit, torch_threads
from pipelines.mm_ego import ABOUT
from paperflows.params import PipelineParams, Section
from paperflows.plots import figure, save_figure
from paperflows.report import Claim, Report, fmt, mean_std
from paperflows.errors import StageInputError
from paperflows.runtime import Pipeline, Plot, Stage, StageContext
from paperflows.settings import load_settings

METHODS = ("mpp", "uniform", "compressed", "blind")
LLM_NAMES = ("smollm2-135m", "tiny")
PAPER_MDA = 61.27          # MM-Ego on EgoMemoria (mean debiased accuracy, %)
CHANCE = 25.0              # 4 options
LABELS = {"mpp": "MPP (pointer top-k)", "uniform": "uniform-k frames", "compressed": "all frames compressed",
          "blind": "blind network (no frames)", "llm": "blind LLM (option log-prob)"}


# --------------------------------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------------------------------
class DataParams(Section):
    narrations_path: str | None = Field(
        None, description="An Ego4D narration.json (absolute or relative to the project root). Empty: "
        "synthetic egocentric streams. With a real file, clips are cut per bucket and their frame features "
        "are synthesised from the parsed narrations (no video is read).")
    narration_pass: Literal[1, 2] = Field(1, description="Which Ego4D annotator pass to read.")
    bucket_frames: list[int] = Field(default_factory=lambda: [32, 128, 512], min_length=3, max_length=3,
                                     description="Frames per clip of the short / medium / long buckets.")
    videos_per_bucket: list[int] = Field(default_factory=lambda: [200, 80, 40], min_length=3, max_length=3,
                                         description="Videos (clips) per bucket, short / medium / long.")
    event_rate: float = Field(0.4, gt=0, le=1, description="Share of frames holding a narrated event.")
    habit: float = Field(0.5, ge=0, le=1, description="Strength of the habits (home places, successors) "
                                                      "that give questions a language prior.")
    fps: float = Field(1.0, gt=0, le=30, description="Feature frames per second of video.")
    seed: int = Field(0, ge=0, description="Seed of the synthetic world, streams and frame noise.")

    @field_validator("bucket_frames")
    @classmethod
    def _increasing(cls, value: list[int]) -> list[int]:
        if any(v < 4 or v > 100_000 for v in value) or sorted(set(value)) != value:
            raise ValueError(f"three strictly increasing frame counts in [4, 100000], got {value}")
        return value

    @field_validator("videos_per_bucket")
    @classmethod
    def _enough(cls, value: list[int]) -> list[int]:
        if any(v < 2 or v > 100_000 for v in value):
            raise ValueError(f"at least 2 videos per bucket (some are held out), got {value}")
        return value


class FrameParams(Section):
    d_feat: int = Field(32, ge=4, le=4096, description="Numbers per patch token.")
    patches: int = Field(4, ge=2, le=1024, description="Patch tokens per frame at full resolution.")
    noise: float = Field(0.15, ge=0, le=10, description="Std of the per-token noise.")
    pooled_detail: float = Field(0.25, ge=0, le=1, description="Share of the object code that survives "
                                                               "pooling a frame to one token.")


class QAParams(Section):
    engine: Literal["template", "llm"] = Field("template", description="template: the question templates; "
                                               "llm: the local LLM writes a question per prompted clip.")
    qtypes: list[str] = Field(default_factory=lambda: list(TEMPLATES), min_length=1,
                              description=f"Template question types, any of {list(TEMPLATES)}.")
    per_clip: int = Field(24, ge=1, le=1000, description="At most this many template questions per clip.")
    biased_share: float = Field(0.3, ge=0, le=1, description="Share of questions whose answer equals the "
                                                             "question's prior answer (language-biased).")
    llm: Literal[LLM_NAMES] = Field("smollm2-135m", description="LLM of the llm engine.")  # type: ignore[valid-type]
    llm_clips: int = Field(16, ge=1, le=100_000, description="Clips prompted (evenly over the buckets).")
    llm_fallback: Literal["template", "drop"] = Field("template", description="For a clip whose LLM question is "
                                                      "rejected: use its template questions, or drop the clip.")
    seed: int = Field(0, ge=0, description="Seed of question sampling and option order.")

    @field_validator("qtypes")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        if any(q not in TEMPLATES for q in value) or len(set(value)) != len(value):
            raise ValueError(f"distinct names from {list(TEMPLATES)}, got {value}")
        return value


class BenchmarkParams(Section):
    test_fraction: float = Field(0.25, gt=0, lt=1, description="Share of videos held out as the benchmark.")
    split_seed: int = Field(0, ge=0, description="Seed of the video split.")


class ModelParams(Section):
    d_model: int = Field(64, ge=8, le=8192, description="Transformer width.")
    n_layers: int = Field(2, ge=1, le=64, description="Transformer blocks.")
    n_heads: int = Field(4, ge=1, le=64, description="Attention heads.")
    d_ff: int = Field(128, ge=8, le=65_536, description="Feed-forward width.")
    k: int = Field(8, ge=1, le=1024, description="Frames read at full resolution (MPP top-k, uniform-k).")


class TrainParams(Section):
    methods: list[Literal[METHODS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(METHODS), min_length=1, description="Compared methods (one model each).")
    steps: int = Field(500, ge=1, le=1_000_000, description="Optimisation steps per model (same for all).")
    batch_size: int = Field(24, ge=1, le=4096, description="Questions per step (one length bucket per step).")
    lr: float = Field(3e-3, gt=0, le=1, description="AdamW learning rate.")
    warmup_steps: int = Field(30, ge=0, le=100_000, description="Linear warmup steps.")
    pointer_weight: float = Field(1.0, ge=0, le=100, description="Weight of the pointer BCE (MPP).")
    teacher_forcing: float = Field(0.5, ge=0, le=1, description="Probability that an MPP training example "
                                                                "reads its evidence frames instead of its top-k.")
    threads: int = Field(1, ge=1, le=256, description="Torch threads (small models run fastest on one).")

    @field_validator("methods")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"methods repeat: {value}")
        return value


class DebiasParams(Section):
    llm: Literal["smollm2-135m", "tiny", "none"] = Field(
        "smollm2-135m", description="Blind LLM scoring the options by log-probability ('none': not used).")
    use_blind_network: bool = Field(True, description="The blind network (train method 'blind') also "
                                                      "defines the bias mask.")


class MmEgoParams(PipelineParams):
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1, max_length=20,
                             description="Training seeds; every method is trained once per seed.")
    data: DataParams = Field(default_factory=DataParams, description="Narrations, clips and frames.")
    frames: FrameParams = Field(default_factory=FrameParams, description="Synthetic frame features.")
    qa: QAParams = Field(default_factory=QAParams, description="The narration-to-QA engine.")
    benchmark: BenchmarkParams = Field(default_factory=BenchmarkParams, description="EgoMemoria split.")
    model: ModelParams = Field(default_factory=ModelParams, description="The QA transformer.")
    train: TrainParams = Field(default_factory=TrainParams, description="Training (same budget for all).")
    debias: DebiasParams = Field(default_factory=DebiasParams, description="Blind models for de-biasing.")

    PAPER_SCALE: ClassVar[dict[str, Any]] = {
        "data.bucket_frames": [60, 600, 3600], "data.videos_per_bucket": [210, 210, 209],
        "frames.d_feat": 1152, "frames.patches": 196,
        "model.d_model": 3584, "model.n_layers": 28, "model.n_heads": 28, "model.d_ff": 18944,
        "qa.per_clip": 12,
    }
    PAPER_SOURCE: ClassVar[str] = ("MM-Ego (arXiv 2410.07177): EgoMemoria has 629 videos and 7,026 questions in short / medium "
                    "/ long groups (clips from 30 s to 1 h; the exact bucket edges are our reading: 1 min, 10 min, "
                    "1 h at 1 frame/s); base model LLaVA-OneVision-7B (SigLIP-so400m features of width 1152, "
                    "196 tokens per video frame, Qwen2-7B: width 3584, 28 layers, 28 heads, FFN 18944). "
                    "629 videos x ~11 questions gives ~7k questions.")

    @model_validator(mode="after")
    def _blind_models(self) -> MmEgoParams:
        if self.debias.llm == "none" and not (self.debias.use_blind_network and "blind" in self.train.methods):
            raise ValueError("debias: no blind model left; keep 'blind' in train.methods with "
                             "debias.use_blind_network, or set debias.llm")
        if self.model.d_model % self.model.n_heads:
            raise ValueError(f"model.d_model ({self.model.d_model}) must be divisible by model.n_heads "
                             f"({self.model.n_heads})")
        return self


# --------------------------------------------------------------------------------------------------
# stage 1: narrations, clips and frame features (§3.1)
# --------------------------------------------------------------------------------------------------
def _narrations_source(p: MmEgoParams) -> Path | None:
    if not p.data.narrations_path:
        return None
    path = Path(p.data.narrations_path)
    path = path if path.is_absolute() else load_settings().root / path
    if not path.is_file():
        raise StageInputError(f"mm_ego.data.narrations_path: no file at {path}")
    return path


def narrations(ctx: StageContext) -> None:
    """Write the Ego4D-shaped narrations, read them back, cut clips and synthesise their frame features."""
    p = ctx.params
    d = p.data
    source = _narrations_source(p)
    out_json = ctx.path("data/narration.json")
    layout: dict[str, tuple[str, float, int]] = {}     # clip_id -> (bucket, start_sec, n_frames)
    clip_video: dict[str, str] = {}
    if source is None:
        streams, videos = generate_videos(d.bucket_frames, d.videos_per_bucket,
                                          WorldConfig(habit=d.habit, event_rate=d.event_rate, fps=d.fps), d.seed)
        write_narrations(streams, out_json)
        for uid, (bucket, n_frames) in videos.items():
            layout[uid], clip_video[uid] = (bucket, 0.0, n_frames), uid
    else:
        real = read_narrations(source, d.narration_pass)
        seconds = [n / d.fps for n in d.bucket_frames]
        chosen: dict[str, list[Narration]] = {}
        per_bucket: Counter = Counter()
        for uid, bucket, start in cut_clips(real.videos, seconds):
            b = BUCKETS.index(bucket)
            if per_bucket[bucket] >= d.videos_per_bucket[b]:
                continue
            per_bucket[bucket] += 1
            clip_id = f"{uid}@{bucket}"
            layout[clip_id], clip_video[clip_id] = (bucket, start, d.bucket_frames[b]), uid
            chosen[uid] = real.videos[uid]
        if not layout:
            raise StageInputError(f"mm_ego.data.narrations_path: {source} has no video long enough for a "
                                  f"{seconds[0]:.0f}-second clip with 4 narrations")
        write_narrations(chosen, out_json, narration_pass=d.narration_pass)
    # the official format is the interface: everything downstream reads the file back
    stored = read_narrations(out_json, d.narration_pass if source is not None else 1).videos
    cfg = FrameConfig(d_feat=p.frames.d_feat, patches=p.frames.patches, noise=p.frames.noise,
                      pooled_detail=p.frames.pooled_detail, seed=d.seed)
    frames, clips = {}, []
    for i, (clip_id, (bucket, start, n_frames)) in enumerate(sorted(layout.items())):
        events = events_of_clip(stored[clip_video[clip_id]], start, n_frames, d.fps)
        frames[clip_id] = synthesize_frames(events, n_frames, cfg, seed=d.seed * 1_000_003 + i)
        clips.append({"clip_id": clip_id, "video_uid": clip_video[clip_id], "bucket": bucket, "start_sec": start,
                      "n_frames": n_frames, "fps": d.fps, "events": len(events)})
    save_tensors(frames, ctx.path("data/frames.safetensors"))
    save_json({"source": str(source) if source else "synthetic", "clips": clips}, ctx.path("data/clips.json"))


def _load_clips(ctx: StageContext) -> list[Clip]:
    p = ctx.params
    meta = load_json(ctx.path("data/clips.json"))["clips"]
    stored = read_narrations(ctx.path("data/narration.json"),
                             p.data.narration_pass if p.data.narrations_path else 1).videos
    return [Clip(c["clip_id"], c["video_uid"], c["bucket"], c["start_sec"], c["n_frames"], c["fps"],
                 tuple(events_of_clip(stored[c["video_uid"]], c["start_sec"], c["n_frames"], c["fps"])))
            for c in meta]


# --------------------------------------------------------------------------------------------------
# stage 2: the narration -> QA data engine (§3.1)
# --------------------------------------------------------------------------------------------------
def _llm(name: str):
    from components.llm import load_lm

    return load_lm(name, cache_dir=load_settings().cache_dir, seed=0)


def qa(ctx: StageContext) -> None:
    """Multiple-choice questions with evidence (templates, or the LLM), with a controlled biased share."""
    p = ctx.params
    clips = _load_clips(ctx)
    all_candidates = template_candidates(clips, p.qa.qtypes)
    if not all_candidates:
        raise StageInputError("mm_ego.qa: the narrations give no template question (no 'puts', 'picks up' or "
                              "'opens' events were parsed)")
    stats: dict[str, Any] = {"engine": p.qa.engine}
    llm_records: list[dict[str, Any]] = []
    template_clips = {c.clip_id for c in clips}
    if p.qa.engine == "llm":
        by_bucket = defaultdict(list)
        for c in clips:
            by_bucket[c.bucket].append(c)
        per = max(1, p.qa.llm_clips // len(by_bucket))
        prompted = [c for b in sorted(by_bucket) for c in by_bucket[b][:per]]
        accepted, llm_stats, failed = llm_candidates(prompted, _llm(p.qa.llm), seed=p.qa.seed)
        priors = question_priors(all_candidates)
        llm_records = [to_record(cand, options, idx, priors.get(cand.question) == cand.answer, "llm")
                       for cand, options, idx in accepted]
        template_clips -= {c.clip_id for c in prompted}
        if p.qa.llm_fallback == "template":
            template_clips |= set(failed)
        stats["llm"] = {**llm_stats.to_dict(), "model": p.qa.llm}
    candidates = [c for c in all_candidates if c.clip.clip_id in template_clips]
    # priors and distractors come from the whole corpus, also when the templates serve only some clips
    records, sample_stats = sample_questions(candidates, SampleConfig(p.qa.per_clip, p.qa.biased_share, p.qa.seed),
                                             corpus=all_candidates) if candidates else ([], {"buckets": {}})
    records += llm_records
    if not records:
        raise StageInputError("mm_ego.qa: no question survived (all LLM questions rejected and "
                              "qa.llm_fallback is 'drop')")
    write_jsonl(records, ctx.path("data/qa.jsonl"))
    counts = Counter((r["length_bucket"], r["qtype"]) for r in records)
    stats.update({"questions": len(records), "biased_share": float(np.mean([r["biased"] for r in records])),
                  "by_bucket_qtype": {f"{b}/{q}": n for (b, q), n in sorted(counts.items())},
                  **{f"sampling/{b}/{k}": v for b, s in sample_stats["buckets"].items() for k, v in s.items()}})
    save_json(stats, ctx.path("metrics/qa.json"))


# --------------------------------------------------------------------------------------------------
# stage 3: EgoMemoria-style benchmark (§4)
# --------------------------------------------------------------------------------------------------
def benchmark(ctx: StageContext) -> None:
    """Hold out whole videos as the benchmark; the other videos' questions are the training data."""
    b = ctx.params.benchmark
    rows = read_jsonl(ctx.path("data/qa.jsonl"))
    train_v, test_v = split_videos([r["video_uid"] for r in rows], b.test_fraction, b.split_seed)
    test_set = set(test_v)
    train = [r for r in rows if r["video_uid"] not in test_set]
    test = [r for r in rows if r["video_uid"] in test_set]
    missing = [bk for bk in BUCKETS if not any(r["length_bucket"] == bk for r in test)]
    if missing:
        raise StageInputError(f"mm_ego.benchmark: no held-out question in bucket(s) {missing}; raise "
                              f"data.videos_per_bucket or benchmark.test_fraction")
    write_jsonl(train, ctx.path("data/benchmark/train.jsonl"))
    write_jsonl(test, ctx.path("data/benchmark/test.jsonl"))
    summary: dict[str, Any] = {"train/videos": len(train_v), "test/videos": len(test_v),
                               "train/questions": len(train), "test/questions": len(test)}
    for bk in BUCKETS:
        sel = [r for r in test if r["length_bucket"] == bk]
        summary[f"test/{bk}/questions"] = len(sel)
        summary[f"test/{bk}/biased_share"] = float(np.mean([r["biased"] for r in sel])) if sel else math.nan
    save_json(summary, ctx.path("metrics/benchmark.json"))


# --------------------------------------------------------------------------------------------------
# stage 4: training, one item per method (§3.2)
# --------------------------------------------------------------------------------------------------
def _vocab(train_rows: list[dict[str, Any]]) -> Vocab:
    return Vocab.build([r["question"] for r in train_rows] + [o for r in train_rows for o in r["options"]])


def _frames(ctx: StageContext) -> tuple[list[torch.Tensor], dict[str, int]]:
    tensors = load_tensors(ctx.path("data/frames.safetensors"))
    names = sorted(tensors)
    return [tensors[n] for n in names], {n: i for i, n in enumerate(names)}


def _model_config(p: MmEgoParams, vocab: Vocab) -> MPPConfig:
    m = p.model
    return MPPConfig(vocab_size=len(vocab.tokens), d_feat=p.frames.d_feat, patches=p.frames.patches,
                     d_model=m.d_model, n_layers=m.n_layers, n_heads=m.n_heads, d_ff=m.d_ff, k=m.k)


def train(ctx: StageContext) -> None:
    """Train this item's method once per seed on the training videos' questions; weights as safetensors."""
    p, method = ctx.params, ctx.item
    rows = read_jsonl(ctx.path("data/benchmark/train.jsonl"))
    frames, index = _frames(ctx)
    vocab = _vocab(rows)
    data = encode_rows(rows, vocab, index)
    out = ctx.item_dir("models/")
    history: dict[str, Any] = {}
    with torch_threads(p.train.threads):
        for seed in p.seeds:
            model = EgoQAModel(_model_config(p, vocab), seed=seed)
            cfg = TrainConfig(steps=p.train.steps, lr=p.train.lr, warmup_steps=p.train.warmup_steps, seed=seed,
                              log_every=max(1, p.train.steps // 40), progress=ctx.progress,
                              desc=f"mm_ego {method} seed {seed}")
            result = fit(model, make_loss(method, p.train.pointer_weight, p.train.teacher_forcing, seed),
                         batch_sampler(data, frames, p.train.batch_size), cfg,
                         callback=ctx.metric_callback(f"train/{method}/seed{seed}"))
            save_tensors(model.state_dict(), out / f"seed{seed}.safetensors", metadata={"method": method})
            history[f"seed{seed}"] = {"seconds": result.seconds, "final_loss": result.final_loss,
                                      "history": result.history}
    save_json({"method": method, "vocab": list(vocab.tokens), "seeds": history}, out / "train.json")


# --------------------------------------------------------------------------------------------------
# stage 5: evaluation and de-biasing (§4)
# --------------------------------------------------------------------------------------------------
def _predict_all(model: EgoQAModel, method: str, data: Any, frames: list[torch.Tensor], n: int,
                 batch: int = 64) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Chosen option per question, and per MPP question the pointer's recall of the evidence frames."""
    choice = np.zeros(n, dtype=np.int64)
    pointer: list[dict[str, Any]] = []
    for _, group in sorted(length_groups(data, frames).items()):
        for s in range(0, len(group), batch):
            idx = group[s:s + batch]
            b = make_batch(data, frames, idx)
            out = predict(model, method, b)
            choice[idx] = out.logits.argmax(1).numpy()
            if out.pointer is not None:
                for row, i in enumerate(idx):
                    ev = set(data.evidence[i])
                    picked = set(out.selected[row].tolist())
                    scores = out.pointer[row]
                    pointer.append({"q": i, "recall": len(ev & picked) / len(ev),
                                    "evidence_rank": float(np.mean([int((scores > scores[e]).sum()) for e in ev])),
                                    "scores": scores.numpy()})
    return choice, pointer


def evaluate(ctx: StageContext) -> None:
    """Answer the benchmark with every model and the blind LLM; de-bias; accuracy per bucket and MDA."""
    p = ctx.params
    test = read_jsonl(ctx.path("data/benchmark/test.jsonl"))
    frames, index = _frames(ctx)
    answer = np.asarray([r["answer_idx"] for r in test])
    buckets = [r["length_bucket"] for r in test]
    biased = np.asarray([r["biased"] for r in test], dtype=bool)
    correct: dict[tuple[str, int], np.ndarray] = {}
    pointer_rows: list[dict[str, Any]] = []
    example = None
    with torch_threads(p.train.threads):
        for method in p.train.methods:
            info = load_json(ctx.path(f"models/{method}/train.json"))
            vocab = Vocab(tuple(info["vocab"]))
            data = encode_rows(test, vocab, index)
            for seed in p.seeds:
                model = EgoQAModel(_model_config(p, vocab), seed=seed)
                model.load_state_dict(load_tensors(ctx.path(f"models/{method}/seed{seed}.safetensors")))
                choice, pointer = _predict_all(model, method, data, frames, len(test))
                correct[(method, seed)] = choice == answer
                for rec in pointer:
                    pointer_rows.append({"seed": seed, "bucket": buckets[rec["q"]], "recall": rec["recall"],
                                         "evidence_rank": rec["evidence_rank"]})
                    if example is None and buckets[rec["q"]] == BUCKETS[-1] and seed == p.seeds[0]:
                        example = (rec["scores"], test[rec["q"]])
    llm_seconds, llm_pairs = 0.0, 0
    llm_correct = None
    if p.debias.llm != "none":
        started = time.perf_counter()
        choices, llm_pairs = blind_llm_choices(_llm(p.debias.llm), [r["question"] for r in test],
                                               [r["options"] for r in test])
        llm_seconds = time.perf_counter() - started
        llm_correct = choices == answer
    rows, preds = [], []
    for seed in p.seeds:
        blind = {}
        if p.debias.use_blind_network and ("blind", seed) in correct:
            blind["blind"] = correct[("blind", seed)]
        if llm_correct is not None:
            blind["llm"] = llm_correct
        keep = debias_mask(blind)
        models = {m: correct[(m, seed)] for m in p.train.methods}
        if llm_correct is not None:
            models["llm"] = llm_correct
        for name, ok in models.items():
            table = accuracy_table(ok, buckets, keep)
            row = {"model": name, "seed": seed, "raw_mean": table["raw_mean"], "mda": table["mda"],
                   "inflation": table["inflation"], "kept": int(keep.sum()),
                   "acc_biased": float(100 * ok[biased].mean()) if biased.any() else math.nan,
                   "acc_unbiased": float(100 * ok[~biased].mean()) if (~biased).any() else math.nan}
            row.update({f"raw_{b}": table["raw"][b] for b in BUCKETS})
            row.update({f"debiased_{b}": table["debiased"][b] for b in BUCKETS})
            row.update({f"kept_{b}": int(sum(1 for i, bk in enumerate(buckets) if bk == b and keep[i]))
                        for b in BUCKETS})
            rows.append(row)
            preds += [{"model": name, "seed": seed, "q": i, "bucket": buckets[i], "qtype": test[i]["qtype"],
                       "biased": bool(biased[i]), "kept": bool(keep[i]), "correct": bool(ok[i])}
                      for i in range(len(test))]
    save_table(rows, ctx.path("tables/accuracy.parquet"))
    save_table(preds, ctx.path("tables/predictions.parquet"))
    summary: dict[str, Any] = {"test_questions": len(test), "llm_seconds": llm_seconds, "llm_pairs_scored": llm_pairs}
    for name in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == name]
        for key in ("mda", "raw_mean", "acc_biased", "acc_unbiased", *(f"debiased_{b}" for b in BUCKETS)):
            summary[f"{name}/{key}"] = mean_std([r[key] for r in mine])[0]
    for b in BUCKETS:
        sel = [r for r in pointer_rows if r["bucket"] == b]
        summary[f"pointer/{b}/recall_at_k"] = float(np.mean([r["recall"] for r in sel])) if sel else math.nan
        summary[f"pointer/{b}/mean_evidence_rank"] = float(np.mean([r["evidence_rank"] for r in sel])) \
            if sel else math.nan
    save_json(summary, ctx.path("metrics/evaluate.json"))
    _plot_accuracy(rows, p, ctx.path("plots/accuracy_by_bucket.png"), ctx.path("plots/accuracy_by_bucket.csv"))
    _plot_pointer(example, pointer_rows, p, ctx.path("plots/pointer_scores.png"), ctx.path("plots/pointer_scores.csv"))


def _plot_accuracy(rows: list[dict[str, Any]], p: MmEgoParams, png: Path, csv: Path) -> None:
    names = list(dict.fromkeys(r["model"] for r in rows))
    mean = {(n, kind, b): mean_std([r[f"{kind}_{b}"] for r in rows if r["model"] == n])[0]
            for n in names for kind in ("raw", "debiased") for b in BUCKETS}
    fig, axes = figure(10, 4, ncols=2)
    for ax, kind in zip(axes, ("raw", "debiased")):
        for n in names:
            ax.plot(range(len(BUCKETS)), [mean[(n, kind, b)] for b in BUCKETS], marker="o", label=LABELS[n])
        ax.axhline(CHANCE, color="grey", linestyle=":", linewidth=1)
        ax.set_xticks(range(len(BUCKETS)), [f"{b}\n({t} frames)" for b, t in zip(BUCKETS, p.data.bucket_frames)])
        ax.set_ylabel(f"{kind} accuracy (%)")
        ax.set_title(f"{kind} accuracy by video length")
    axes[0].legend(fontsize=7)
    save_figure(fig, png)
    lines = ["bucket," + ",".join(f"{n}_{kind}" for n in names for kind in ("raw", "debiased"))]
    lines += [f"{b}," + ",".join(f"{mean[(n, kind, b)]:.3f}" for n in names for kind in ("raw", "debiased"))
              for b in BUCKETS]
    csv.write_text("\n".join(lines) + "\n")


def _plot_pointer(example: tuple[np.ndarray, dict[str, Any]] | None, pointer_rows: list[dict[str, Any]],
                  p: MmEgoParams, png: Path, csv: Path) -> None:
    fig, axes = figure(11, 3.5, ncols=2)
    lines = ["frame,score,evidence"]
    if example is not None:
        scores, row = example
        ev = set(row["evidence_frames"])
        top = set(np.argsort(-scores)[: p.model.k].tolist())
        t = np.arange(len(scores))
        axes[0].plot(t, scores, linewidth=0.8, label="pointer score")
        axes[0].scatter(sorted(top), scores[sorted(top)], s=18, color="tab:orange", label=f"top-{p.model.k}")
        for e in sorted(ev):
            axes[0].axvline(e, color="tab:red", linestyle="--", linewidth=1)
        axes[0].set_title(f"{row['question']} (evidence: red)", fontsize=8)
        axes[0].set_xlabel("frame")
        axes[0].legend(fontsize=7)
        lines += [f"{i},{s:.5f},{int(i in ev)}" for i, s in enumerate(scores)]
    else:
        axes[0].text(0.5, 0.5, "no MPP model in train.methods", ha="center")
    if pointer_rows:
        recall = [float(np.mean([r["recall"] for r in pointer_rows if r["bucket"] == b] or [math.nan]))
                  for b in BUCKETS]
        uniform = [min(1.0, p.model.k / t) for t in p.data.bucket_frames]
        axes[1].bar(np.arange(3) - 0.2, recall, width=0.4, label=f"pointer top-{p.model.k}")
        axes[1].bar(np.arange(3) + 0.2, uniform, width=0.4, label="random k frames (k/T)")
        axes[1].set_xticks(range(3), list(BUCKETS))
        axes[1].set_ylabel("evidence frames selected (recall)")
        axes[1].legend(fontsize=7)
    save_figure(fig, png)
    csv.write_text("\n".join(lines) + "\n")


# --------------------------------------------------------------------------------------------------
# stage 6: the EgoMemoria table and the claims
# --------------------------------------------------------------------------------------------------
def _spearman(x: list[float], y: list[float]) -> float:
    if len(x) < 2:
        return math.nan
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def claims_from(rows: list[dict[str, Any]], n_biased: int, mask_models: set[str]) -> list[Claim]:
    """The two claims, decided from the per-seed accuracy rows (means over seeds)."""
    def m(name: str, key: str) -> float:
        return mean_std([r[key] for r in rows if r["model"] == name])[0]

    names = list(dict.fromkeys(r["model"] for r in rows))
    claims = []
    if {"mpp", "uniform"} <= set(names):
        gaps = [m("mpp", f"debiased_{b}") - m("uniform", f"debiased_{b}") for b in BUCKETS]
        raw_gaps = [m("mpp", f"raw_{b}") - m("uniform", f"raw_{b}") for b in BUCKETS]
        beats = m("mpp", "mda") > m("uniform", "mda")
        grows = all(np.isfinite(gaps)) and gaps[0] < gaps[1] < gaps[2]
        claims.append(Claim(
            "MPP beats uniform-k sampling on MDA, and the gap grows with video length (short < medium < long)",
            holds=bool(beats and grows),
            evidence=f"MDA MPP {m('mpp', 'mda'):.1f} vs uniform {m('uniform', 'mda'):.1f}; debiased gap per bucket "
                     f"{', '.join(f'{b} {g:+.1f}' for b, g in zip(BUCKETS, gaps))} (raw gaps "
                     f"{', '.join(f'{g:+.1f}' for g in raw_gaps)})",
            numbers={"mda_mpp": m("mpp", "mda"), "mda_uniform": m("uniform", "mda"),
                     **{f"gap_{b}": g for b, g in zip(BUCKETS, gaps)},
                     **{f"raw_gap_{b}": g for b, g in zip(BUCKETS, raw_gaps)}}))
    if "blind" in names:
        acc = m("blind", "acc_biased")
        se = 100 * math.sqrt(0.25 * 0.75 / max(1, n_biased))
        z = (acc - CHANCE) / se
        others = [n for n in names if n not in mask_models]
        exploit = {n: m(n, "acc_biased") - m(n, "acc_unbiased") for n in names}
        inflation = {n: m(n, "inflation") for n in names}
        largest = max(names, key=lambda n: inflation[n])
        rho = _spearman([exploit[n] for n in others], [inflation[n] for n in others])
        above = z > 2.0
        removes = largest in mask_models and (math.isnan(rho) or rho > 0)
        claims.append(Claim(
            "The blind model scores above chance on the biased subset, and de-biasing removes that inflation "
            "(raw - debiased largest for prior-exploiting models)",
            holds=bool(above and removes),
            evidence=f"blind network on the biased subset {acc:.1f}% vs chance {CHANCE:.0f}% (z = {z:.1f}, "
                     f"n = {n_biased}); inflation raw - debiased: "
                     f"{', '.join(f'{n} {inflation[n]:+.1f}' for n in names)}; prior exploitation "
                     f"(acc biased - unbiased): {', '.join(f'{n} {exploit[n]:+.1f}' for n in names)}; rank "
                     f"correlation of the two over the non-blind models {fmt(rho)}",
            numbers={"blind_acc_biased": acc, "z": z, "spearman_exploit_inflation": rho,
                     **{f"inflation_{n}": inflation[n] for n in names},
                     **{f"exploit_{n}": exploit[n] for n in names}}))
    return claims


def report(ctx: StageContext) -> None:
    """EgoMemoria table (models x buckets, raw and debiased, MDA) and the claims."""
    p = ctx.params
    rows = load_table(ctx.path("tables/accuracy.parquet"))
    summary = load_json(ctx.path("metrics/evaluate.json"))
    bench = load_json(ctx.path("metrics/benchmark.json"))
    qa_stats = load_json(ctx.path("metrics/qa.json"))
    names = list(dict.fromkeys(r["model"] for r in rows))
    columns = ["model", *(f"raw {b}" for b in BUCKETS), "raw mean", *(f"debiased {b}" for b in BUCKETS), "MDA",
               "raw - debiased", "paper MDA"]
    table = []
    for n in names:
        mine = [r for r in rows if r["model"] == n]
        row: dict[str, Any] = {"model": LABELS[n] if n != "llm" else f"{LABELS[n]}: {p.debias.llm}"}
        for b in BUCKETS:
            row[f"raw {b}"] = mean_std([r[f"raw_{b}"] for r in mine])[0]
            row[f"debiased {b}"] = mean_std([r[f"debiased_{b}"] for r in mine])[0]
        mda, sd = mean_std([r["mda"] for r in mine])
        row["raw mean"] = mean_std([r["raw_mean"] for r in mine])[0]
        row["MDA"] = f"{mda:.1f} ± {sd:.1f}" if len(mine) > 1 else mda
        row["raw - debiased"] = mean_std([r["inflation"] for r in mine])[0]
        row["paper MDA"] = PAPER_MDA if n == "mpp" else None
        table.append(row)
    mask_models = ({"blind"} if p.debias.use_blind_network else set()) | ({"llm"} if p.debias.llm != "none" else set())
    test = read_jsonl(ctx.path("data/benchmark/test.jsonl"))
    n_biased = sum(r["biased"] for r in test)
    claims = claims_from(rows, n_biased, mask_models)
    kept = {b: rows[0][f"kept_{b}"] for b in BUCKETS}
    bucket_rows = [{"bucket": b, "frames": t, "test questions": bench[f"test/{b}/questions"],
                    "biased share": bench[f"test/{b}/biased_share"], f"kept after de-biasing (seed {p.seeds[0]})": kept[b],
                    f"pointer recall@{p.model.k}": summary.get(f"pointer/{b}/recall_at_k"),
                    "uniform coverage k/T": min(1.0, p.model.k / t)}
                   for b, t in zip(BUCKETS, p.data.bucket_frames)]
    source = (f"synthesised from the narrations of {p.data.narrations_path}" if p.data.narrations_path
              else "synthetic egocentric streams")
    notes = [
        (f"Accuracy in % on {bench['test/questions']} questions of {bench['test/videos']} held-out videos "
         f"({bench['train/questions']} training questions from {bench['train/videos']} videos); mean over seeds "
         f"{p.seeds}."),
        (f"De-biasing drops every question that a blind model ({', '.join(sorted(mask_models))}) answers "
         "correctly; the blind models that define the mask therefore score 0 debiased by construction."),
        (f"Frames: {source}; each frame is {p.frames.patches} patch tokens, compressed to their mean for the "
         "glimpse."),
        f"Paper MDA {PAPER_MDA} is MM-Ego (LLaVA-OV-7B class) on EgoMemoria; not comparable in absolute value.",
    ]
    if "llm" in qa_stats:
        notes.append(f"LLM QA engine ({qa_stats['llm']['model']}): {qa_stats['llm']['accepted']}/"
                     f"{qa_stats['llm']['attempted']} questions accepted "
                     f"({100 * qa_stats['llm']['acceptance_rate']:.0f}%).")
    Report(slug="mm_ego", title="MM-Ego: EgoMemoria-style accuracy by video length (%, raw and debiased)",
           columns=columns, rows=table, claims=claims, notes=notes,
           extra_tables={"benchmark buckets": bucket_rows}).save(ctx.path("report.json"))


PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=MmEgoParams,
    stages=(
        Stage("narrations", narrations, params=("data", "frames"),
              outs=("data/narration.json", "data/frames.safetensors", "data/clips.json")),
        Stage("qa", qa, params=("data", "qa"), deps=("data/narration.json", "data/clips.json"),
              outs=("data/qa.jsonl",), metrics=("metrics/qa.json",)),
        Stage("benchmark", benchmark, params=("benchmark",), deps=("data/qa.jsonl",),
              outs=("data/benchmark/",), metrics=("metrics/benchmark.json",)),
        Stage("train", train, gpu=True, params=("seeds", "frames", "model", "train"), fan_out="train.methods",
              deps=("data/frames.safetensors", "data/benchmark/"), outs=("models/",)),
        Stage("evaluate", evaluate, params=("seeds", "frames", "model", "train", "debias"),
              deps=("data/frames.safetensors", "data/benchmark/", "models/"),
              outs=("tables/accuracy.parquet", "tables/predictions.parquet"), metrics=("metrics/evaluate.json",),
              plots=(Plot("plots/accuracy_by_bucket.png"), Plot("plots/pointer_scores.png"),
                     Plot("plots/accuracy_by_bucket.csv", x="bucket", y="mpp_debiased",
                          title="debiased accuracy of MPP by video length"),
                     Plot("plots/pointer_scores.csv", x="frame", y="score",
                          title="MPP pointer scores over one long clip (evidence column marks the answer)"))),
        Stage("report", report, params=("seeds", "data", "model", "train", "debias"),
              deps=("tables/accuracy.parquet", "metrics/evaluate.json", "metrics/benchmark.json", "metrics/qa.json",
                    "data/benchmark/"),
              outs=("report.json", "report.md")),
    ),
)
