"""Activity cliffs as node classification: learning with activity cliff (LAC), on MoleculeACE (ICLR 2025).

Reproduces at CPU scale MoleculeACE's per-target table (RMSE on the test set, RMSE_cliff on its cliff
molecules) for two base encoders trained three ways, beside MoleculeACE's published numbers:

1. ``featurize`` (MoleculeACE data): each target's CSV (the 30 ship inside the ``moleculeace`` wheel, or a
   user file in the same columns, ``data.csv_path``); RDKit ECFP4 bits; the three MoleculeACE similarities
   on all molecules, from which the cliff flags are recomputed (checked against the CSV's ``cliff_mol``) and
   the **training-only** similarity graph is cut (edges: similar training pairs; cliff edges: potency fold
   > 10). The test molecules never enter the graph, so no test label leaks into training.
2. ``svm``: the anchor, ECFP + sklearn ``SVR`` with MoleculeACE's tuned settings per target, against its
   published row.
3. ``train`` (one item per encoder, ECFP-MLP or GIN): per target, objective and seed, one network trained
   through the shared loop with plain MSE, with the LAC recast (MSE + node task on ordinal potency bins +
   edge task on the training graph's cliff edges; the brief's reconstruction, the paper's code was not
   found), or with clsar's activity-cliff triplet loss.
4. ``evaluate``: RMSE and RMSE_cliff (MoleculeACE's definitions), and the underfitting diagnostic: the mean
   training loss of cliff molecules over that of the other molecules, per model.
5. ``report``: the table, the published numbers beside ours, the claims per encoder over targets x seeds.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from components.io import load_table, load_tensors, save_json, save_model, save_table, save_tensors
from components.molecules.cliffs import (
    SIMILARITY_KINDS,
    SimilarityGraph,
    cliff_molecules,
    cliff_pairs,
    similar_pairs,
    similarity_graph,
    similarity_matrices,
)
from components.molecules.encoders import CliffNet, CliffNetConfig
from components.molecules.featurize import ecfp_bits, parse_smiles
from components.molecules.graphs import graph_batch, molecule_graphs
from components.molecules.lac import (
    USES_EDGES,
    AcaConfig,
    CliffBatches,
    LacConfig,
    bin_labels,
    make_objective,
    predict,
    quantile_bin_edges,
)
from components.molecules.metrics import loss_ratio, rmse, rmse_cliff
from components.molecules.moleculeace import (
    MoleculeAceFormatError,
    MoleculeSet,
    benchmark_csv,
    read_moleculeace_csv,
    tuned_hyperparameters,
)
from components.training import TrainConfig, fit
from paperflows import Pipeline, Plot, StageContext, StageInputError, derive_seed, stage
from pipelines.activity_cliff import ABOUT
from pipelines.activity_cliff.params import ActivityCliffParams
from pipelines.activity_cliff.plots import plot_bars, plot_loss_ratio, plot_parity

MOLECULES, ECFP = "data/molecules.parquet", "data/ecfp.safetensors"
GRAPH = "data/similarity_graph.parquet"  # the training-only graph's edges, cliff edges flagged
DATA_METRICS = "metrics/data.json"
SVM, SVM_METRICS = "tables/svm.parquet", "metrics/svm.json"
TRAINED = "trained/"  # <encoder>/predictions.parquet, <encoder>/<dataset>/*.safetensors
SCORES, EVAL_METRICS = "tables/scores.parquet", "metrics/evaluate.json"
BARS_PNG, BARS_CSV = "plots/rmse_cliff_by_target.png", "plots/rmse_cliff_by_target.csv"
RATIO_PNG, RATIO_CSV = "plots/training_loss_ratio.png", "plots/training_loss_ratio.csv"
PARITY_PNG = "plots/parity.png"
REPORT = "report.json"
LOG = logging.getLogger("paperflows.activity_cliff")


def _read_dataset(ctx: StageContext, name: str) -> MoleculeSet:
    path = ctx.data_path(ctx.params.data.csv_path) if ctx.params.data.csv_path else benchmark_csv(name)
    try:
        return read_moleculeace_csv(path, name)
    except (MoleculeAceFormatError, FileNotFoundError) as err:
        raise StageInputError(f"activity_cliff.data: {err}") from None


def _rows(table: list[dict], dataset: str) -> list[dict]:
    return sorted((r for r in table if r["dataset"] == dataset), key=lambda r: r["row"])


# --------------------------------------------------------------------------------------------------
# 1. MoleculeACE data, ECFP4, the cliff flags recomputed, the training-only similarity graph
# --------------------------------------------------------------------------------------------------
def _molecule_rows(ds: MoleculeSet, recomputed: np.ndarray, graph: SimilarityGraph) -> list[dict]:
    """One row per molecule; ``train_index`` is its node in the training graph (-1 for a test molecule)."""
    node = {int(r): i for i, r in enumerate(ds.train)}
    degree, cliff_degree = graph.degree(), graph.degree(cliff_only=True)
    return [
        {
            "dataset": ds.name,
            "row": i,
            "smiles": s,
            "y": float(ds.y[i]),
            "potency_nm": float(ds.potency_nm[i]),
            "cliff_mol": int(ds.cliff_mol[i]),
            "cliff_recomputed": int(recomputed[i]),
            "split": str(ds.split[i]),
            "train_index": node.get(i, -1),
            "degree": int(degree[node[i]]) if i in node else -1,
            "cliff_degree": int(cliff_degree[node[i]]) if i in node else -1,
        }
        for i, s in enumerate(ds.smiles)
    ]


def _edge_rows(ds: MoleculeSet, graph: SimilarityGraph) -> list[dict]:
    """One row per training-graph edge: its nodes, their file rows, |dy|, the cliff flag and which similarity."""
    train = ds.train
    return [
        {
            "dataset": ds.name,
            "src": int(a),
            "dst": int(b),
            "row_src": int(train[a]),
            "row_dst": int(train[b]),
            "cliff": bool(c),
            "delta_y": float(abs(ds.y[train[a]] - ds.y[train[b]])),
            **{f"similar_{k}": bool(flags[e]) for k, flags in graph.kinds.items()},
        }
        for e, (a, b, c) in enumerate(zip(graph.src, graph.dst, graph.cliff))
    ]


@stage(params=("data", "features", "graph"), outs=(MOLECULES, ECFP, GRAPH), metrics=(DATA_METRICS,))
def featurize(ctx: StageContext) -> None:
    """Read each dataset, ECFP4 bits, cliff flags recomputed (all molecules), training-only graph."""
    p, f, g = ctx.params, ctx.params.features, ctx.params.graph
    molecules, edges, bits, summary = [], [], {}, {}
    for name in p.datasets():
        ds = _read_dataset(ctx, name)
        mols = parse_smiles(ds.smiles)
        bits[name] = torch.as_tensor(ecfp_bits(mols, f.radius, f.n_bits))
        sims = similarity_matrices(ds.smiles, mols, SIMILARITY_KINDS, f.radius, f.n_bits)
        recomputed = cliff_molecules(cliff_pairs(similar_pairs(sims), ds.potency_nm))  # MoleculeACE's definition
        train = ds.train
        kinds = SIMILARITY_KINDS if g.similarity == "moleculeace" else ("ecfp",)
        graph = similarity_graph(
            {k: sims[k][np.ix_(train, train)] for k in kinds}, ds.potency_nm[train], g.threshold, g.fold
        )
        molecules += _molecule_rows(ds, recomputed, graph)
        edges += _edge_rows(ds, graph)
        summary[name] = {
            "molecules": len(ds),
            "train": len(train),
            "test": len(ds.test),
            "train_y_sd": float(ds.y[train].std()),
            # the trivial reference of the learning gates: the training mean predicted for every test
            # molecule (a model whose test RMSE is not below it has not learned the target)
            "train_mean_test_rmse": rmse(ds.y[ds.test], np.full(len(ds.test), ds.y[train].mean())),
            "cliff_mols": int(ds.cliff_mol.sum()),
            "test_cliff_mols": int(ds.cliff_mol[ds.test].sum()),
            "cliff_flag_agreement": float(np.mean(recomputed == ds.cliff_mol)),
            "cliff_flag_mismatches": int(np.sum(recomputed != ds.cliff_mol)),
            "graph_edges": graph.n_edges,
            "graph_cliff_edges": int(graph.cliff.sum()),
            "train_with_edge": int((graph.degree() > 0).sum()),
            "train_with_cliff_edge": int((graph.degree(cliff_only=True) > 0).sum()),
        }
    save_table(molecules, ctx.path(MOLECULES))
    save_table(edges, ctx.path(GRAPH))
    save_tensors(bits, ctx.path(ECFP))
    save_json(summary, ctx.path(DATA_METRICS))


# --------------------------------------------------------------------------------------------------
# 2. the anchor: ECFP + SVM (sklearn SVR, MoleculeACE's tuned settings) against MoleculeACE's row
# --------------------------------------------------------------------------------------------------
@stage(params=("data", "svm"), deps=(MOLECULES, ECFP), outs=(SVM,), metrics=(SVM_METRICS,))
def svm(ctx: StageContext) -> None:
    """ECFP + SVR per dataset: RMSE and RMSE_cliff, and its predictions for the parity plot."""
    from sklearn.svm import SVR

    s, table, bits = ctx.params.svm, load_table(ctx.path(MOLECULES)), load_tensors(ctx.path(ECFP))
    rows, out = [], {}
    for name in dict.fromkeys(r["dataset"] for r in table):
        mine = _rows(table, name)
        x, y = bits[name].double().numpy(), np.array([r["y"] for r in mine])
        train, test = (np.array([r["split"] == part for r in mine]) for part in ("train", "test"))
        tuned = s.hyperparameters == "tuned" and not ctx.params.data.csv_path
        config = (
            tuned_hyperparameters(name)
            if tuned
            else {"C": s.C, "gamma": s.gamma, "epsilon": s.epsilon, "kernel": "rbf"}
        )
        pred = SVR(**config).fit(x[train], y[train]).predict(x[test])
        flags = np.array([r["cliff_mol"] for r in mine])[test]
        out[name] = {
            "rmse": rmse(y[test], pred),
            "rmse_cliff": rmse_cliff(pred, y[test], flags),
            "config": {k: config[k] for k in sorted(config)},
            "tuned": tuned,
        }
        rows += [
            {"dataset": name, "row": r["row"], "y": r["y"], "pred": float(v), "cliff_mol": r["cliff_mol"]}
            for r, v in zip([r for r, t in zip(mine, test) if t], pred)
        ]
    save_table(rows, ctx.path(SVM))
    save_json(out, ctx.path(SVM_METRICS))


# --------------------------------------------------------------------------------------------------
# 3. training, one item per encoder: every dataset x objective x seed through the shared loop
# --------------------------------------------------------------------------------------------------
def _inputs(encoder: str, mine: list[dict], bits: torch.Tensor):
    """``inputs(index)`` of the encoder over these molecules (ECFP rows, or a from_smiles graph batch)."""
    if encoder == "ecfp_mlp":
        x = bits.float()
        return lambda index: {"bits": x[index]}
    graphs = molecule_graphs([r["smiles"] for r in mine])
    return lambda index: graph_batch(graphs, index)


@stage(
    params=("seeds", "model", "train", "lac", "aca"),
    deps=(MOLECULES, ECFP, GRAPH),
    outs=(TRAINED,),
    fan_out="model.encoders",
    gpu=True,
    models={"cliffnet": TRAINED},
)
def train(ctx: StageContext) -> None:
    """Train this item's encoder with every objective, per dataset and seed; weights and predictions."""
    p, t, encoder = ctx.params, ctx.params.train, ctx.item
    table, edges, bits = load_table(ctx.path(MOLECULES)), load_table(ctx.path(GRAPH)), load_tensors(ctx.path(ECFP))
    out, predictions, history = ctx.item_dir(TRAINED), [], {}
    lac = LacConfig(p.lac.lambda_node, p.lac.lambda_edge, p.lac.margin)
    aca = AcaConfig(p.aca.alpha, p.aca.cliff_lower, p.aca.cliff_upper, p.aca.squared)
    steps = t.mlp_steps if encoder == "ecfp_mlp" else t.gin_steps
    for name in dict.fromkeys(r["dataset"] for r in table):
        mine = _rows(table, name)
        train_idx = np.array([r["row"] for r in mine if r["split"] == "train"])
        inputs, to_row = _inputs(encoder, mine, bits[name]), torch.as_tensor(train_idx)
        y = np.array([r["y"] for r in mine])
        bins = bin_labels(y[train_idx], quantile_bin_edges(y[train_idx], p.lac.n_bins))
        graph = [e for e in edges if e["dataset"] == name]
        src, dst = (np.array([e[k] for e in graph], dtype=np.int64) for k in ("src", "dst"))
        cliff = np.array([e["cliff"] for e in graph], dtype=bool)
        cfg = CliffNetConfig(
            encoder=encoder,
            n_bits=int(bits[name].shape[1]),
            hidden=p.model.hidden,
            embed=p.model.embed,
            gin_dim=p.model.gin_dim,
            gin_layers=p.model.gin_layers,
            n_bins=p.lac.n_bins,
            edge_hidden=p.model.edge_hidden,
            y_mean=float(y[train_idx].mean()),
            y_std=float(y[train_idx].std()) or 1.0,
        )
        for objective in t.objectives:
            for seed in p.seeds:
                batches = CliffBatches(
                    lambda index: inputs(to_row[index]),
                    y[train_idx],
                    bins,
                    src,
                    dst,
                    cliff,
                    t.batch_size,
                    t.edge_batch if objective in USES_EDGES else 0,
                    edge_seed=derive_seed(seed, "edges", name),
                )
                net = CliffNet(cfg, seed=derive_seed(seed, "init", name))
                run = f"{name}/{objective}/seed{seed}"
                result = fit(
                    net,
                    make_objective(objective, lac, aca),
                    batches,
                    TrainConfig(
                        steps=steps,
                        lr=t.lr,
                        weight_decay=t.weight_decay,
                        seed=derive_seed(seed, "batches", name),
                        log_every=max(1, steps // 20),
                        progress=ctx.progress,
                        desc=f"activity_cliff {encoder} {run}",
                    ),
                    callback=ctx.metric_callback(f"train/{encoder}/{run}"),
                )
                save_model(
                    net,
                    out / name / f"{objective}_seed{seed}.safetensors",
                    metadata={"dataset": name, "objective": objective, "seed": str(seed)},
                )
                pred = predict(net, inputs, len(mine))
                predictions += [
                    {
                        "dataset": name,
                        "objective": objective,
                        "seed": seed,
                        "row": r["row"],
                        "split": r["split"],
                        "y": r["y"],
                        "pred": float(v),
                        "cliff_mol": r["cliff_mol"],
                    }
                    for r, v in zip(mine, pred)
                ]
                history[run] = {"final_loss": result.final_loss}
                ctx.log_metrics({f"seconds/{encoder}/{run}": result.seconds})  # MLflow only: not a DVC metric
    save_table(predictions, out / "predictions.parquet")
    save_json({"encoder": encoder, "steps": steps, "runs": history}, out / "train.json")


def _mean_or_none(values: np.ndarray) -> float | None:
    return float(values.mean()) if values.size else None


# --------------------------------------------------------------------------------------------------
# 4. evaluation: RMSE, RMSE_cliff (MoleculeACE) and the training-loss ratio cliff / non-cliff
# --------------------------------------------------------------------------------------------------
@stage(
    params=("model.encoders",),
    deps=(TRAINED, MOLECULES, SVM),
    outs=(SCORES,),
    metrics=(EVAL_METRICS,),
    plots=(
        Plot(BARS_PNG),
        Plot(RATIO_PNG),
        Plot(PARITY_PNG),
        Plot(BARS_CSV, x="model", y="rmse_cliff", title="RMSE_cliff per target (mean over seeds)"),
        Plot(RATIO_CSV, x="model", y="ratio", title="training loss cliff / non-cliff (plain MSE)"),
    ),
)
def evaluate(ctx: StageContext) -> None:
    """Per (dataset, encoder, objective, seed): RMSE, RMSE_cliff on test; training-loss ratio; plots."""
    scores, per_molecule = [], []
    preds = {e: load_table(ctx.path(TRAINED) / e / "predictions.parquet") for e in ctx.params.model.encoders}
    for encoder, rows in preds.items():
        runs: dict[tuple, list[dict]] = {}
        for r in rows:
            runs.setdefault((r["dataset"], r["objective"], r["seed"]), []).append(r)
        for (name, objective, seed), mine in runs.items():
            parts = {s: [r for r in mine if r["split"] == s] for s in ("train", "test")}
            y, pred, flag = ({s: np.array([r[k] for r in parts[s]]) for s in parts} for k in ("y", "pred", "cliff_mol"))
            err = (pred["train"] - y["train"]) ** 2
            scores.append(
                {
                    "dataset": name,
                    "encoder": encoder,
                    "objective": objective,
                    "seed": seed,
                    "rmse": rmse(y["test"], pred["test"]),
                    "rmse_cliff": rmse_cliff(pred["test"], y["test"], flag["test"]),
                    "rmse_noncliff": rmse_cliff(pred["test"], y["test"], 1 - flag["test"]),
                    "train_rmse": rmse(y["train"], pred["train"]),
                    "train_loss_cliff": _mean_or_none(err[flag["train"] == 1]),
                    "train_loss_noncliff": _mean_or_none(err[flag["train"] == 0]),
                    "train_loss_ratio": loss_ratio(err, flag["train"]),
                }
            )
            if objective == "mse":
                per_molecule += [
                    {"encoder": encoder, "cliff_mol": int(c), "loss": float(e)} for c, e in zip(flag["train"], err)
                ]
    save_table(scores, ctx.path(SCORES))
    save_json({"models": len(scores)}, ctx.path(EVAL_METRICS))
    svm_rows = load_table(ctx.path(SVM))
    plot_bars(scores, svm_rows, ctx.path(BARS_PNG), ctx.path(BARS_CSV))
    plot_loss_ratio(scores, per_molecule, ctx.path(RATIO_PNG), ctx.path(RATIO_CSV))
    plot_parity(preds, svm_rows, ctx.path(PARITY_PNG))


PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=ActivityCliffParams,
    stages=(featurize, svm, train, evaluate),
    report="pipelines.activity_cliff.report:report",
)
