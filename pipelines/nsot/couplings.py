"""NSOT's couplings (§3.3, §3.4) and what the pipeline measures of them: the paper's wiring, one paper's use.

* :func:`draw_pairs`: a training batch ``(x0, x1)`` under one coupling (independent, online per-sample OT,
  the stored superset OT subsampled, or its hybrid blend);
* :func:`velocity_model`: the velocity network with a seed's initial weights (shared by every coupling);
* :func:`pair_costs`: the mean pair cost of every coupling per category and seed (no training);
* :func:`step_timings`: wall-clock training step time against N, couplings interleaved within a round;
* :func:`score_clouds`: 1-NNA / COV / MMD rows of one model's samples at every Euler step count.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from components.data.shapes import sample_shapes
from components.generative import couple, pair_loss, sample, sample_time
from components.metrics.pointcloud import point_cloud_metrics
from components.models.point_transformer import PointTransformer, PointTransformerConfig
from components.ot import hybrid_coupling, pair_cost, precompute_superset_ot, subsample_pairs
from components.training import random_batches
from paperflows.seeds import derive_seed
from pipelines.nsot.params import TIMED, NsotParams, beta_of


def draw_pairs(
    method: str, x0_sup: torch.Tensor, x1_sup: torch.Tensor, n_points: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Training pairs ``(x0 [B,N,3], x1 [B,N,3])`` of the chosen shapes' supersets ``[B,M,3]`` under ``method``."""
    if method.startswith("nsot"):  # the stored OT pairs at one random index subset, then the hybrid blend
        x0, x1 = subsample_pairs(x0_sup, x1_sup, torch.arange(x1_sup.shape[0]), n_points, gen)
        return hybrid_coupling(x0, beta_of(method), gen), x1
    # independent / online OT: a random N-subset of the shape, fresh Gaussian noise
    keys = torch.rand(x1_sup.shape[0], x1_sup.shape[1], generator=gen).argsort(1)[:, :n_points]
    x1 = x1_sup.gather(1, keys[..., None].expand(-1, -1, 3))
    x0 = torch.randn(x1.shape, generator=gen)
    return couple("pointwise_ot" if method == "online_ot" else "independent", x0, x1, gen)


def velocity_model(params: NsotParams, seed: int) -> PointTransformer:
    """The velocity network with the initial weights of ``seed`` (shared by every coupling of the seed)."""
    torch.manual_seed(derive_seed(seed, "init"))
    m = params.model
    return PointTransformer(PointTransformerConfig(d_model=m.d_model, n_layers=m.n_layers, n_heads=m.n_heads))


def pair_costs(params: NsotParams, pairs: dict[str, torch.Tensor]) -> list[dict[str, Any]]:
    """``{category, method, seed, pair_cost}``: the mean squared pair distance of every coupling, on the same
    shapes for every method of a (category, seed)."""
    p, rows = params, []
    for category in p.data.used_categories():
        shapes = random_batches(pairs[f"{category}/x0"], pairs[f"{category}/x1"], size=p.train.batch_size)
        for seed in p.seeds:
            for method in ("independent", "online_ot", "nsot", *[f"nsot_b{b:g}" for b in p.train.betas]):
                pick = torch.Generator().manual_seed(derive_seed(seed, "pair_cost", "shapes", category))
                gen = torch.Generator().manual_seed(derive_seed(seed, "pair_cost", "pairs", category))
                costs = [
                    pair_cost(*draw_pairs(method, *shapes(0, pick), p.data.n_points, gen)).mean().item()
                    for _ in range(p.eval.pair_batches)
                ]
                rows.append(
                    {"category": category, "method": method, "seed": seed, "pair_cost": sum(costs) / len(costs)}
                )
    return rows


def _timed_step(
    method: str,
    model: PointTransformer,
    opt: torch.optim.Optimizer,
    x0_sup: torch.Tensor,
    x1_sup: torch.Tensor,
    n: int,
    gen: torch.Generator,
) -> tuple[float, float]:
    """``(step ms, of which drawing the pairs ms)`` of one training step at N = ``n``."""
    started = time.perf_counter()
    x0, x1 = draw_pairs(method, x0_sup, x1_sup, n, gen)
    drawn = time.perf_counter()
    loss = pair_loss(model, (x0, x1, sample_time(x0.shape[0], gen)))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return 1000 * (time.perf_counter() - started), 1000 * (drawn - started)


def step_timings(params: NsotParams) -> list[dict[str, Any]]:
    """``{method, n_points, round, step_ms, coupling_ms}`` at every N of ``eval.timing_points``: in each round
    the couplings are timed one after the other, so a round shares the machine's load."""
    p = params
    model = velocity_model(p, p.seeds[0])
    opt = torch.optim.AdamW(model.parameters(), lr=p.train.lr)
    gen = torch.Generator().manual_seed(derive_seed(p.data.seed, "timing"))
    chosen = torch.arange(p.eval.timing_batch) % 4  # four shapes, repeated to the timed batch
    rows = []
    for n in p.eval.timing_points:
        few = sample_shapes("ellipsoid", 4, 2 * n, seed=derive_seed(p.data.seed, "timing_shapes", n))
        x0_sup, x1_sup, _ = precompute_superset_ot(few, seed=derive_seed(p.data.seed, "timing_noise", n))
        x0_sup, x1_sup = x0_sup[chosen], x1_sup[chosen]  # the offline OT is not part of the step time
        for method in TIMED:  # warm-up: one untimed step (first-call allocations, optimiser state)
            _timed_step(method, model, opt, x0_sup, x1_sup, n, gen)
        for rnd in range(p.eval.timing_steps):
            for method in TIMED:
                step_ms, coupling_ms = _timed_step(method, model, opt, x0_sup, x1_sup, n, gen)
                rows.append(
                    {"method": method, "n_points": n, "round": rnd, "step_ms": step_ms, "coupling_ms": coupling_ms}
                )
    return rows


def _percent(fraction: float | None) -> float | None:
    return None if fraction is None else 100 * fraction


def score_clouds(
    model: PointTransformer,
    noise: torch.Tensor,
    ref: torch.Tensor,
    d_ref_ref: dict[str, torch.Tensor],
    euler_steps: list[int],
    metric_steps: int,
) -> list[dict[str, Any]]:
    """One row per Euler step count: ``{euler_steps, nfe, 1nna_cd, cov_cd, mmd_cd, 1nna_emd, cov_emd, mmd_emd}``
    of the clouds sampled from ``noise`` against ``ref`` (EMD only at ``metric_steps``; 1-NNA and COV in %)."""
    rows = []
    for steps in euler_steps:
        with torch.no_grad():
            result = sample(model, noise, steps, "euler")
        row: dict[str, Any] = {"euler_steps": steps, "nfe": result.nfe}
        for d in ("cd", "emd"):
            scores = (
                point_cloud_metrics(result.x, ref, metric=d, d_ref_ref=d_ref_ref[d])
                if d == "cd" or steps == metric_steps
                else {}
            )
            row[f"1nna_{d}"], row[f"cov_{d}"] = _percent(scores.get(f"1nna_{d}")), _percent(scores.get(f"cov_{d}"))
            row[f"mmd_{d}"] = scores.get(f"mmd_{d}")
        rows.append(row)
    return rows
