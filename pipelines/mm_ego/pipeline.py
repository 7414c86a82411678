"""MM-Ego: egocentric QA synthesis, the EgoMemoria benchmark and Memory Pointer Prompting (arXiv 2410.07177).

Reproduces, at CPU scale, the EgoMemoria table (accuracy per video-length bucket, raw and de-biased, and the
mean de-biased accuracy MDA) for Memory Pointer Prompting against its frame-selection baselines:

1. **narrations** (§3.1): Ego4D-shaped ``narration.json`` (written by the synthetic-stream generator, or a
   real file given in ``data.narrations_path``) read back through the Ego4D reader; clips cut per length
   bucket and their frame features synthesised from the parsed narrations (patch tokens per frame);
2. **qa** (§3.1, the narration-to-QA data engine): multiple-choice questions with evidence timestamps and
   frame ids, by templates or by the local LLM, with a controlled share of language-biased questions;
3. **benchmark** (§4, EgoMemoria): held-out videos form the test set, grouped by length bucket;
4. **pretrain**: the base network every method fine-tunes (the stand-in for the pretrained MLLM): an aligned
   initialisation (frame projector and object / place word embeddings from the same codes) and a short
   frame -> caption cloze pre-training over ``k`` frames of a habit-free world (no language prior), so the
   answer pass reads frames before it sees a benchmark question;
5. **train** (§3.2): one network per method, fine-tuned from the base, fanned out over ``train.methods``:
   ``mpp`` (global glimpse over compressed frames -> memory-pointer scores -> top-k frames at full resolution,
   pointer supervised by the evidence frames), ``uniform`` (k evenly spaced frames at full resolution),
   ``compressed`` (all frames, compressed only) and ``blind`` (the same network without frames);
6. **evaluate** (§4): de-biasing with the blind models (the blind network and the local LLM scoring the
   options by mean per-token log-probability): questions a blind model gets right are dropped; debiased
   accuracy per bucket and MDA;
7. **report**: the paper-shaped table, the claims (with intervals) and the checks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from components.egovideo.benchmark import blind_llm_choices, split_videos
from components.egovideo.mpp import Vocab, batch_sampler, encode_rows, predict_all, uniform_frames
from components.egovideo.narrations import read_narrations
from components.egovideo.pretrain import caption_texts
from components.egovideo.qa import NoQuestionsError, SampleConfig, generate_questions, read_jsonl, write_jsonl
from components.egovideo.stats import debiased_rows, summarize
from components.egovideo.synthetic import BUCKETS
from components.io import load_json, load_tensors, save_json, save_model, save_table, save_tensors
from paperflows import Pipeline, Plot, StageContext, StageInputError, stage
from pipelines.mm_ego import ABOUT
from pipelines.mm_ego.data import (
    clip_features,
    question_clips,
    real_narrations,
    split_summary,
    stored_pass,
    synthetic_narrations,
    warn_sampling,
)
from pipelines.mm_ego.params import MmEgoParams
from pipelines.mm_ego.plots import plot_accuracy, plot_pointer
from pipelines.mm_ego.training import finetune, pretrain_base, qa_model

NARRATIONS = "data/narration.json"
NARRATION_METRICS = "metrics/narrations.json"
FRAMES = "data/frames.safetensors"
CLIPS = "data/clips.json"
QA = "data/qa.jsonl"
QA_METRICS = "metrics/qa.json"
BENCH = "data/benchmark/"
TRAIN_SET, TEST_SET = f"{BENCH}train.jsonl", f"{BENCH}test.jsonl"
BENCH_METRICS = "metrics/benchmark.json"
BASE = "base/"
BASE_METRICS = "metrics/pretrain.json"
MODELS = "models/"
ACCURACY, PREDICTIONS = "tables/accuracy.parquet", "tables/predictions.parquet"
EVAL_METRICS = "metrics/evaluate.json"
ACC_PNG, ACC_CSV = "plots/accuracy_by_bucket.png", "plots/accuracy_by_bucket.csv"
POINTER_PNG, POINTER_CSV = "plots/pointer_scores.png", "plots/pointer_scores.csv"
REPORT = "report.json"


def _llm(ctx: StageContext, name: str) -> Any:
    from components.llm import load_lm

    return load_lm(name, cache_dir=ctx.cache_dir, seed=0, root=ctx.project)


# --------------------------------------------------------------------------------------------------
# §3.1 narrations, clips and frame features
# --------------------------------------------------------------------------------------------------
@stage(params=("data", "frames"), outs=(NARRATIONS, FRAMES, CLIPS), metrics=(NARRATION_METRICS,))
def narrations(ctx: StageContext) -> None:
    """Write the Ego4D-shaped narrations, read them back, cut clips and synthesise their frame features.

    The metrics count the videos and narrations read, those skipped per reason, and the clips per bucket.
    """
    p, d = ctx.params, ctx.params.data
    if not d.narrations_path:
        specs, source, counts = synthetic_narrations(d, ctx.path(NARRATIONS))
    else:
        specs, source, counts = real_narrations(d, ctx.data_path(d.narrations_path), ctx.path(NARRATIONS))
    # the official format is the interface: everything downstream reads the file back
    stored = read_narrations(ctx.path(NARRATIONS), stored_pass(p)).videos
    frames, clips = clip_features(stored, specs, p)
    save_tensors(frames, ctx.path(FRAMES))
    save_json({**source, "clips": clips}, ctx.path(CLIPS))
    save_json(
        {**counts, "clips": len(clips), **{f"clips/{b}": sum(c.bucket == b for c in specs) for b in BUCKETS}},
        ctx.path(NARRATION_METRICS),
    )


# --------------------------------------------------------------------------------------------------
# §3.1 the narration -> QA data engine
# --------------------------------------------------------------------------------------------------
@stage(
    params=("data.narrations_path", "data.narration_pass", "qa"),
    deps=(NARRATIONS, CLIPS),
    outs=(QA,),
    metrics=(QA_METRICS,),
)
def qa(ctx: StageContext) -> None:
    """Multiple-choice questions with evidence (templates, or the LLM), with a controlled biased share."""
    p = ctx.params
    stored = read_narrations(ctx.path(NARRATIONS), stored_pass(p)).videos
    clips = question_clips(stored, load_json(ctx.path(CLIPS))["clips"])
    lm = _llm(ctx, p.qa.llm_used) if p.qa.engine == "llm" else None
    try:
        records, stats = generate_questions(
            clips,
            p.qa.qtypes,
            SampleConfig(p.qa.per_clip, p.qa.biased_share, p.qa.seed),
            lm=lm,
            llm_clips=p.qa.llm_clips,
            llm_fallback=p.qa.llm_fallback,
        )
    except NoQuestionsError as err:
        raise StageInputError(f"mm_ego.qa: {err}") from None
    if "llm" in stats:
        stats["llm"]["model"] = p.qa.llm_used
    warn_sampling(stats, p.qa)
    write_jsonl(records, ctx.path(QA))
    save_json(stats, ctx.path(QA_METRICS))


# --------------------------------------------------------------------------------------------------
# §4 EgoMemoria-style benchmark: whole videos held out
# --------------------------------------------------------------------------------------------------
@stage(params=("benchmark",), deps=(QA,), outs=(BENCH,), metrics=(BENCH_METRICS,))
def benchmark(ctx: StageContext) -> None:
    """Hold out whole videos as the benchmark; the other videos' questions are the training data. A bucket
    without held-out questions (a small narration file) stays, empty: MDA averages the other buckets."""
    b = ctx.params.benchmark
    rows = read_jsonl(ctx.path(QA))
    try:
        train_v, test_v = split_videos([r["video_uid"] for r in rows], b.test_fraction, b.split_seed)
    except ValueError as err:
        raise StageInputError(
            f"mm_ego.benchmark: the questions come from too few videos to hold one out ({err}); "
            f"use a narration file with more narrated videos"
        ) from None
    train_rows, test = [r for r in rows if r["video_uid"] in train_v], [r for r in rows if r["video_uid"] in test_v]
    write_jsonl(train_rows, ctx.path(TRAIN_SET))
    write_jsonl(test, ctx.path(TEST_SET))
    summary = split_summary(train_v, test_v, train_rows, test)
    save_json(summary, ctx.path(BENCH_METRICS))


# --------------------------------------------------------------------------------------------------
# the base network: frame -> caption pre-training (the pretrained MLLM MM-Ego starts from)
# --------------------------------------------------------------------------------------------------
@stage(
    params=("data.seed", "frames", "model", "pretrain"), deps=(BENCH,), outs=(BASE,), metrics=(BASE_METRICS,), gpu=True
)
def pretrain(ctx: StageContext) -> None:
    """The base network every method and seed fine-tunes: the vocabulary (training questions and options, and the
    caption words), the aligned initialisation and ``pretrain.steps`` of frame -> caption cloze questions over
    ``k`` frames of a habit-free world; its caption accuracy on fresh samples is the metric."""
    p = ctx.params
    rows = read_jsonl(ctx.path(TRAIN_SET))
    vocab = Vocab.build([r["question"] for r in rows] + [o for r in rows for o in r["options"]] + caption_texts())
    model, history, accuracy, aligned = pretrain_base(p, vocab, ctx.progress, ctx.metric_callback("pretrain"))
    out = ctx.path(BASE)
    out.mkdir(parents=True, exist_ok=True)
    save_model(model, out / "base.safetensors", metadata={"stage": "pretrain"})
    save_json({"vocab": list(vocab.tokens), "history": history}, out / "base.json")
    save_json(
        {"caption_accuracy": accuracy, "aligned_words": aligned, "steps": p.pretrain.steps}, ctx.path(BASE_METRICS)
    )


# --------------------------------------------------------------------------------------------------
# §3.2 training, one item per method (MPP: CE + pointer BCE against the evidence frames)
# --------------------------------------------------------------------------------------------------
def _frames(ctx: StageContext) -> tuple[list[torch.Tensor], dict[str, int]]:
    tensors = load_tensors(ctx.path(FRAMES))
    names = sorted(tensors)
    return [tensors[n] for n in names], {n: i for i, n in enumerate(names)}


@stage(
    params=("seeds", "frames.d_feat", "frames.patches", "model", "pretrain", "train"),
    deps=(FRAMES, BENCH, BASE),
    outs=(MODELS,),
    fan_out="train.methods",
    gpu=True,
    models={"video_qa": MODELS},
)
def train(ctx: StageContext) -> None:
    """Fine-tune the base network for this item's method once per seed on the training videos' questions (every
    method and seed starts from the same pre-trained base; without pre-training or alignment each seed starts
    from its own random initialisation); weights as safetensors."""
    p, method, t = ctx.params, ctx.item, ctx.params.train
    rows = read_jsonl(ctx.path(TRAIN_SET))
    frames, index = _frames(ctx)
    vocab = Vocab(tuple(load_json(ctx.path(f"{BASE}base.json"))["vocab"]))
    base = load_tensors(ctx.path(f"{BASE}base.safetensors"))
    from_base = p.pretrain.steps > 0 or p.pretrain.align > 0
    data = encode_rows(rows, vocab, index)
    out = ctx.item_dir(MODELS)
    history: dict[str, Any] = {}
    for seed in p.seeds:
        sampler = batch_sampler(data, frames, t.batch_size)
        callback = ctx.metric_callback(f"train/{method}/seed{seed}")
        model, result = finetune(p, method, vocab, seed, base if from_base else None, sampler, ctx.progress, callback)
        save_model(model, out / f"seed{seed}.safetensors", metadata={"method": method})
        history[f"seed{seed}"] = {"final_loss": result.final_loss, "history": result.history}
    save_json({"method": method, "vocab": list(vocab.tokens), "seeds": history}, out / "train.json")


# --------------------------------------------------------------------------------------------------
# §4 evaluation and de-biasing: questions a blind model answers are dropped; accuracy per bucket, MDA
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "data.bucket_frames", "frames.d_feat", "frames.patches", "model", "train.methods", "debias"),
    deps=(FRAMES, BENCH, MODELS),
    outs=(ACCURACY, PREDICTIONS),
    metrics=(EVAL_METRICS,),
    plots=(
        Plot(ACC_PNG),
        Plot(POINTER_PNG),
        Plot(ACC_CSV, x="bucket", y="mpp_debiased", title="debiased accuracy of MPP by video length"),
        Plot(
            POINTER_CSV,
            x="frame",
            y="score",
            title="MPP pointer scores over one long clip (evidence column marks the answer)",
        ),
    ),
)
def evaluate(ctx: StageContext) -> None:
    """Answer the benchmark with every model (and the MPP model on the evidence frames: the oracle row) and
    the blind LLM; de-bias; accuracy per bucket and MDA."""
    p = ctx.params
    test = read_jsonl(ctx.path(TEST_SET))
    frames, index = _frames(ctx)
    answer = np.asarray([r["answer_idx"] for r in test])
    buckets = [r["length_bucket"] for r in test]
    correct: dict[tuple[str, int], np.ndarray] = {}
    pointer: list[dict[str, Any]] = []
    for method in p.train.methods:
        vocab = Vocab(tuple(load_json(ctx.path(f"{MODELS}{method}/train.json"))["vocab"]))
        data = encode_rows(test, vocab, index)
        for seed in p.seeds:
            model = qa_model(p, vocab, seed)
            model.load_state_dict(load_tensors(ctx.path(f"{MODELS}{method}/seed{seed}.safetensors")))
            choice, records = predict_all(model, method, data, frames)
            correct[(method, seed)] = choice == answer
            pointer += [{"seed": seed, "bucket": buckets[r["q"]], **r} for r in records]
            if method == "mpp":  # the same answer pass fed the evidence frames: pointer vs answer errors
                correct[("oracle", seed)] = predict_all(model, "oracle", data, frames)[0] == answer
    models: dict[str, np.ndarray] = {}
    if p.debias.llm_used is not None:
        choices, _ = blind_llm_choices(
            _llm(ctx, p.debias.llm_used), [r["question"] for r in test], [r["options"] for r in test]
        )
        models["llm"] = choices == answer
    rows, preds = [], []
    biased, qtypes = [r["biased"] for r in test], [r["qtype"] for r in test]
    # whether uniform-k's frames hold every evidence frame of the question (its gate asks if it reads them)
    seen = [
        set(r["evidence_frames"]) <= set(uniform_frames(frames[index[r["clip_id"]]].shape[0], p.model.k).tolist())
        for r in test
    ]
    evaluated = [name for m in p.train.methods for name in ((m, "oracle") if m == "mpp" else (m,))]
    for seed in p.seeds:
        scored = {**{m: correct[(m, seed)] for m in evaluated}, **models}
        seed_rows, seed_preds = debiased_rows(
            scored, {m: scored[m] for m in p.mask_models()}, buckets, biased, qtypes, seed
        )
        rows, preds = rows + seed_rows, preds + [{**r, "uniform_sees_evidence": seen[r["q"]]} for r in seed_preds]
    save_table(rows, ctx.path(ACCURACY))
    save_table(preds, ctx.path(PREDICTIONS))
    save_json({"test_questions": len(test), **summarize(rows, pointer)}, ctx.path(EVAL_METRICS))
    long = [r for r in pointer if r["bucket"] == BUCKETS[-1] and r["seed"] == p.seeds[0]]
    example = (long[0]["scores"], test[long[0]["q"]]) if long else None
    plot_accuracy(rows, p.data.bucket_frames, ctx.path(ACC_PNG), ctx.path(ACC_CSV))
    plot_pointer(example, pointer, p.model.k, p.data.bucket_frames, ctx.path(POINTER_PNG), ctx.path(POINTER_CSV))


PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=MmEgoParams,
    stages=(narrations, qa, benchmark, pretrain, train, evaluate),
    report="pipelines.mm_ego.report:report",
)
