"""GRF masking's wiring of the models to the one training loop: configs, the per-seed run of a variant, accuracy,
and the graphs of the scaling study (one paper's helpers, kept out of ``pipeline.py`` so that it reads like the
method section)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from components.attention import knn_edge_index, random_grid_graph
from components.attention.graphs import Graph
from components.attention.points import TopoPointConfig
from components.attention.vit import TopoViTConfig
from components.data.shapes import sample_shapes
from components.io import save_json, save_model
from components.training import TrainConfig, cross_entropy_loss, fit, random_batches
from paperflows import StageContext, derive_seed
from pipelines.grf_masking.params import GrfMaskingParams


def modulation_start(k_max: int) -> torch.Tensor:
    """``f_k = 2^-k``: the modulation every model starts from and the mask error is measured at."""
    return torch.tensor([2.0**-k for k in range(k_max + 1)])


def model_config(p: GrfMaskingParams, variant: str) -> TopoViTConfig:
    m, g = p.model, p.grf
    return TopoViTConfig(
        image_size=28,
        patch_size=m.patch_size,
        d_model=m.d_model,
        n_heads=m.n_heads,
        n_layers=m.n_layers,
        attention=variant,
        feature_map=m.feature_map,
        n_features=m.n_features,
        k_max=g.k_max,
        n_walks=g.n_walks,
        p_halt=g.p_halt,
    )


def cloud_config(p: GrfMaskingParams, variant: str) -> TopoPointConfig:
    m, g = p.model, p.grf
    return TopoPointConfig(
        d_model=m.d_model,
        n_heads=m.n_heads,
        n_layers=m.n_layers,
        n_classes=len(p.clouds.families),
        attention=variant,
        feature_map=m.feature_map,
        n_features=m.n_features,
        k_max=g.k_max,
        n_walks=g.n_walks,
        p_halt=g.p_halt,
    )


@torch.no_grad()
def accuracy(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], y: torch.Tensor, batch: int = 500) -> float:
    """Top-1 accuracy (%) of ``model(*inputs)`` against ``y``, in batches."""
    model.eval()
    hits = sum(
        int((model(*(x[i : i + batch] for x in inputs)).argmax(1) == y[i : i + batch]).sum())
        for i in range(0, len(y), batch)
    )
    return 100.0 * hits / len(y)


def train_variant(
    ctx: StageContext,
    task: str,
    build: Callable[[int], torch.nn.Module],
    steps: int,
    batch_size: int,
    train: tuple[torch.Tensor, ...],
    test: tuple[torch.Tensor, ...],
    out: Path,
) -> None:
    """This item's variant on every seed through the one loop: weights, learned modulation, train and test
    accuracy (the training accuracy tells an underfit model from one that overfits)."""
    p, variant, runs = ctx.params, ctx.item, []
    for seed in p.seeds_of("train") if task == "mnist" else p.seeds:
        model = build(derive_seed(seed, "init"))
        cfg = TrainConfig(
            steps=steps,
            lr=p.train.lr,
            weight_decay=p.train.weight_decay,
            warmup_steps=p.train.warmup_steps,
            seed=derive_seed(seed, "batches"),
            device="auto",
            log_every=max(1, steps // 10),
            progress=ctx.progress,
            desc=f"grf_masking {task} {variant} seed {seed}",
        )
        result = fit(
            model,
            cross_entropy_loss,
            random_batches(*train, size=batch_size),
            cfg,
            callback=ctx.metric_callback(f"{'train' if task == 'mnist' else task}/{variant}/seed{seed}"),
        )
        save_model(model, out / f"seed{seed}.safetensors", metadata={"variant": variant, "task": task})
        runs.append(
            {
                "task": task,
                "variant": variant,
                "seed": seed,
                "test_accuracy": accuracy(model, test[:-1], test[-1]),
                "train_accuracy": accuracy(model, train[:-1], train[-1]),
                "final_loss": result.final_loss,
                "steps": steps,
                "parameters": sum(q.numel() for q in model.parameters()),
                "modulation": [f.tolist() for f in model.masks()],
            }
        )
    save_json({"variant": variant, "task": task, "runs": runs}, out / "results.json")


def scaling_graph(kind: str, n: int, k: int, seed: int, gen: torch.Generator) -> Graph:
    """A random grid graph of about ``n`` nodes, or the kNN graph of ``n`` points on a procedural chair."""
    if kind == "grid":
        return random_grid_graph(n, 0.1, gen)
    points = sample_shapes("chair", 1, n, seed)[0]
    return Graph.from_edge_index(knn_edge_index(points, k), n)
