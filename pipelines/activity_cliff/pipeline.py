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
   edge task on the training graph's cliff edges; the brief's reconstruction without message passing over
   the molecule graph, the paper's code was not found; its task weight chosen on a validation split carved
   from the training molecules), or with clsar's activity-cliff triplet loss.
4. ``evaluate``: RMSE and RMSE_cliff (MoleculeACE's definitions), and the underfitting diagnostic: the mean
   training loss of cliff molecules over that of the other molecules, per model.
5. ``report``: the table, the published numbers beside ours, the claims per encoder over targets x seeds.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from components.io import load_table, load_tensors, save_json, save_table, save_tensors
from components.molecules.cliffs import (
    SIMILARITY_KINDS,
    cliff_molecules,
    cliff_pairs,
    similar_pairs,
    similarity_graph,
    similarity_matrices,
)
from components.molecules.encoders import CliffNetConfig
from components.molecules.featurize import ecfp_bits, parse_smiles
from components.molecules.lac import AcaConfig, predict
from components.molecules.metrics import loss_ratio, rmse, rmse_cliff
from components.molecules.moleculeace import (
    MoleculeAceFormatError,
    MoleculeSet,
    benchmark_csv,
    read_moleculeace_csv,
    tuned_hyperparameters,
)
from paperflows import Pipeline, Plot, StageContext, StageInputError, stage
from pipelines.activity_cliff import ABOUT
from pipelines.activity_cliff.params import ActivityCliffParams
from pipelines.activity_cliff.plots import plot_bars, plot_loss_ratio, plot_parity
from pipelines.activity_cliff.training import (
    choose_lac_weight,
    edge_rows,
    encoder_inputs,
    full_split,
    lac_config,
    molecule_rows,
    prediction_rows,
    save_net,
    train_model,
)

MOLECULES, ECFP = "data/molecules.parquet", "data/ecfp.safetensors"
GRAPH = "data/similarity_graph.parquet"  # the training-only graph's edges, cliff edges flagged
DATA_METRICS = "metrics/data.json"
SVM, SVM_METRICS = "tables/svm.parquet", "metrics/svm.json"
TRAINED = "trained/"  # <encoder>/predictions.parquet, <encoder>/<dataset>/*.safetensors
SCORES, EVAL_METRICS = "tables/scores.parquet", "metrics/evaluate.json"
LAC_WEIGHTS = "tables/lac_weights.parquet"  # the validation search of LAC's task weight, per encoder and target
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
        molecules += molecule_rows(ds, recomputed, graph)
        edges += edge_rows(ds, graph)
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
@stage(
    params=("seeds", "model", "train", "lac", "aca"),
    deps=(MOLECULES, ECFP, GRAPH),
    outs=(TRAINED,),
    fan_out="model.encoders",
    gpu=True,
    models={"cliffnet": TRAINED},
)
def train(ctx: StageContext) -> None:
    """Train this item's encoder with every objective, per dataset and seed (LAC at the task weight chosen on a
    validation split of the training molecules); weights, predictions and the weight search."""
    p, t, encoder = ctx.params, ctx.params.train, ctx.item
    table, edges, bits = load_table(ctx.path(MOLECULES)), load_table(ctx.path(GRAPH)), load_tensors(ctx.path(ECFP))
    out, predictions, history, tuning, chosen = ctx.item_dir(TRAINED), [], {}, [], {}
    aca = AcaConfig(p.aca.alpha, p.aca.cliff_lower, p.aca.cliff_upper, p.aca.squared)
    for name in dict.fromkeys(r["dataset"] for r in table):
        mine = _rows(table, name)
        whole = full_split(mine, [e for e in edges if e["dataset"] == name])
        inputs, y = encoder_inputs(encoder, mine, bits[name]), np.array([r["y"] for r in mine])
        cfg = CliffNetConfig(
            encoder=encoder,
            n_bits=int(bits[name].shape[1]),
            hidden=p.model.hidden,
            embed=p.model.embed,
            gin_dim=p.model.gin_dim,
            gin_layers=p.model.gin_layers,
            n_bins=p.lac.n_bins,
            edge_hidden=p.model.edge_hidden,
            y_mean=float(y[whole.rows].mean()),
            y_std=float(y[whole.rows].std()) or 1.0,
        )
        weight = p.lac.weight_grid[0]
        if "lac" in t.objectives:
            weight, rows = choose_lac_weight(ctx, cfg, whole, mine, inputs, y, name)
            tuning += rows
        chosen[name] = weight
        for objective in t.objectives:
            for seed in p.seeds:
                run = f"{name}/{objective}/seed{seed}"
                net, final_loss = train_model(
                    ctx, cfg, objective, lac_config(p, weight), aca, whole, inputs, y, seed, name, run
                )
                save_net(net, out, name, objective, seed)
                predictions += prediction_rows(mine, predict(net, inputs, len(mine)), name, objective, seed)
                history[run] = {"final_loss": final_loss}
    save_table(predictions, out / "predictions.parquet")
    if tuning:
        save_table(tuning, out / "lac_weights.parquet")
    steps = t.mlp_steps if encoder == "ecfp_mlp" else t.gin_steps
    save_json({"encoder": encoder, "steps": steps, "lac_weight": chosen, "runs": history}, out / "train.json")


def _mean_or_none(values: np.ndarray) -> float | None:
    return float(values.mean()) if values.size else None


# --------------------------------------------------------------------------------------------------
# 4. evaluation: RMSE, RMSE_cliff (MoleculeACE) and the training-loss ratio cliff / non-cliff
# --------------------------------------------------------------------------------------------------
@stage(
    params=("model.encoders",),
    deps=(TRAINED, MOLECULES, SVM),
    outs=(SCORES, LAC_WEIGHTS),
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
    searched = [ctx.path(TRAINED) / e / "lac_weights.parquet" for e in ctx.params.model.encoders]
    weights = [row for path in searched if path.is_file() for row in load_table(path)]
    save_table(weights, ctx.path(LAC_WEIGHTS))  # empty when no search ran (one weight, or no LAC)
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
