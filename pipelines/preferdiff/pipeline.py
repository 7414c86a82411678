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

import numpy as np
import torch

from components.data.rec_sequences import SPLITS, examples, read_sequence_folder, write_sequence_folder
from components.io import load_json, load_table, load_tensors, save_json, save_model, save_table, save_tensors
from components.llm import load_encoder
from components.metrics.ranking import ranking_metrics
from components.recsys import text_item_table
from paperflows import Pipeline, Plot, StageContext, StageInputError, stage
from pipelines.preferdiff import ABOUT
from pipelines.preferdiff.data import user_sequences
from pipelines.preferdiff.params import METRICS, PreferdiffParams
from pipelines.preferdiff.plots import plot_convergence
from pipelines.preferdiff.training import announce_length, fit_one

SEQUENCES = "data/sequences/"
ITEMS, ITEM_TABLE = "data/items.parquet", "data/item_table.safetensors"  # item texts; the frozen table
DATA_METRICS = "metrics/data.json"
MODELS = "models/"
RESULTS, CURVES = "tables/results.parquet", "tables/curves.parquet"
EVAL_METRICS = "metrics/evaluate.json"
CURVE_PNG, CURVE_CSV = "plots/convergence.png", "plots/convergence.csv"
REPORT = "report.json"


# --------------------------------------------------------------------------------------------------
# §5 data: next-item sequences in the official txt format, split by user
# --------------------------------------------------------------------------------------------------
@stage(params=("data",), outs=(SEQUENCES, ITEMS), metrics=(DATA_METRICS,))
def prepare(ctx: StageContext) -> None:
    """MovieLens ratings (or a RecBole .inter file) -> one sequence per user -> {train,valid,test}_data.txt (or the
    user's folder in that format); the item texts."""
    d = ctx.params.data
    splits, texts, source = user_sequences(d, ctx.data_path)
    empty = [s for s in SPLITS if not splits[s]]
    if empty:
        raise StageInputError(
            f"preferdiff.data: no users left in {empty} after the filters (min_item_count "
            f"{d.min_item_count}, min_user_length {d.min_user_length}); loosen them"
        )
    write_sequence_folder(splits, ctx.path(SEQUENCES))
    save_table([{"item": k, "text": texts[k]} for k in sorted(texts)], ctx.path(ITEMS))
    n_items = max(max(seq) for seqs in splits.values() for seq in seqs)
    save_json(
        {
            "source": source,
            "n_items": n_items,
            **{f"{s}_users": len(splits[s]) for s in SPLITS},
            "interactions": sum(len(seq) for seqs in splits.values() for seq in seqs),
            "mean_length": float(np.mean([len(seq) for seqs in splits.values() for seq in seqs])),
            "item_texts": len(texts),
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
# §4 the item representation: frozen, whitened text embeddings of the item titles (the official default)
# --------------------------------------------------------------------------------------------------
@stage(params=("model.item_embeddings", "model.text_encoder", "model.hidden"), deps=(ITEMS,), outs=(ITEM_TABLE,))
def embed(ctx: StageContext) -> None:
    """Encode every item's text, whiten the vectors and keep their first ``hidden`` principal directions: the
    frozen item table of the diffusion models (an empty file when the items are learned, ``--ab=iids``)."""
    m = ctx.params.model
    table = torch.zeros(0, m.hidden)
    texts = [r["text"] for r in sorted(load_table(ctx.path(ITEMS)), key=lambda r: r["item"])]
    if m.item_embeddings == "text" or (m.item_embeddings == "auto" and texts):  # 'auto': text where items have it
        table = text_item_table(texts, m.hidden, load_encoder(m.text_encoder))
    save_tensors({"items": table}, ctx.path(ITEM_TABLE))


# --------------------------------------------------------------------------------------------------
# §3-4 the models and their objectives (MSE-x0, cosine-x0, PreferDiff; SASRec-CE), one item per objective
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "model", "train", "preferdiff", "data.eval_targets"),
    deps=(SEQUENCES, DATA_METRICS, ITEM_TABLE),
    outs=(MODELS,),
    fan_out="train.methods",
    gpu=True,
    models={"recommender": MODELS},
)
def train(ctx: StageContext) -> None:
    """Every seed of this item's objective: weights at the best validation epoch, the curves, test metrics."""
    method, out = ctx.item, ctx.item_dir(MODELS)
    n_items, data = _examples(ctx)
    table = load_tensors(ctx.path(ITEM_TABLE))["items"]
    table = table if len(table) else None  # empty: learned items
    announce_length(ctx, method, n_items, data, table)
    rows, curves = [], []
    for seed in ctx.params.seeds:
        run = fit_one(ctx, method, seed, n_items, data, table)
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
    stages=(prepare, embed, train, evaluate),
    report="pipelines.preferdiff.report:report",
)
