"""BC-PMI: diverse policy recovery from offline data with PMI-weighted behavioural cloning (arXiv 2410.15910).

The paper's method on the brief's CPU reduction, a gridworld where three experts share start and goal and
differ in style only inside a bifurcation zone; reproduces the comparison of its result tables (BC-PMI
against style-conditioned BC: task success and style fidelity) at several data sizes, and its Fig. 3 (where
the PMI weights concentrate: a heat map over the grid against the style zone). Steps follow the method as
the paper summarises it (style labels, MINE, pointwise MI, weighted BC, evaluation by style):

1. **demos** (method step 1, styles given as labels): noisy expert demonstrations of every style (or a
   user's file via ``data.demos_path``); the data sizes are nested subsets of episodes per style;
2. **mine** (method steps 2-3): per seed and size, a statistics network T(s, a, z) maximises the
   Donsker-Varadhan bound with MINE's moving-average denominator; PMI(s, a; z) = T(s, a, z) -
   log sum_z' p(z') exp T(s, a, z') for every tuple, beside the exact PMI from counts (the grid is tabular);
3. **train** (method step 4): conditional BC and BC-PMI (weights exp(PMI), mean 1 per batch, clipped at
   10) through the one training loop, same policy network, same seeds;
4. **evaluate** (method step 5): rollouts of pi(. | s, z) for every style: success rate and style accuracy
   (the rollout crosses the zone's middle row in z's corridor); the weights' heat map and their mean
   inside / outside the zone;
5. **report**: the table, the claims (paired over seeds) and the checks.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from components.imitation.bc import TRAINERS, BCConfig, Demonstrations, StylePolicy, sampling_policy
from components.imitation.demos import read_demonstrations
from components.imitation.gridworld import (GridConfig, expert_demonstrations, in_zone, noisy_expert, rollout,
                                            state_features)
from components.imitation.style_pmi import MineConfig, estimate_style_pmi, exact_style_pmi
from components.io import load_json, load_table, save_json, save_model, save_table
from components.metrics.stats import pearson
from paperflows import Pipeline, Plot, StageContext, derive_seed, stage
from pipelines.bc_pmi import ABOUT
from pipelines.bc_pmi.params import BcPmiParams
from pipelines.bc_pmi.plots import plot_demos, plot_style_accuracy, plot_weight_map
from pipelines.bc_pmi.report import build_report

DEMOS, DATA_METRICS, DEMOS_PNG = "data/demos.parquet", "metrics/data.json", "plots/demonstrations.png"
PMI, MINE_METRICS, MINE_MODELS = "tables/pmi.parquet", "metrics/mine.json", "models/mine/"
POLICIES = "models/policies/"
RESULTS, WEIGHT_MAP, EVAL_METRICS = "tables/results.parquet", "tables/weight_map.parquet", "metrics/evaluate.json"
ACC_PNG, ACC_CSV = "plots/style_accuracy.png", "plots/style_accuracy.csv"
MAP_PNG, MAP_CSV = "plots/weight_map.png", "plots/weight_map.csv"
REPORT = "report.json"
GRID = GridConfig()          # the 11 x 11 grid, zone rows 3-7, corridors at columns 2 / 5 / 8


def _subset(rows: list[dict], seed: int, size: int) -> dict[str, np.ndarray]:
    """The demonstrations of one seed and data size (the first ``size`` episodes of every style) as arrays."""
    mine = [r for r in rows if r["seed"] == seed and r["rank"] < size]
    return {"state": np.array([[r["row"], r["col"]] for r in mine], dtype=np.int64).reshape(-1, 2),
            **{k: np.array([r[k] for r in mine], dtype=np.int64) for k in ("action", "style", "episode", "t")}}


# --------------------------------------------------------------------------------------------------
# step 1: the demonstrations: three styles that share start and goal and differ only in the zone
# --------------------------------------------------------------------------------------------------
@stage(params=("seeds", "data"), outs=(DEMOS,), metrics=(DATA_METRICS,), plots=(Plot(DEMOS_PNG),))
def demos(ctx: StageContext) -> None:
    """Expert demonstrations of every style per seed (or the user's file), each episode ranked within its style."""
    d = ctx.params.data
    grid = GridConfig(epsilon=d.epsilon)
    user = read_demonstrations(ctx.data_path(d.demos_path)) if d.demos_path else None
    rows, summary = [], {}
    for seed in ctx.params.seeds:
        rng = np.random.default_rng(derive_seed(seed, "demos"))
        if user is None:
            pool = expert_demonstrations(grid, max(d.sizes), rng)
            rank = pool["episode"] - pool["style"] * max(d.sizes)
        else:   # a seeded order of the file's episodes within each style
            pool, rank = user, np.zeros(len(user["episode"]), dtype=np.int64)
            for style in range(GRID.n_styles):
                episodes = np.unique(pool["episode"][pool["style"] == style])
                order = dict(zip(rng.permutation(episodes).tolist(), range(len(episodes))))
                mask = pool["style"] == style
                rank[mask] = [order[e] for e in pool["episode"][mask].tolist()]
        rows += [{"seed": seed, "episode": int(e), "rank": int(k), "t": int(t), "row": int(s[0]), "col": int(s[1]),
                  "action": int(a), "style": int(z)}
                 for e, k, t, s, a, z in zip(pool["episode"], rank, pool["t"], pool["state"], pool["action"],
                                             pool["style"])]
        per_style = [int(len(np.unique(pool["episode"][pool["style"] == z]))) for z in range(GRID.n_styles)]
        summary[f"seed{seed}"] = {"steps": int(len(pool["action"])), "episodes_per_style": per_style}
    available = min(min(s["episodes_per_style"]) for s in summary.values())
    save_table(rows, ctx.path(DEMOS))
    save_json({"source": "file" if user is not None else "generated experts", "epsilon": d.epsilon,
               "sizes": [min(n, available) for n in d.sizes], "episodes_per_style_available": available,
               "per_seed": summary}, ctx.path(DATA_METRICS))
    plot_demos(GRID, _subset(rows, ctx.params.seeds[0], max(d.sizes)), ctx.path(DEMOS_PNG))


def _sizes(ctx: StageContext) -> list[int]:
    """The data sizes the demos stage could serve (capped at the episodes per style a user's file holds)."""
    return sorted(set(load_json(ctx.path(DATA_METRICS))["sizes"]))


# --------------------------------------------------------------------------------------------------
# steps 2-3: MINE: the Donsker-Varadhan bound with the EMA denominator, then PMI(s, a; z) of every tuple
# --------------------------------------------------------------------------------------------------
@stage(params=("seeds", "mine"), deps=(DEMOS, DATA_METRICS), outs=(PMI, MINE_MODELS), metrics=(MINE_METRICS,),
       models={"mine": MINE_MODELS})
def mine(ctx: StageContext) -> None:
    """Train T per seed and data size; MINE's and the exact PMI of every tuple, and its normalised weight."""
    m, demo_rows = ctx.params.mine, load_table(ctx.path(DEMOS))
    cfg = MineConfig(steps=m.steps, batch_size=m.batch_size, lr=m.lr, hidden=m.hidden, ema_rate=m.ema_rate)
    rows, metrics = [], {}
    for seed in ctx.params.seeds:
        for size in _sizes(ctx):
            data = _subset(demo_rows, seed, size)
            pmi, model, result = estimate_style_pmi(GRID, data, cfg, seed=derive_seed(seed, "mine", size),
                                                    callback=ctx.metric_callback(f"mine/n{size}/s{seed}"),
                                                    progress=ctx.progress)
            exact = exact_style_pmi(GRID, data)
            weight = np.exp(pmi - pmi.max())
            weight /= weight.mean()                    # exp(PMI) normalised over the whole set (for the maps)
            save_model(model, ctx.path(MINE_MODELS) / f"n{size}_s{seed}.safetensors")
            zone = in_zone(GRID, data["state"][:, 0])
            shared = ~zone & (data["state"][:, 1] == GRID.mid) & (data["action"] == 0)   # every style walks here
            metrics[f"n{size}/s{seed}"] = {"dv": result.history[-1]["dv"], "pearson_exact": pearson(pmi, exact),
                                           "shared_pmi": float(pmi[shared].mean()),
                                           "shared_pmi_exact": float(exact[shared].mean()),
                                           "zone_ratio": float(weight[zone].mean() / weight[~zone].mean())}
            rows += [{"seed": seed, "size": size, "row": int(s[0]), "col": int(s[1]), "action": int(a),
                      "style": int(z), "pmi": float(p), "pmi_exact": float(x), "weight": float(w)}
                     for s, a, z, p, x, w in zip(data["state"], data["action"], data["style"], pmi, exact, weight)]
    save_table(rows, ctx.path(PMI))
    save_json(metrics, ctx.path(MINE_METRICS))


# --------------------------------------------------------------------------------------------------
# step 4: conditional BC and PMI-weighted BC, same network, same seeds, the one training loop
# --------------------------------------------------------------------------------------------------
@stage(params=("seeds", "train"), deps=(PMI, DATA_METRICS), outs=(POLICIES,), models={"policy": POLICIES})
def train(ctx: StageContext) -> None:
    """Every method at every data size and seed; the policies' weights."""
    t, pmi_rows = ctx.params.train, load_table(ctx.path(PMI))
    cfg = BCConfig(steps=t.steps, batch_size=t.batch_size, lr=t.lr, hidden=t.hidden, alpha=t.alpha,
                   max_weight=t.max_weight)
    for seed in ctx.params.seeds:
        for size in _sizes(ctx):
            mine = [r for r in pmi_rows if r["seed"] == seed and r["size"] == size]
            data = Demonstrations(
                torch.from_numpy(state_features(GRID, np.array([[r["row"], r["col"]] for r in mine]))),
                torch.tensor([r["action"] for r in mine]), torch.tensor([r["style"] for r in mine]),
                torch.tensor([r["pmi"] for r in mine], dtype=torch.float32))
            for method in t.methods:
                tag = f"{method}_n{size}_s{seed}"
                policy, _ = TRAINERS[method](data, cfg, seed=derive_seed(seed, "policy", size), desc=tag,
                                             callback=ctx.metric_callback(f"train/{tag}"), progress=ctx.progress)
                save_model(policy, ctx.path(POLICIES) / f"{tag}.safetensors", metadata={"method": method})


# --------------------------------------------------------------------------------------------------
# step 5: rollouts per style: success and style accuracy; where the weights concentrate
# --------------------------------------------------------------------------------------------------
def _score(result: dict[str, np.ndarray], styles: np.ndarray) -> dict[str, float]:
    return {"success": float(result["success"].mean()), "style_accuracy": float((result["crossed"] == styles).mean()),
            **{f"style_accuracy_{z}": float((result["crossed"][styles == z] == z).mean()) for z in np.unique(styles)}}


@stage(params=("seeds", "train.methods", "evaluate", "data.epsilon"),
       deps=(POLICIES, PMI, DATA_METRICS), outs=(RESULTS, WEIGHT_MAP), metrics=(EVAL_METRICS,),
       plots=(Plot(ACC_PNG), Plot(MAP_PNG),
              Plot(ACC_CSV, x="size", y="style_accuracy", title="Style accuracy against episodes per style"),
              Plot(MAP_CSV, x="col", y="weight", title="Mean PMI weight per grid column, inside the zone")))
def evaluate(ctx: StageContext) -> None:
    """Roll every policy out per style (and the experts), score success and style accuracy; map the weights."""
    e, methods = ctx.params.evaluate, ctx.params.train.methods
    grid = GridConfig(horizon=e.horizon, epsilon=ctx.params.data.epsilon)
    styles = np.repeat(np.arange(grid.n_styles), e.rollouts)
    sizes, rows = _sizes(ctx), []
    for seed in ctx.params.seeds:
        experts = noisy_expert(grid, np.random.default_rng(derive_seed(seed, "experts")))
        rows.append({"method": "expert", "size": 0, "seed": seed, **_score(rollout(grid, experts, styles), styles)})
        for size in sizes:
            for method in methods:
                tag = f"{method}_n{size}_s{seed}"
                policy = StylePolicy.load(ctx.path(POLICIES) / f"{tag}.safetensors")
                act = sampling_policy(policy, lambda s: state_features(grid, s),
                                      torch.Generator().manual_seed(derive_seed(seed, "rollout", size)),
                                      greedy=e.action == "greedy")
                scores = _score(rollout(grid, act, styles), styles)
                rows.append({"method": method, "size": size, "seed": seed, **scores})
    pmi_rows = load_table(ctx.path(PMI))
    cells = {}
    for r in pmi_rows:
        cells.setdefault((r["size"], r["seed"], r["row"], r["col"]), []).append(r["weight"])
    weight_map = [{"size": k[0], "seed": k[1], "row": k[2], "col": k[3], "weight": float(np.mean(v)), "visits": len(v),
                   "in_zone": bool(in_zone(GRID, k[2]))} for k, v in sorted(cells.items())]
    for row in rows:   # the experts' rows carry no weights (NaN), so that every row has the same columns
        row.update(zone_weight=math.nan, outside_weight=math.nan, zone_ratio=math.nan)
        if row["method"] != "expert":
            mine = [r for r in pmi_rows if r["seed"] == row["seed"] and r["size"] == row["size"]]
            zone = np.array([bool(in_zone(GRID, r["row"])) for r in mine])
            w = np.array([r["weight"] for r in mine])
            row.update(zone_weight=float(w[zone].mean()), outside_weight=float(w[~zone].mean()),
                       zone_ratio=float(w[zone].mean() / w[~zone].mean()))
    save_table(rows, ctx.path(RESULTS))
    save_table(weight_map, ctx.path(WEIGHT_MAP))
    save_json({f"{r['method']}/n{r['size']}/{k}": float(np.mean([q[k] for q in rows if q["method"] == r["method"]
                                                                  and q["size"] == r["size"]]))
               for r in rows for k in ("success", "style_accuracy")}, ctx.path(EVAL_METRICS))
    plot_style_accuracy(rows, ctx.path(ACC_PNG), ctx.path(ACC_CSV))
    plot_weight_map(GRID, weight_map, min(sizes), ctx.path(MAP_PNG), ctx.path(MAP_CSV))


# --------------------------------------------------------------------------------------------------
# the table, the claims and the checks
# --------------------------------------------------------------------------------------------------
@stage(params=("seeds", "mine", "train", "evaluate", "report"), deps=(RESULTS, MINE_METRICS, DATA_METRICS),
       outs=(REPORT, "report.md"))
def report(ctx: StageContext) -> None:
    """BC vs BC-PMI per data size, the claims and the MINE checks."""
    build_report(load_table(ctx.path(RESULTS)), load_json(ctx.path(MINE_METRICS)), load_json(ctx.path(DATA_METRICS)),
                 ctx.params).save(ctx.path(REPORT))


PIPELINE = Pipeline(paper=ABOUT, params_model=BcPmiParams, stages=(demos, mine, train, evaluate, report))
