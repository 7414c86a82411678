"""Reading Your Heart: Learning ECG Words and Sentences via Pre-training ECG Language Model (arXiv 2502.10707).

HeartLang on the brief's CPU reduction: realistic unlabelled ECGs from the deepfake-ecg generator for
pretraining, a labelled Gaussian-wave PQRST probe set (rhythm: sinus / brady / tachy / AF-like; form: normal / wide
QRS / inverted T), or PTB-XL benchmark arrays and WFDB records of your own. Stages in the paper's order (§3):

1. **data** (§4.1 preprocessing): NaN fill, 100 Hz, standard lead order, band-pass 0.67-40 Hz (order 5, filtfilt),
   standardised by the training split's mean and deviation (as the PTB-XL benchmark arrays HeartLang reads);
2. **tokenize** (§3.1 QRS-Tokenizer): R peaks on lead I (xqrs), heartbeat tokens of 96 samples with R at 48,
   lead-by-lead sentences with lead and time indices; the fixed-window tokens of the control;
3. **vqhbr** (§3.2): the VQ-HBR tokenizer model (transformer encoder, NormEMA codebook, decoder), one per
   tokenizer, frozen afterwards;
4. **pretrain** (§3.3): masked ECG-sentence pretraining (50% masking, cross-entropy on the frozen VQ-HBR codes);
5. **probe** (§4.2): logistic regression on mean-pooled features at 1 / 10 / 100 % of the labels, macro ROC-AUC,
   for HeartLang, the same transformer at random init, and fixed-window tokens with the same SSL;
6. **report**: the paper-shaped table (PTB-XL numbers beside ours), the two claims, the checks.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from components.ecg.codes import code_content
from components.ecg.models import MaskedConfig, TransformerConfig, VQHBRConfig, batched, load_masked, load_vqhbr
from components.ecg.peaks import detect_r_peaks
from components.ecg.preprocess import LEADS
from components.ecg.probe import count_features, label_subset, linear_probe
from components.ecg.tokenizer import load_sentences, qrs_tokenize, save_sentences, window_tokenize
from components.ecg.train import Schedule, random_init, train_masked, train_vqhbr
from components.io import load_table, save_json, save_model, save_table
from paperflows import Pipeline, Plot, StageContext, StageInputError, derive_seed, stage
from pipelines.heartlang import ABOUT, sources
from pipelines.heartlang.params import HeartlangParams
from pipelines.heartlang.plots import plot_auc, plot_example, plot_training

DATA, DATA_METRICS, DATA_TIMINGS = "data/", "metrics/data.json", "timings/data.json"
TOKENS, TOKEN_METRICS, TOKEN_TIMINGS, EXAMPLE_PNG = (
    "tokens/",
    "metrics/tokenize.json",
    "timings/tokenize.json",
    "plots/example_sentence.png",
)
VQ_MODELS, VQ_CURVES = "models/vqhbr/", "tables/vqhbr_curves.parquet"
PRE_MODELS, PRE_CURVES, CODES = "models/pretrain/", "tables/pretrain_curves.parquet", "tables/code_usage.parquet"
TRAIN_PNG, TRAIN_CSV = "plots/training.png", "plots/pretrain_curves.csv"
SCORES, PROBE_METRICS, AUC_PNG, AUC_CSV = "tables/probe.parquet", "metrics/probe.json", "plots/auc.png", "plots/auc.csv"
SETS = ("unlabelled", "probe_train", "probe_test")
TOKENIZER_OF = {"heartlang": "qrs", "random_init": "qrs", "fixed_window": "window", "beat_count": "qrs"}


def _save_labels(tasks: dict[str, np.ndarray], path) -> None:
    np.savez(path, **{k: v.astype(np.int8) for k, v in tasks.items()})


# --------------------------------------------------------------------------------------------------
# step 1: the recordings, preprocessed to (N, 12, 1000) at 100 Hz
# --------------------------------------------------------------------------------------------------
@stage(params=("data", "tokenize.detector"), outs=(DATA,), metrics=(DATA_METRICS,), timings=(DATA_TIMINGS,))
def data(ctx: StageContext) -> None:
    """Unlabelled recordings (deepfake-ecg, or the user's WFDB records) and the labelled probe set (Gaussian-wave
    PQRST model, or PTB-XL benchmark arrays), as (N, 12, 1000) at 100 Hz."""
    d, out, times = ctx.params.data, ctx.path(DATA), {}
    started = time.perf_counter()
    unlabelled, scores = sources.unlabelled(ctx)
    times["unlabelled_s"], started = time.perf_counter() - started, time.perf_counter()
    train_x, test_x, train_tasks, test_tasks = sources.probe_set(ctx)
    times["labelled_s"] = time.perf_counter() - started
    for name, array in zip(SETS, (unlabelled, train_x, test_x)):
        np.save(out / f"{name}.npy", array.astype(np.float32))
    _save_labels(train_tasks, out / "probe_train_labels.npz")
    _save_labels(test_tasks, out / "probe_test_labels.npz")
    metrics = {
        "unlabelled": len(unlabelled),
        "probe_train": len(train_x),
        "probe_test": len(test_x),
        "source": "wfdb" if d.wfdb_path else "deepfake-ecg",
        "probe_source": "ptbxl" if d.path else "gaussian-pqrst",
        "tasks": {k: int(v.shape[1]) for k, v in train_tasks.items()},
    }
    save_json({**metrics, "detector": scores} if d.wfdb_path else metrics, ctx.path(DATA_METRICS))
    save_json(times, ctx.path(DATA_TIMINGS))


# --------------------------------------------------------------------------------------------------
# step 2: QRS tokens (R peaks on lead I) and fixed-window tokens, the official .npy triples
# --------------------------------------------------------------------------------------------------
@stage(
    params=("tokenize",),
    deps=(DATA,),
    outs=(TOKENS,),
    metrics=(TOKEN_METRICS,),
    timings=(TOKEN_TIMINGS,),
    plots=(Plot(EXAMPLE_PNG),),
)
def tokenize(ctx: StageContext) -> None:
    """Sentences of every set with both tokenizers."""
    t, folder = ctx.params.tokenize, ctx.path(TOKENS)
    leads = [LEADS.index(name) for name in t.leads]
    metrics, times = {}, {"detect_s": 0.0, "segment_s": 0.0}
    for name in SETS:
        x = np.load(ctx.path(DATA) / f"{name}.npy")
        started = time.perf_counter()
        peaks = detect_r_peaks(x, 100, t.detector, lead=None)  # lead I, else the first lead with a signal
        times["detect_s"] += time.perf_counter() - started
        started = time.perf_counter()
        qrs = qrs_tokenize(x, peaks, max_len=t.max_len, leads=leads)
        times["segment_s"] += time.perf_counter() - started
        save_sentences(qrs, folder / "qrs", name)
        save_sentences(window_tokenize(x, max_len=t.max_len, leads=leads), folder / "window", name)
        beats = np.array([len(p) for p in peaks])
        metrics[name] = {
            "beats_mean": float(beats.mean()),
            "under_2_beats": int((beats < 2).sum()),
            "truncated": int((beats * len(leads) > t.max_len).sum()),
        }
        if name == "probe_train":
            plot_example(x[0], peaks[0], qrs.subset(np.array([0])), t.leads, ctx.path(EXAMPLE_PNG))
    save_json(metrics, ctx.path(TOKEN_METRICS))
    save_json(times, ctx.path(TOKEN_TIMINGS))


def _transformer(p, max_len: int) -> TransformerConfig:
    return TransformerConfig(
        dim=p.dim,
        depth=p.depth,
        heads=p.heads,
        mlp=getattr(p, "mlp", 2 * p.dim),
        dropout=getattr(p, "dropout", 0.0),
        max_len=max_len,
    )


def _vq_config(ctx: StageContext) -> VQHBRConfig:
    v = ctx.params.vqhbr
    return VQHBRConfig(
        encoder=_transformer(v, ctx.params.tokenize.max_len),
        decoder_depth=v.decoder_depth,
        num_codes=v.num_codes,
        code_dim=v.code_dim,
        decay=v.decay,
        beta=v.beta,
        content_only=v.content_only,
    )


def _masked_config(ctx: StageContext) -> MaskedConfig:
    p = ctx.params.pretrain
    return MaskedConfig(
        backbone=_transformer(p, ctx.params.tokenize.max_len),
        num_codes=ctx.params.vqhbr.num_codes,
        mask_ratio=p.mask_ratio,
    )


# --------------------------------------------------------------------------------------------------
# step 3: VQ-HBR, the tokenizer model that maps each heartbeat to a code ("ECG word")
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "vqhbr", "tokenize.max_len", "pretrain.tokenizers"),
    deps=(TOKENS,),
    outs=(VQ_MODELS, VQ_CURVES),
    gpu=True,
    models={"vqhbr": VQ_MODELS},
)
def vqhbr(ctx: StageContext) -> None:
    """One VQ-HBR per tokenizer on the unlabelled sentences (seeded by the first run seed; the run seeds vary the
    pretraining and the probe's label subsets, which share this frozen tokenizer, as in the paper)."""
    v, curves, seed = ctx.params.vqhbr, [], ctx.params.seeds[0]
    sch = Schedule(steps=v.steps, batch=v.batch, lr=v.lr, warmup_steps=v.warmup_steps)
    for tok in ctx.params.pretrain.tokenizers:
        sentences = load_sentences(ctx.path(TOKENS) / tok, "unlabelled")
        if not (sentences.in_chans > 0).any():
            raise StageInputError(
                f"heartlang.vqhbr: the unlabelled {tok} sentences hold no heartbeat token (no R peak was found on "
                "any recording's first lead with a signal): check data.wfdb_path's records and tokenize.leads"
            )
        model, result = train_vqhbr(
            sentences,
            _vq_config(ctx),
            sch,
            seed=derive_seed(seed, "vqhbr", tok),
            desc=f"vqhbr {tok}",
            callback=ctx.metric_callback(f"vqhbr/{tok}"),
            progress=ctx.progress,
        )
        save_model(model, ctx.path(VQ_MODELS) / f"{tok}.safetensors")
        curves += [{**h, "tokenizer": tok, "seed": seed} for h in result.history]
    save_table(curves, ctx.path(VQ_CURVES))


# --------------------------------------------------------------------------------------------------
# step 4: masked ECG-sentence pretraining on the frozen VQ-HBR codes
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "pretrain", "vqhbr.num_codes", "tokenize.max_len"),
    deps=(TOKENS, VQ_MODELS, VQ_CURVES),
    outs=(PRE_MODELS, PRE_CURVES, CODES),
    plots=(Plot(TRAIN_PNG), Plot(TRAIN_CSV, x="step", y="loss", title="Masked pretraining loss")),
    gpu=True,
    models={"heartlang": PRE_MODELS},
)
def pretrain(ctx: StageContext) -> None:
    """Per tokenizer and seed: code every token with its VQ-HBR, then train the masked model on the codes."""
    p, curves, usage = ctx.params.pretrain, [], []
    sch = Schedule(steps=p.steps, batch=p.batch, lr=p.lr, warmup_steps=p.warmup_steps)
    for tok in p.tokenizers:
        sentences = load_sentences(ctx.path(TOKENS) / tok, "unlabelled")
        for seed in ctx.params.seeds:
            codes = batched(load_vqhbr(ctx.path(VQ_MODELS) / f"{tok}.safetensors").tokenize, sentences)
            counts = torch.bincount(codes[codes >= 0], minlength=ctx.params.vqhbr.num_codes)
            content = code_content(codes.numpy(), sentences.in_chans, sentences.in_times)
            usage += [
                {"tokenizer": tok, "seed": seed, "code": k, "count": int(c), **content} for k, c in enumerate(counts)
            ]
            model, result = train_masked(
                sentences,
                codes.clamp(min=0),
                _masked_config(ctx),
                sch,
                seed=derive_seed(seed, "pretrain", tok),
                desc=f"pretrain {tok} s{seed}",
                callback=ctx.metric_callback(f"pretrain/{tok}/s{seed}"),
                progress=ctx.progress,
            )
            save_model(model, ctx.path(PRE_MODELS) / f"{tok}_s{seed}.safetensors")
            curves += [{**h, "tokenizer": tok, "seed": seed} for h in result.history]
    save_table(curves, ctx.path(PRE_CURVES))
    save_table(usage, ctx.path(CODES))
    plot_training(load_table(ctx.path(VQ_CURVES)), curves, usage, ctx.path(TRAIN_PNG), ctx.path(TRAIN_CSV))


# --------------------------------------------------------------------------------------------------
# step 5: the linear probe at 1 / 10 / 100 % of the labels
# --------------------------------------------------------------------------------------------------
def _features(ctx: StageContext, method: str, seed: int, sentences) -> np.ndarray:
    """A method's probe features of ``sentences``: the beat-count reference, or a model's mean-pooled states."""
    if method == "beat_count":
        return count_features(sentences.in_chans)
    if method == "random_init":
        model = random_init(_masked_config(ctx), derive_seed(seed, "pretrain", "qrs"))
    else:
        model = load_masked(ctx.path(PRE_MODELS) / f"{TOKENIZER_OF[method]}_s{seed}.safetensors")
    return batched(model.features, sentences).numpy()


@stage(
    params=("seeds", "probe", "pretrain", "tokenize.max_len", "vqhbr.num_codes"),
    deps=(DATA, TOKENS, PRE_MODELS),
    outs=(SCORES,),
    metrics=(PROBE_METRICS,),
    plots=(Plot(AUC_PNG), Plot(AUC_CSV, x="fraction", y="auc", title="Macro AUC against label fraction")),
)
def probe(ctx: StageContext) -> None:
    """Macro ROC-AUC of a logistic regression on frozen mean-pooled features, per method, task, fraction, seed."""
    q, rows = ctx.params.probe, []
    labels = {s: dict(np.load(ctx.path(DATA) / f"{s}_labels.npz")) for s in ("probe_train", "probe_test")}
    methods = [m for m in TOKENIZER_OF if TOKENIZER_OF[m] in ctx.params.pretrain.tokenizers]
    for seed in ctx.params.seeds:
        for method in methods:
            tok = TOKENIZER_OF[method]
            train_f, test_f = (
                _features(ctx, method, seed, load_sentences(ctx.path(TOKENS) / tok, s))
                for s in ("probe_train", "probe_test")
            )
            for task, y in labels["probe_train"].items():
                for fraction in q.fractions:
                    pick = label_subset(y, fraction, np.random.default_rng(derive_seed(seed, "labels", task, fraction)))
                    auc = linear_probe(train_f[pick], y[pick], test_f, labels["probe_test"][task], c=q.c)
                    rows.append(
                        {
                            "seed": seed,
                            "method": method,
                            "task": task,
                            "fraction": fraction,
                            "n_labels": len(pick),
                            "auc": auc,
                        }
                    )
    save_table(rows, ctx.path(SCORES))
    cells: dict[str, list[float]] = {}
    for r in rows:
        cells.setdefault(f"{r['method']}/{r['task']}/{r['fraction']:g}", []).append(r["auc"])
    save_json({cell: float(np.mean(aucs)) for cell, aucs in cells.items()}, ctx.path(PROBE_METRICS))
    plot_auc(rows, ctx.path(AUC_PNG), ctx.path(AUC_CSV))


PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=HeartlangParams,
    stages=(data, tokenize, vqhbr, pretrain, probe),
    report="pipelines.heartlang.report:report",
)
