"""activity_cliff's wiring of the data to the one training loop: the tables featurize writes, one model trained
per (dataset, encoder, objective, seed), and the choice of LAC's task weights on a validation split carved from
the training molecules (one paper's helpers, kept out of ``pipeline.py`` so that it reads like the method).

The weight choice (the brief: "tau, K and the lambdas must be tuned on a validation split carved from train"):
``lac.validation_fraction`` of a dataset's training molecules are held out (seeded by the dataset's name); for
every weight ``w`` of ``lac.weight_grid`` one LAC model (first seed) is trained on the rest, with the node and
edge tasks at ``w * lambda_node`` and ``w * lambda_edge``, its similarity graph cut to the remaining molecules and
its potency bins drawn from their labels; the weight with the lowest validation RMSE_cliff (RMSE on the held-out
cliff molecules; all held-out molecules when none is a cliff molecule) is kept for the LAC models of that dataset
and encoder. The test molecules take no part in it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from components.io import save_model
from components.molecules.cliffs import SimilarityGraph
from components.molecules.encoders import CliffNet, CliffNetConfig
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
from components.molecules.metrics import rmse, rmse_cliff
from components.molecules.moleculeace import MoleculeSet
from components.training import TrainConfig, fit
from paperflows import StageContext, derive_seed


def molecule_rows(ds: MoleculeSet, recomputed: np.ndarray, graph: SimilarityGraph) -> list[dict]:
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


def edge_rows(ds: MoleculeSet, graph: SimilarityGraph) -> list[dict]:
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


def encoder_inputs(encoder: str, mine: list[dict], bits: torch.Tensor) -> Callable[[torch.Tensor], dict]:
    """``inputs(index)`` of the encoder over these molecules (ECFP rows, or a from_smiles graph batch)."""
    if encoder == "ecfp_mlp":
        x = bits.float()
        return lambda index: {"bits": x[index]}
    graphs = molecule_graphs([r["smiles"] for r in mine])
    return lambda index: graph_batch(graphs, index)


@dataclass(frozen=True)
class Split:
    """Training molecules of one model (file rows) and their part of the training graph (node indices into
    ``rows``)."""

    rows: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    cliff: np.ndarray


def full_split(mine: Sequence[dict], graph: Sequence[dict]) -> Split:
    rows = np.array([r["row"] for r in mine if r["split"] == "train"])
    src, dst = (np.array([e[k] for e in graph], dtype=np.int64) for k in ("src", "dst"))
    return Split(rows, src, dst, np.array([e["cliff"] for e in graph], dtype=bool))


def validation_split(whole: Split, fraction: float, seed: int) -> tuple[Split, np.ndarray]:
    """``whole`` with ``fraction`` of its molecules held out: the rest (the graph cut to them, renumbered) and the
    held-out file rows."""
    order = np.random.default_rng(seed).permutation(len(whole.rows))
    held = np.sort(order[: max(1, round(fraction * len(whole.rows)))])
    keep = np.setdiff1d(np.arange(len(whole.rows)), held)
    new = np.full(len(whole.rows), -1)
    new[keep] = np.arange(len(keep))
    both = (new[whole.src] >= 0) & (new[whole.dst] >= 0)
    return Split(whole.rows[keep], new[whole.src[both]], new[whole.dst[both]], whole.cliff[both]), whole.rows[held]


def train_model(
    ctx: StageContext,
    cfg: CliffNetConfig,
    objective: str,
    lac: LacConfig,
    aca: AcaConfig,
    split: Split,
    inputs: Callable[[torch.Tensor], dict],
    y: np.ndarray,
    seed: int,
    name: str,
    run: str,
) -> tuple[CliffNet, float]:
    """One network trained through the shared loop on ``split``'s molecules with ``objective``; its final loss."""
    p, t = ctx.params, ctx.params.train
    steps = t.mlp_steps if cfg.encoder == "ecfp_mlp" else t.gin_steps
    to_row = torch.as_tensor(split.rows)
    bins = bin_labels(y[split.rows], quantile_bin_edges(y[split.rows], p.lac.n_bins))
    batches = CliffBatches(
        lambda index: inputs(to_row[index]),
        y[split.rows],
        bins,
        split.src,
        split.dst,
        split.cliff,
        t.batch_size,
        t.edge_batch if objective in USES_EDGES else 0,
        edge_seed=derive_seed(seed, "edges", name),
    )
    net = CliffNet(cfg, seed=derive_seed(seed, "init", name))
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
            desc=f"activity_cliff {cfg.encoder} {run}",
        ),
        callback=ctx.metric_callback(f"train/{cfg.encoder}/{run}"),
    )
    return net, result.final_loss


def lac_config(p: Any, weight: float) -> LacConfig:
    return LacConfig(weight * p.lac.lambda_node, weight * p.lac.lambda_edge, p.lac.margin)


def choose_lac_weight(
    ctx: StageContext,
    cfg: CliffNetConfig,
    whole: Split,
    mine: Sequence[dict],
    inputs: Callable[[torch.Tensor], dict],
    y: np.ndarray,
    name: str,
) -> tuple[float, list[dict]]:
    """The weight of ``lac.weight_grid`` with the lowest validation RMSE_cliff (module docstring), and one row
    per weight tried."""
    p = ctx.params
    grid = list(p.lac.weight_grid)
    if len(grid) == 1:
        return grid[0], []
    seed = p.seeds[0]
    inner, held = validation_split(whole, p.lac.validation_fraction, derive_seed(seed, "validation", name))
    stats = {"y_mean": float(y[inner.rows].mean()), "y_std": float(y[inner.rows].std()) or 1.0}
    inner_cfg = replace(cfg, **stats)
    flags = np.array([r["cliff_mol"] for r in mine])[held]
    rows = []
    aca = AcaConfig()
    for weight in grid:
        net, _ = train_model(
            ctx, inner_cfg, "lac", lac_config(p, weight), aca, inner, inputs, y, seed, name, f"{name}/tune/w{weight:g}"
        )
        pred = predict(net, inputs, len(mine))[held]
        scored = rmse_cliff(pred, y[held], flags) if flags.any() else rmse(y[held], pred)
        rows.append(
            {
                "dataset": name,
                "encoder": cfg.encoder,
                "weight": float(weight),
                "validation_molecules": len(held),
                "validation_cliff_molecules": int(flags.sum()),
                "validation_rmse_cliff": float(scored),
                "validation_rmse": rmse(y[held], pred),
            }
        )
    best = min(rows, key=lambda r: (r["validation_rmse_cliff"], r["weight"]))
    for r in rows:
        r["chosen"] = r is best
    return best["weight"], rows


def save_net(net: CliffNet, folder: Path, name: str, objective: str, seed: int) -> None:
    save_model(
        net,
        folder / name / f"{objective}_seed{seed}.safetensors",
        metadata={"dataset": name, "objective": objective, "seed": str(seed)},
    )


def prediction_rows(mine: Sequence[dict], pred: np.ndarray, name: str, objective: str, seed: int) -> list[dict]:
    return [
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
