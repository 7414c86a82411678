"""The pretrained flows of every OC-Flow experiment: the velocity MLP, its frozen reload, and one training run
per seed through the shared loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from components.io import load_tensors, save_model, save_table
from components.models.velocity_mlp import VelocityMLP, VelocityMLPConfig
from components.training import TrainConfig, fit, random_batches
from paperflows import StageContext
from paperflows.plots import plot_loss_curves


def make_model(p: Any, in_dim: int, out_dim: int | None = None) -> VelocityMLP:
    m = p.model
    return VelocityMLP(
        VelocityMLPConfig(in_dim=in_dim, out_dim=out_dim, hidden=m.hidden, depth=m.depth, time_dim=m.time_dim)
    )


def load_frozen(p: Any, path: Any, in_dim: int, out_dim: int | None = None) -> VelocityMLP:
    model = make_model(p, in_dim, out_dim)
    model.load_state_dict(load_tensors(path))
    model.eval()
    model.requires_grad_(False)  # guidance differentiates states and controls, never the weights
    return model


def pretrain(
    ctx: StageContext,
    flow: str,
    data: Tensor | tuple[Tensor, ...],
    pairs: Callable[..., Any],
    build: Callable[[], torch.nn.Module],
    loss: Callable,
    steps: int,
    models: str,
    curves: str | None,
    png: str | None,
    ylabel: str = "flow-matching loss",
    prefix: str = "",
) -> list[dict]:
    """Train one model per seed: data rows drawn at random, made into training pairs, fitted by ``fit``;
    the loss curves are returned, and written (table and figure) when ``curves`` and ``png`` are given."""
    p = ctx.params
    draw = random_batches(*(data if isinstance(data, tuple) else (data,)), size=p.train.batch_size)
    rows = []
    for seed in p.seeds:
        torch.manual_seed(seed)
        model = build()
        cfg = TrainConfig(
            steps=steps,
            lr=p.train.lr,
            seed=seed,
            log_every=max(1, steps // 50),
            progress=ctx.progress,
            desc=f"oc_flow {flow} seed {seed}",
        )
        result = fit(
            model,
            loss,
            lambda step, gen: pairs(*draw(step, gen), gen),
            cfg,
            callback=ctx.metric_callback(f"pretrain/{flow.replace(' ', '_')}/seed{seed}"),
        )
        save_model(model, ctx.path(models) / f"{prefix}seed{seed}.safetensors")
        rows += result.curve(method=flow, seed=seed)
    if curves and png:
        save_table(rows, ctx.path(curves))
        plot_loss_curves(rows, ctx.path(png), ylabel=ylabel)
    return rows
