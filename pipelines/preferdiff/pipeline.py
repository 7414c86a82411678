"""PreferDiff: preference diffusion for sequential recommendation (arXiv 2410.13117).

Reproduces, at CPU scale on MovieLens, the paper's comparison of diffusion recommenders trained with different
objectives (its main table and convergence figure), with a SASRec cross-entropy reference:

1. **prepare** (§5 data, official ``data/<Domain>/*.txt``): MovieLens ratings become one time-ordered item
   sequence per user, split 80/10/10 by user and written in the official txt format (or a user's folder of the
   three files is read, checked before any work);
2. **train** (§3-4, one fan-out item per objective): a SASRec encoder summarises the last ``max_len`` items;
   a diffusion model over item embeddings (linear beta, x0 prediction by a single linear denoiser) learns the
   next item's embedding with the objective of the item: MSE-x0 (DreamRec-like), cosine-x0, or PreferDiff's
   ``-(1-lam) log sigmoid(-gamma (L+ - L-)) + lam L+`` with the in-batch centroid as the negative; SASRec-CE is
   the reference. Validation Recall/NDCG after every epoch; the best validation epoch is tested (early stopping);
3. **evaluate**: the results and convergence tables, the curves, and a popularity ranker (training counts), the
   reference every objective must beat before a claim is decided;
4. **report**: the paper-shaped table and the claims (PreferDiff > MSE; cosine >= MSE), paired over seeds.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import torch

from components.data.rec_sequences import (
    SPLITS,
    examples,
    movielens_ratings,
    ratings_to_sequences,
    read_sequence_folder,
    split_users,
    write_sequence_folder,
)
from components.io import load_json, save_json, save_model, save_table
from components.metrics.ranking import ranking_metrics
from components.preference import ObjectiveConfig, PreferenceBatch, objective_loss
from components.recsys import DiffRecConfig, DiffusionRecommender, SASRecConfig, SASRecNextItem, error_scores
from components.training import TrainConfig, fit
from paperflows import Pipeline, Plot, StageContext, StageInputError, derive_seed, stage
from pipelines.preferdiff import ABOUT
from pipelines.preferdiff.params import METRICS, PreferdiffParams
from pipelines.preferdiff.plots import plot_convergence

SEQUENCES = "data/sequences/"
DATA_METRICS = "metrics/data.json"
MODELS = "models/"
RESULTS, CURVES = "tables/results.parquet", "tables/curves.parquet"
EVAL_METRICS = "metrics/evaluate.json"
CURVE_PNG, CURVE_CSV = "plots/convergence.png", "plots/convergence.csv"
REPORT = "report.json"
EVAL_BATCH = 1024


# --------------------------------------------------------------------------------------------------
# §5 data: next-item sequences in the official txt format, split by user
# --------------------------------------------------------------------------------------------------
@stage(params=("data",), outs=(SEQUENCES,), metrics=(DATA_METRICS,))
def prepare(ctx: StageContext) -> None:
    """MovieLens ratings -> one sequence per user -> {train,valid,test}_data.txt (or the user's folder)."""
    d = ctx.params.data
    if d.path:
        splits, source = read_sequence_folder(ctx.data_path(d.path)), "data.path"
    else:
        r = movielens_ratings()
        seqs, _ = ratings_to_sequences(
            r["userId"],
            r["movieId"],
            r["timestamp"],
            min_item_count=d.min_item_count,
            min_user_length=d.min_user_length,
            max_items=d.max_items,
        )
        users = split_users(len(seqs), d.split_seed)
        splits, source = {s: [seqs[i] for i in users[s]] for s in SPLITS}, "dslabs::movielens"
    empty = [s for s in SPLITS if not splits[s]]
    if empty:
        raise StageInputError(
            f"preferdiff.data: no users left in {empty} after the filters (min_item_count "
            f"{d.min_item_count}, min_user_length {d.min_user_length}); loosen them"
        )
    write_sequence_folder(splits, ctx.path(SEQUENCES))
    n_items = max(max(seq) for seqs in splits.values() for seq in seqs)
    save_json(
        {
            "source": source,
            "n_items": n_items,
            **{f"{s}_users": len(splits[s]) for s in SPLITS},
            "interactions": sum(len(seq) for seqs in splits.values() for seq in seqs),
            "mean_length": float(np.mean([len(seq) for seqs in splits.values() for seq in seqs])),
        },
        ctx.path(DATA_METRICS),
    )


def _examples(ctx: StageContext) -> tuple[int, dict[str, tuple[torch.Tensor, torch.Tensor]]]:
    """Item count and (history, target) tensors per split: every prefix of a training user, the last
    ``eval_targets`` positions of a held-out one."""
    p, splits = ctx.params, read_sequence_folder(ctx.path(SEQUENCES))
    out = {}
    for split in SPLITS:
        hist, tgt = examples(splits[split], p.model.max_len, "all" if split == "train" else p.data.eval_targets)
        out[split] = (torch.from_numpy(hist), torch.from_numpy(tgt))
    return load_json(ctx.path(DATA_METRICS))["n_items"], out


# --------------------------------------------------------------------------------------------------
# §3-4 the models and their objectives (MSE-x0, cosine-x0, PreferDiff; SASRec-CE), one item per objective
# --------------------------------------------------------------------------------------------------
def _model(p: PreferdiffParams, method: str, n_items: int, seed: int) -> torch.nn.Module:
    m = p.model
    enc = SASRecConfig(
        n_items,
        m.hidden,
        m.max_len,
        m.n_layers,
        m.n_heads,
        m.dropout,
        item_init_std=0.02 if method == "sasrec" else 1.0,
    )
    if method == "sasrec":
        return SASRecNextItem(enc, seed=derive_seed(seed, "init"))
    return DiffusionRecommender(DiffRecConfig(enc, m.timesteps, p_uncond=m.p_uncond), seed=derive_seed(seed, "init"))


def _loss(p: PreferdiffParams, method: str):
    """``loss_fn(model, (history, target))`` of the objective ``method``."""
    pd = p.preferdiff
    objective = ObjectiveConfig(beta=pd.gamma, sft_weight=pd.lam, pairing=pd.pairing)

    def loss_fn(model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> Any:
        history, target = batch
        if method == "sasrec":
            return model.loss(history, target)
        if method == "preferdiff":
            pos, neg = model.errors(history, target, "cosine", negatives=True, negative_noise=pd.negative_noise)
            scores = PreferenceBatch(chosen=error_scores(pos), rejected=error_scores(neg))
            return objective_loss("preferdiff", scores, objective)
        pos, _ = model.errors(history, target, "mse" if method == "mse" else "cosine")
        return objective_loss("denoise", PreferenceBatch(chosen=error_scores(pos)), objective)

    return loss_fn


def _evaluate(
    p: PreferdiffParams, model: torch.nn.Module, data: tuple[torch.Tensor, torch.Tensor], seed: int
) -> dict[str, float]:
    """Full-ranking Recall / NDCG @5, @10 (guided DDIM for the diffusion models, fixed sampling noise)."""
    was_training, device = model.training, next(model.parameters()).device
    model.eval()
    generator = torch.Generator().manual_seed(derive_seed(seed, "sampling"))
    history, target = data
    parts = []
    for start in range(0, len(target), EVAL_BATCH):
        h = history[start : start + EVAL_BATCH].to(device)
        s = (
            model.scores(h)
            if isinstance(model, SASRecNextItem)
            else model.scores(h, p.model.w, p.model.ddim_stride, generator)
        )
        parts.append(s.float().cpu())
    model.train(was_training)
    return ranking_metrics(torch.cat(parts), target, ks=(5, 10))


def _fit(ctx: StageContext, method: str, seed: int, n_items: int, data: dict[str, Any]) -> dict[str, Any]:
    """Train one (objective, seed); validation after every epoch; test at the best validation epoch."""
    p = ctx.params
    model = _model(p, method, n_items, seed)
    x, y = data["train"]
    batch = min(p.train.batch_size, len(y))
    per_epoch = max(1, len(y) // batch)
    order: dict[str, torch.Tensor] = {}

    def batches(step: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        k = (step - 1) % per_epoch
        if k == 0:  # a fresh permutation every epoch; the last partial batch is dropped
            order["perm"] = torch.randperm(len(y), generator=generator)
        idx = order["perm"][k * batch : (k + 1) * batch]
        return x[idx], y[idx]

    curve, best = [], {"score": -math.inf, "epoch": 0, "state": None}
    log = ctx.metric_callback(f"train/{method}/s{seed}")

    def callback(step: int, metrics: dict[str, float]) -> None:
        epoch = step // per_epoch
        val = _evaluate(p, model, data["valid"], seed)
        curve.append({"method": method, "seed": seed, "epoch": epoch, "loss": metrics["loss"], **val})
        log(step, {**metrics, **{f"valid_{k.replace('@', '_at_')}": v for k, v in val.items()}})
        if val["recall@5"] > best["score"]:
            best.update(score=val["recall@5"], epoch=epoch, state=copy.deepcopy(model.state_dict()))

    cfg = TrainConfig(
        steps=per_epoch * p.train.epochs,
        lr=p.train.lr,
        weight_decay=p.train.weight_decay,
        grad_clip=None,
        seed=derive_seed(seed, "train", method),
        device="auto",
        log_every=per_epoch,
        progress=ctx.progress,
        desc=f"preferdiff {method} s{seed}",
    )
    result = fit(model, _loss(p, method), batches, cfg, callback=callback)
    final = _evaluate(p, model, data["test"], seed)
    model.load_state_dict(best["state"])
    test = _evaluate(p, model, data["test"], seed)
    return {
        "model": model,
        "curve": curve,
        "row": {
            "method": method,
            "seed": seed,
            "best_epoch": best["epoch"],
            "steps": result.steps_done,
            "seconds": result.seconds,
            **test,
            **{f"final_{k}": v for k, v in final.items()},
        },
    }


@stage(
    params=("seeds", "model", "train", "preferdiff", "data.eval_targets"),
    deps=(SEQUENCES, DATA_METRICS),
    outs=(MODELS,),
    fan_out="train.methods",
    gpu=True,
    models={"recommender": MODELS},
)
def train(ctx: StageContext) -> None:
    """Every seed of this item's objective: weights at the best validation epoch, the curves, test metrics."""
    method, out = ctx.item, ctx.item_dir(MODELS)
    n_items, data = _examples(ctx)
    rows, curves = [], []
    for seed in ctx.params.seeds:
        run = _fit(ctx, method, seed, n_items, data)
        save_model(run["model"], out / f"s{seed}.safetensors", metadata={"method": method})
        rows.append(run["row"])
        curves += run["curve"]
    save_json(
        {"method": method, "rows": rows, "curves": curves, "examples": {s: len(data[s][1]) for s in SPLITS}},
        out / "results.json",
    )


# --------------------------------------------------------------------------------------------------
# evaluation: the results and convergence tables, the curves (the paper's convergence figure)
# --------------------------------------------------------------------------------------------------
def popularity_metrics(ctx: StageContext) -> dict[str, float]:
    """The trivial reference every objective must beat: every item ranked by its count in the training users'
    sequences, the same list for every case; Recall / NDCG @5, @10 on the validation and test cases."""
    splits, n_items = read_sequence_folder(ctx.path(SEQUENCES)), load_json(ctx.path(DATA_METRICS))["n_items"]
    counts = torch.as_tensor(
        np.bincount([i for seq in splits["train"] for i in seq], minlength=n_items + 1), dtype=torch.float64
    )
    counts[0] = -torch.inf  # the padding id is never recommended
    out = {}
    for split in ("valid", "test"):
        _, target = examples(splits[split], 1, ctx.params.data.eval_targets)
        metrics = ranking_metrics(counts.expand(len(target), -1), torch.from_numpy(target), ks=(5, 10))
        out |= {
            f"popularity/{'' if split == 'test' else 'valid_'}{k.replace('@', '_at_')}": v for k, v in metrics.items()
        }
    return out


@stage(
    params=("seeds", "train.methods", "data.eval_targets"),
    deps=(MODELS, SEQUENCES, DATA_METRICS),
    outs=(RESULTS, CURVES),
    metrics=(EVAL_METRICS,),
    plots=(Plot(CURVE_PNG), Plot(CURVE_CSV, x="epoch", y="recall@5", title="validation Recall@5 per epoch")),
)
def evaluate(ctx: StageContext) -> None:
    """Collect every run's test metrics and validation curve; mean test metrics per objective; the popularity
    ranker's metrics (the learning gates' reference)."""
    rows, curves, sizes = [], [], {}
    for method in ctx.params.train.methods:
        res = load_json(ctx.path(f"{MODELS}{method}/results.json"))
        rows += res["rows"]
        curves += res["curves"]
        sizes = res["examples"]
    save_table(rows, ctx.path(RESULTS))
    save_table(curves, ctx.path(CURVES))
    summary = {
        f"{m}/{k.replace('@', '_at_')}": float(np.mean([r[k] for r in rows if r["method"] == m]))
        for m in ctx.params.train.methods
        for k in METRICS
    }
    save_json(
        {"runs": len(rows), **{f"{s}_examples": n for s, n in sizes.items()}, **summary, **popularity_metrics(ctx)},
        ctx.path(EVAL_METRICS),
    )
    plot_convergence(curves, ctx.path(CURVE_PNG), ctx.path(CURVE_CSV))


PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=PreferdiffParams,
    stages=(prepare, train, evaluate),
    report="pipelines.preferdiff.report:report",
)
