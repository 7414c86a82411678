"""preferdiff's wiring of the models to the one training loop (one paper's helpers, kept out of ``pipeline.py``
so that it reads like the method): the model of each objective, its loss, the full-ranking evaluation, one
(objective, seed) run with validation after every epoch, and the up-front estimate of a run's length."""

from __future__ import annotations

import copy
import logging
import math
import time
from typing import Any

import torch

from components.metrics.ranking import ranking_metrics
from components.preference import ObjectiveConfig, PreferenceBatch, objective_loss
from components.recsys import DiffRecConfig, DiffusionRecommender, SASRecConfig, SASRecNextItem, error_scores
from components.training import TrainConfig, fit
from paperflows import StageContext, derive_seed
from pipelines.preferdiff.params import PreferdiffParams

EVAL_BATCH = 1024
LOG = logging.getLogger("paperflows.preferdiff")


def build_model(
    p: PreferdiffParams, method: str, n_items: int, seed: int, table: torch.Tensor | None = None
) -> torch.nn.Module:
    """The model of ``method``: SASRec-CE (its own learned table), or a diffusion recommender over the frozen
    text table ``table`` (``model.item_embeddings="text"``) or a learnable N(0,1) one."""
    m = p.model
    frozen = method != "sasrec" and table is not None
    enc = SASRecConfig(
        n_items,
        m.hidden,
        m.max_len,
        m.n_layers,
        m.n_heads,
        m.dropout,
        item_init_std=0.02 if method == "sasrec" else 1.0,
        freeze_items=frozen,
    )
    if method == "sasrec":
        return SASRecNextItem(enc, seed=derive_seed(seed, "init"))
    return DiffusionRecommender(
        DiffRecConfig(enc, m.timesteps, p_uncond=m.p_uncond),
        seed=derive_seed(seed, "init"),
        item_table=table if frozen else None,
    )


def loss_of(p: PreferdiffParams, method: str):
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


def evaluate_model(
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


def steps_per_epoch(p: PreferdiffParams, n_examples: int) -> int:
    return max(1, n_examples // min(p.train.batch_size, n_examples))


def announce_length(
    ctx: StageContext, method: str, n_items: int, data: dict[str, Any], table: torch.Tensor | None
) -> None:
    """Log, before training this objective, how long its seeds will take on this machine: a few timed steps and
    one timed validation pass, extrapolated to every epoch and seed, and how to shorten the run."""
    with torch.random.fork_rng():  # the probe leaves the global generator as it found it
        _announce(ctx, method, n_items, data, table)


def _announce(ctx: StageContext, method: str, n_items: int, data: dict[str, Any], table: torch.Tensor | None) -> None:
    p = ctx.params
    x, y = data["train"]
    model = build_model(p, method, n_items, p.seeds[0], table)
    loss_fn = loss_of(p, method)
    optimiser = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=p.train.lr)
    batch = min(p.train.batch_size, len(y))
    start = time.perf_counter()
    for k in range(3):
        out = loss_fn(model, (x[k * batch : (k + 1) * batch], y[k * batch : (k + 1) * batch]))
        loss = out[0] if isinstance(out, tuple) else out
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    step_s = (time.perf_counter() - start) / 3
    probe = min(len(data["valid"][1]), EVAL_BATCH)
    start = time.perf_counter()
    evaluate_model(p, model, (data["valid"][0][:probe], data["valid"][1][:probe]), p.seeds[0])
    valid_s = (time.perf_counter() - start) * len(data["valid"][1]) / probe
    per_epoch = steps_per_epoch(p, len(y))
    total = len(p.seeds) * p.train.epochs * (per_epoch * step_s + valid_s)
    LOG.info(
        "preferdiff %s: %d seed(s) x %d epoch(s) x %d steps, about %.1f min on this machine (%.0f ms a step, "
        "%.1f s a validation pass); shorten with --set train.epochs=<fewer>, seeds=[0] or train.methods=[...]",
        method,
        len(p.seeds),
        p.train.epochs,
        per_epoch,
        total / 60,
        1e3 * step_s,
        valid_s,
    )


def fit_one(
    ctx: StageContext, method: str, seed: int, n_items: int, data: dict[str, Any], table: torch.Tensor | None
) -> dict[str, Any]:
    """Train one (objective, seed); validation after every epoch; test at the best validation epoch."""
    p = ctx.params
    model = build_model(p, method, n_items, seed, table)
    x, y = data["train"]
    batch = min(p.train.batch_size, len(y))
    per_epoch = steps_per_epoch(p, len(y))
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
        val = evaluate_model(p, model, data["valid"], seed)
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
    result = fit(model, loss_of(p, method), batches, cfg, callback=callback)
    final = evaluate_model(p, model, data["test"], seed)
    model.load_state_dict(best["state"])
    test = evaluate_model(p, model, data["test"], seed)
    return {
        "model": model,
        "curve": curve,
        "row": {
            "method": method,
            "seed": seed,
            "best_epoch": best["epoch"],
            "steps": result.steps_done,
            **test,
            **{f"final_{k}": v for k, v in final.items()},
        },
    }
