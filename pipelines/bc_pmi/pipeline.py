"""BC-PMI: diverse policy recovery from offline data with PMI-weighted behavioural cloning (arXiv 2410.15910).

The paper's method on the brief's CPU reductions (``data.env``): a gridworld where three experts share start
and goal and differ in style only inside a bifurcation zone, or MuJoCo's Reacher-v5 where two scripted
experts sweep the arm counter-clockwise or clockwise and share the start and the final approach
(:mod:`components.imitation.envs`); reproduces the comparison of its result tables (BC-PMI against
style-conditioned BC: task success / return and style fidelity) at several data sizes, and its Fig. 3 (where
the PMI weights concentrate: a map of the weights and the weights along demonstrations, against the style
zone). Steps follow the method as the paper summarises it (style labels, MINE, pointwise MI, weighted BC,
evaluation by style):

1. **demos** (method step 1, styles given as labels): noisy expert demonstrations of every style (or a
   user's file: ``data.demos_path`` for the gridworld, ``data.path`` Parquet or Minari trajectories for the Reacher);
   the data sizes are nested subsets of episodes per style;
2. **mine** (method steps 2-3): per seed and size, a statistics network T(s, a, z) maximises the
   Donsker-Varadhan bound with MINE's moving-average denominator; PMI(s, a; z) = T(s, a, z) -
   log sum_z' p(z') exp T(s, a, z') for every tuple, beside the exact PMI from counts where the state-action
   space is tabular (the gridworld; the Reacher's is continuous and has none);
3. **train** (method step 4): conditional BC and BC-PMI (weights exp(PMI), mean 1 per batch, clipped at
   10, never differentiated) through the one training loop, same policy network, same seeds, beside two
   controls weighted the same way: exact count PMI, and a plain up-weighting of the style zone; a categorical
   policy for the gridworld's moves, a Gaussian one (NLL) for the Reacher's torques;
4. **evaluate** (method step 5): rollouts of pi(. | s, z) for every style, greedy and sampled: success, return
   and style accuracy (the rollout shows z: the gridworld's corridor, the Reacher's sweep direction), and of a
   uniform random policy (the learning gates' reference); the weights' map and their mean inside / outside
   the style zone;
5. **report**: the table, the claims (paired over seeds) and the checks.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from components.imitation.bc import TRAINERS, BCConfig, StylePolicy, sampling_policy
from components.imitation.demos import read_demonstrations
from components.imitation.style_pmi import MineConfig, estimate_pmi
from components.imitation.trajectories import read_trajectories
from components.io import load_json, load_table, save_json, save_model, save_table
from components.metrics.stats import pearson
from paperflows import Pipeline, Plot, StageContext, derive_seed, stage
from pipelines.bc_pmi import ABOUT
from pipelines.bc_pmi.data import arrays, demonstrations, file_ranks, make_env, pmi_table_rows, step_columns, trainer_of
from pipelines.bc_pmi.evaluation import add_zone_weights, random_policy, scores_of, weight_map_rows
from pipelines.bc_pmi.params import BcPmiParams
from pipelines.bc_pmi.plots import plot_demos, plot_style_accuracy, plot_weight_map, plot_weights_along

DEMOS, DATA_METRICS, DEMOS_PNG = "data/demos.parquet", "metrics/data.json", "plots/demonstrations.png"
PMI, MINE_METRICS, MINE_MODELS = "tables/pmi.parquet", "metrics/mine.json", "models/mine/"
POLICIES = "models/policies/"
RESULTS, WEIGHT_MAP, EVAL_METRICS = "tables/results.parquet", "tables/weight_map.parquet", "metrics/evaluate.json"
ACC_PNG, ACC_CSV = "plots/style_accuracy.png", "plots/style_accuracy.csv"
MAP_PNG, MAP_CSV = "plots/weight_map.png", "plots/weight_map.csv"
ALONG_PNG, ALONG_CSV = "plots/weights_along.png", "plots/weights_along.csv"
REPORT = "report.json"


# --------------------------------------------------------------------------------------------------
# step 1: the demonstrations: styles that share start and goal and differ only in the zone
# --------------------------------------------------------------------------------------------------
@stage(params=("seeds", "data"), outs=(DEMOS,), metrics=(DATA_METRICS,), plots=(Plot(DEMOS_PNG),))
def demos(ctx: StageContext) -> None:
    """Expert demonstrations of every style per seed (or the user's file), each episode ranked within its style."""
    d, env = ctx.params.data, make_env(ctx.params)
    user = None
    if d.demos_path:
        user = read_demonstrations(ctx.data_path(d.demos_path))
        user["obs"] = user.pop("state").astype(np.float64)
    elif d.path:
        user = read_trajectories(ctx.data_path(d.path), env.trajectory_spec())
    rows, summary = [], {}
    for seed in ctx.params.seeds:
        rng = np.random.default_rng(derive_seed(seed, "demos"))
        if user is None:
            pool = env.demonstrations(max(d.sizes), rng)
            rank = pool["episode"] - pool["style"] * max(d.sizes)
        else:  # a seeded order of the file's episodes within each style
            pool, rank = user, file_ranks(user, env.n_styles, rng)
        rows += [
            {"seed": seed, "episode": int(e), "rank": int(k), "t": int(t), "style": int(z), **step_columns(env, s, a)}
            for e, k, t, s, a, z in zip(pool["episode"], rank, pool["t"], pool["obs"], pool["action"], pool["style"])
        ]
        per_style = [int(len(np.unique(pool["episode"][pool["style"] == z]))) for z in range(env.n_styles)]
        summary[f"seed{seed}"] = {"steps": int(len(pool["action"])), "episodes_per_style": per_style}
    available = min(min(s["episodes_per_style"]) for s in summary.values())
    save_table(rows, ctx.path(DEMOS))
    save_json(
        {
            "env": env.name,
            "source": "file" if user is not None else "generated experts",
            "noise": d.noise,
            "epsilon": d.noise,
            "sizes": [min(n, available) for n in d.sizes],
            "episodes_per_style_available": available,
            "per_seed": summary,
        },
        ctx.path(DATA_METRICS),
    )
    first = [r for r in rows if r["seed"] == ctx.params.seeds[0]]
    plot_demos(env, arrays(first, env), ctx.path(DEMOS_PNG))


def _sizes(ctx: StageContext) -> list[int]:
    """The data sizes the demos stage could serve (capped at the episodes per style a user's file holds)."""
    return sorted(set(load_json(ctx.path(DATA_METRICS))["sizes"]))


# --------------------------------------------------------------------------------------------------
# steps 2-3: MINE: the Donsker-Varadhan bound with the EMA denominator, then PMI(s, a; z) of every tuple
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "mine", "data.env"),
    deps=(DEMOS, DATA_METRICS),
    outs=(PMI, MINE_MODELS),
    metrics=(MINE_METRICS,),
    models={"mine": MINE_MODELS},
)
def mine(ctx: StageContext) -> None:
    """Train T per seed and data size; MINE's (and, if tabular, the exact) PMI of every tuple, its weight."""
    m, demo_rows, env = ctx.params.mine, load_table(ctx.path(DEMOS)), make_env(ctx.params, experts=False)
    cfg = MineConfig(steps=m.steps, batch_size=m.batch_size, lr=m.lr, hidden=m.hidden, ema_rate=m.ema_rate)
    rows, metrics = [], {}
    for seed in ctx.params.seeds:
        for size in _sizes(ctx):
            subset = [r for r in demo_rows if r["seed"] == seed and r["rank"] < size]
            data = arrays(subset, env)
            pmi, model, result = estimate_pmi(
                env.tuple_features(data["obs"], data["action"]),
                data["style"],
                env.n_styles,
                cfg,
                seed=derive_seed(seed, "mine", size),
                callback=ctx.metric_callback(f"mine/n{size}/s{seed}"),
                progress=ctx.progress,
            )
            exact = (
                env.exact_pmi(data["obs"], data["action"], data["style"])
                if env.exact_pmi
                else np.full(len(pmi), math.nan)
            )
            weight = np.exp(pmi - pmi.max())
            weight /= weight.mean()  # exp(PMI) normalised over the whole set (for the maps)
            save_model(model, ctx.path(MINE_MODELS) / f"n{size}_s{seed}.safetensors")
            zone, shared = env.in_zone(data["obs"]), env.shared(data["obs"], data["action"])
            metrics[f"n{size}/s{seed}"] = {
                "dv": result.history[-1]["dv"],
                "shared_pmi": float(pmi[shared].mean()) if shared.any() else math.nan,
                "zone_ratio": float(weight[zone].mean() / weight[~zone].mean()),
                **(
                    {"pearson_exact": pearson(pmi, exact), "shared_pmi_exact": float(exact[shared].mean())}
                    if env.exact_pmi
                    else {}
                ),
            }
            rows += pmi_table_rows(seed, size, env, data, zone, pmi, exact, weight)
    save_table(rows, ctx.path(PMI))
    save_json(metrics, ctx.path(MINE_METRICS))


# --------------------------------------------------------------------------------------------------
# step 4: conditional BC and PMI-weighted BC, same network, same seeds, the one training loop
# --------------------------------------------------------------------------------------------------
@stage(params=("seeds", "train", "data.env"), deps=(PMI, DATA_METRICS), outs=(POLICIES,), models={"policy": POLICIES})
def train(ctx: StageContext) -> None:
    """Every method at every data size and seed; the policies' weights."""
    t, pmi_rows, env = ctx.params.train, load_table(ctx.path(PMI)), make_env(ctx.params, experts=False)
    cfg = BCConfig(
        steps=t.steps, batch_size=t.batch_size, lr=t.lr, hidden=t.hidden, alpha=t.alpha, max_weight=t.max_weight
    )
    for seed in ctx.params.seeds:
        for size in _sizes(ctx):
            mine = [r for r in pmi_rows if r["seed"] == seed and r["size"] == size]
            for method in t.methods:
                tag = f"{method}_n{size}_s{seed}"
                policy, _ = TRAINERS[trainer_of(method)](
                    demonstrations(mine, env, method),
                    cfg,
                    seed=derive_seed(seed, "policy", size),
                    desc=tag,
                    callback=ctx.metric_callback(f"train/{tag}"),
                    progress=ctx.progress,
                    n_styles=env.n_styles,
                )
                save_model(policy, ctx.path(POLICIES) / f"{tag}.safetensors", metadata={"method": method})


# --------------------------------------------------------------------------------------------------
# step 5: rollouts per style: success, return and style accuracy; where the weights concentrate
# --------------------------------------------------------------------------------------------------
@stage(
    params=(
        "seeds",
        "train.methods",
        "evaluate",
        "data.env",
        "data.epsilon",
        "data.action_noise",
        "data.random_starts",
    ),
    deps=(POLICIES, PMI, DATA_METRICS),
    outs=(RESULTS, WEIGHT_MAP),
    metrics=(EVAL_METRICS,),
    plots=(
        Plot(ACC_PNG),
        Plot(MAP_PNG),
        Plot(ALONG_PNG),
        Plot(ACC_CSV, x="size", y="style_accuracy", title="Style accuracy against episodes per style"),
        Plot(MAP_CSV, x="col", y="weight", title="Mean PMI weight per map column, inside the zone"),
        Plot(ALONG_CSV, x="t", y="weight", title="PMI weight along demonstrations"),
    ),
)
def evaluate(ctx: StageContext) -> None:
    """Roll every policy out per style (and the experts), score them; map the weights, inside vs outside the zone."""
    e, methods = ctx.params.evaluate, ctx.params.train.methods
    env = make_env(ctx.params, e.horizon)
    styles = np.repeat(np.arange(env.n_styles), e.rollouts)
    sizes, rows = _sizes(ctx), []
    modes = [e.action, *(m for m in ("greedy", "sample") if m != e.action)]  # the claims' way first
    for seed in ctx.params.seeds:
        for method, act in (("expert", env.expert), ("random", lambda rng: random_policy(env, rng))):
            rng = np.random.default_rng(derive_seed(seed, "experts" if method == "expert" else "random policy"))
            scores = scores_of(env.rollout(act(rng), styles, rng), styles)
            rows.append({"method": method, "size": 0, "seed": seed, "action": "own", **scores})
        for size, method, mode in ((s, m, a) for s in sizes for m in methods for a in modes):
            policy = StylePolicy.load(ctx.path(POLICIES) / f"{method}_n{size}_s{seed}.safetensors")
            act = sampling_policy(
                policy,
                env.features,
                torch.Generator().manual_seed(derive_seed(seed, "rollout", size)),
                greedy=mode == "greedy",
            )
            rng = np.random.default_rng(derive_seed(seed, "rollout", size))  # same starts for every method
            scores = scores_of(env.rollout(act, styles, rng), styles)
            rows.append({"method": method, "size": size, "seed": seed, "action": mode, **scores})
    pmi_rows = load_table(ctx.path(PMI))
    weight_map = weight_map_rows(pmi_rows, env)
    add_zone_weights(rows, pmi_rows)
    save_table(rows, ctx.path(RESULTS))
    save_table(weight_map, ctx.path(WEIGHT_MAP))
    save_json(
        {
            f"{r['method']}/n{r['size']}/{r['action']}/{k}": float(
                np.mean(
                    [
                        q[k]
                        for q in rows
                        if (q["method"], q["size"], q["action"]) == (r["method"], r["size"], r["action"])
                    ]
                )
            )
            for r in rows
            for k in ("success", "return", "style_accuracy")
        },
        ctx.path(EVAL_METRICS),
    )
    plot_style_accuracy([r for r in rows if r["action"] in ("own", e.action)], ctx.path(ACC_PNG), ctx.path(ACC_CSV))
    plot_weight_map(env, weight_map, min(sizes), ctx.path(MAP_PNG), ctx.path(MAP_CSV))
    first = [r for r in pmi_rows if r["seed"] == ctx.params.seeds[0] and r["size"] == min(sizes)]
    plot_weights_along(env, first, ctx.path(ALONG_PNG), ctx.path(ALONG_CSV))


PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=BcPmiParams,
    stages=(demos, mine, train, evaluate),
    report="pipelines.bc_pmi.report:report",
)
