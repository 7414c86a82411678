"""NSOT report: the couplings table and the paper's four claims, as pure functions of loaded tables.

Inputs (as the stages write them):

* ``eval_rows``: ``{category, method, seed, euler_steps, nfe, 1nna_cd, cov_cd, mmd_cd, 1nna_emd, cov_emd,
  mmd_emd}`` (the EMD metrics only at ``eval.metric_steps``, else None); one model per category, coupling
  and seed; every method of a (category, seed) unit starts from the same initial weights, sees the same
  sequence of shape batches and is sampled from the same noise, so methods pair by unit;
* ``cost_rows``: ``{category, method, seed, pair_cost}``; every method of a unit draws the same shapes;
* ``timing_rows``: ``{method, n_points, round, step_ms, coupling_ms}``; the couplings are timed one after
  the other within a round, so they pair by round (the machine's load is shared within a round);
* ``ot_stats``: the offline OT summary (``mean_pair_cost``, ``mean_independent_cost``, ``n_shapes``,
  ``n_points``) and ``ot_seconds``, its wall time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from components.metrics.stats import Interval, mean_ci
from paperflows.report import Check, Claim, Precondition, Report, decide, decide_paired, mean, pm, rows_where
from pipelines.nsot.params import (BRIEF_BETAS, BRIEF_STEPS, FEW_STEPS, SMALL_BETA, TIMED, NsotParams, beta_of,
                                   method_names)

#: a replicate of the 1-NNA and pair-cost claims: one (category, seed), i.e. one model per method
Unit = tuple[str, int]

COST_GAP = 0.2        # claim 1: NSOT pairs cost at most 20% more than exact per-sample OT ...
COST_FRACTION = 0.5   # ... and at most half of independent pairs ("far below")
STEP_RATIO = 1.3      # claim 2: NSOT's training step at most 1.3x independent's ...
OT_SLOWDOWN = 2.0     # ... online OT's at least 2x at the largest N ...
OT_EXPONENT = 2.0     # ... and its per-step OT solve growing at least as N^2


def few_steps(euler_steps: Sequence[int]) -> list[int]:
    """The step counts of the few-step budget (1-5), or the smallest one when none is that small."""
    return [s for s in euler_steps if s <= FEW_STEPS] or list(euler_steps[:1])


def _unit(row: dict[str, Any]) -> Unit:
    return str(row["category"]), int(row["seed"])


def few_step_nna(rows: list[dict[str, Any]], method: str, few: Sequence[int], key: str = "1nna_cd"
                 ) -> dict[Unit, float]:
    """``(category, seed) -> key`` of ``method`` averaged over the step counts ``few`` (units with a value
    at every one of them)."""
    out: dict[Unit, float] = {}
    for unit in sorted({_unit(r) for r in rows_where(rows, method=method)}):
        scores = [float(r[key]) for r in rows_where(rows, method=method, category=unit[0], seed=unit[1])
                  if r["euler_steps"] in few and r.get(key) is not None]
        if len(scores) == len(few):
            out[unit] = sum(scores) / len(scores)
    return out


def _paired(a: dict[Any, float], b: dict[Any, float]) -> tuple[list[float], list[float]]:
    units = sorted(set(a) & set(b))
    return [a[u] for u in units], [b[u] for u in units]


def _mean_over(series: list[dict[Unit, float]]) -> dict[Unit, float]:
    """Per unit, the mean of several per-unit series (units present in all of them)."""
    units = set.intersection(*(set(s) for s in series)) if series else set()
    return {unit: sum(s[unit] for s in series) / len(series) for unit in sorted(units)}


def _unresolved(id: str, claim: str, statistic: str, missing: str, numbers: dict[str, float] | None = None
                ) -> Claim:
    """A claim that this run cannot decide: its precondition (what it needs) is unmet."""
    return decide(id, claim, statistic, Interval(math.nan, -math.inf, math.inf, 0),
                  precondition=Precondition(missing, met=False), numbers=numbers)


def _ratio_interval(logs: list[float]) -> Interval:
    """A ratio's geometric mean and interval from per-replicate log ratios."""
    interval = mean_ci(logs)
    return Interval(math.exp(interval.estimate), math.exp(interval.low), math.exp(interval.high), interval.n)


# --------------------------------------------------------------------------------------------------
# claim 1: pair cost (no training involved)
# --------------------------------------------------------------------------------------------------
def cost_claims(cost_rows: list[dict[str, Any]]) -> list[Claim]:
    per = {m: {_unit(r): float(r["pair_cost"]) for r in rows_where(cost_rows, method=m)}
           for m in ("independent", "online_ot", "nsot")}
    near_text = f"NSOT pair cost is within {100 * COST_GAP:.0f}% of exact per-sample OT"
    below_text = "NSOT pair cost is far below independent coupling (at most half)"
    if not per["nsot"] or not per["online_ot"]:
        near = _unresolved("nsot_cost_near_exact_ot", near_text, "NSOT / exact OT pair cost - 1",
                           "the NSOT and online OT pair costs were measured")
    else:
        nsot, exact = _paired(per["nsot"], per["online_ot"])
        near = decide("nsot_cost_near_exact_ot", near_text, "NSOT / exact OT pair cost - 1, per (category, seed)",
                      mean_ci([a / b - 1 for a, b in zip(nsot, exact)]), threshold=COST_GAP, direction="less",
                      evidence=f"NSOT {pm(nsot, 3)} vs exact OT {pm(exact, 3)}",
                      numbers={"nsot_cost": mean(nsot), "exact_ot_cost": mean(exact)})
    if not per["nsot"] or not per["independent"]:
        below = _unresolved("nsot_cost_below_independent", below_text, "NSOT / independent pair cost",
                            "the NSOT and independent pair costs were measured")
    else:
        nsot, indep = _paired(per["nsot"], per["independent"])
        below = decide("nsot_cost_below_independent", below_text, "NSOT / independent pair cost, per (category, seed)",
                       mean_ci([a / b for a, b in zip(nsot, indep)]), threshold=COST_FRACTION, direction="less",
                       evidence=f"NSOT {pm(nsot, 3)} vs independent {pm(indep, 3)}",
                       numbers={"nsot_cost": mean(nsot), "independent_cost": mean(indep)})
    return [near, below]


# --------------------------------------------------------------------------------------------------
# claim 2: training step time against N
# --------------------------------------------------------------------------------------------------
def _times(rows: list[dict[str, Any]], method: str, n: int, key: str) -> dict[int, float]:
    return {int(r["round"]): float(r[key]) for r in rows_where(rows, method=method, n_points=n)}


def _log_ratios(rows: list[dict[str, Any]], a: str, b: str, n: int, key: str = "step_ms") -> list[float]:
    x, y = _paired(_times(rows, a, n, key), _times(rows, b, n, key))
    return [math.log(u / v) for u, v in zip(x, y)]


def _slope(ns: Sequence[int], ms: Sequence[float]) -> float:
    """Least-squares slope of log(ms) against log(N)."""
    xs, ys = [math.log(n) for n in ns], [math.log(m) for m in ms]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def timing_claims(timing_rows: list[dict[str, Any]], timing_points: Sequence[int]) -> list[Claim]:
    ns = sorted(timing_points)
    hi = ns[-1]
    match_text = "NSOT's training step time matches independent coupling's"
    slow_text = f"Online OT's training step is at least {OT_SLOWDOWN:g}x independent coupling's at large N"
    grow_text = f"Online OT's per-step OT solve grows steeply with N (at least as N^{OT_EXPONENT:g})"
    if not timing_rows:
        return [_unresolved(i, t, "step time ratio", "the step times were measured") for i, t in
                (("nsot_step_time_matches_independent", match_text), ("online_ot_step_slower", slow_text),
                 ("online_ot_solve_grows_steeply", grow_text))]
    match = decide("nsot_step_time_matches_independent", match_text,
                   f"step time NSOT / independent at N={hi}, geometric mean over timing rounds",
                   _ratio_interval(_log_ratios(timing_rows, "nsot", "independent", hi)),
                   threshold=STEP_RATIO, direction="less")
    slow = decide("online_ot_step_slower", slow_text,
                  f"step time online OT / independent at N={hi}, geometric mean over timing rounds",
                  _ratio_interval(_log_ratios(timing_rows, "online_ot", "independent", hi)),
                  threshold=OT_SLOWDOWN, direction="greater")
    per_round = [_times(timing_rows, "online_ot", n, "coupling_ms") for n in ns]
    rounds = sorted(set.intersection(*(set(r) for r in per_round)))
    slopes = [_slope(ns, [r[k] for r in per_round]) for k in rounds]
    grow = decide("online_ot_solve_grows_steeply", grow_text,
                  f"exponent of the online OT solve time in N over N={ns}, per timing round", mean_ci(slopes),
                  threshold=OT_EXPONENT, direction="greater",
                  numbers={f"online_ot_coupling_ms_n{n}": mean(list(r.values())) for n, r in zip(ns, per_round)})
    return [match, slow, grow]


# --------------------------------------------------------------------------------------------------
# claims 3 and 4: few-step 1-NNA, paired per seed
# --------------------------------------------------------------------------------------------------
def nna_claims(eval_rows: list[dict[str, Any]], methods: Sequence[str], euler_steps: Sequence[int],
               metric_steps: int | None = None) -> list[Claim]:
    few = few_steps(euler_steps)
    stat = f"per-(category, seed) difference of 1-NNA-CD (%) averaged over Euler steps {few}"
    nna = {m: few_step_nna(eval_rows, m, few) for m in methods}
    claims = []
    for m in ("online_ot", "nsot"):
        cid, text = f"{m}_beats_independent_few_steps", f"At 1-5 Euler steps {m} beats independent coupling on 1-NNA"
        if not nna.get(m) or not nna.get("independent"):
            claims.append(_unresolved(cid, text, stat, f"both {m} and independent were trained"))
            continue
        a, b = _paired(nna["independent"], nna[m])
        claims.append(decide_paired(cid, text, f"independent - {m}, {stat}", a, b, direction="greater",
                                    evidence=f"independent {pm(a, 1)}%, {m} {pm(b, 1)}%",
                                    numbers={"independent_few_step_1nna": mean(a), f"{m}_few_step_1nna": mean(b)}))
    hybrids = [m for m in methods if m.startswith("nsot_b")]
    small = [m for m in hybrids if beta_of(m) <= SMALL_BETA]
    large = [m for m in hybrids if beta_of(m) > SMALL_BETA]
    small_text = f"A small hybrid beta (<= {SMALL_BETA:g}) beats beta = 0 at 1-5 Euler steps"
    small_nna = _mean_over([nna[m] for m in small])
    if not small or not nna.get("nsot"):
        claims.append(_unresolved("small_beta_beats_beta0", small_text, stat,
                                  f"NSOT with beta = 0 and with a beta in (0, {SMALL_BETA:g}] were trained"))
    else:
        a, b = _paired(nna["nsot"], small_nna)
        claims.append(decide_paired(
            "small_beta_beats_beta0", small_text, f"beta=0 - mean over beta in {[beta_of(m) for m in small]}, {stat}",
            a, b, direction="greater", evidence=f"beta=0 {pm(a, 1)}%, small beta {pm(b, 1)}%",
            numbers={"beta0_few_step_1nna": mean(a), "small_beta_few_step_1nna": mean(b)}))
    large_text = "A large hybrid beta drifts back toward independent coupling (worse than a small beta)"
    if not small or not large:
        claims.append(_unresolved("large_beta_drifts_back", large_text, stat,
                                  f"betas both <= {SMALL_BETA:g} and > {SMALL_BETA:g} were trained"))
    else:
        a, b = _paired(_mean_over([nna[m] for m in large]), small_nna)
        claims.append(decide_paired(
            "large_beta_drifts_back", large_text, f"mean over beta in {[beta_of(m) for m in large]} - small beta, "
            f"{stat}", a, b, direction="greater", evidence=f"large beta {pm(a, 1)}%, small beta {pm(b, 1)}%",
            numbers={"large_beta_few_step_1nna": mean(a), "small_beta_few_step_1nna": mean(b)}))
    return claims + [emd_claim(eval_rows, metric_steps if metric_steps is not None else few[-1])]


def emd_claim(eval_rows: list[dict[str, Any]], metric_steps: int) -> Claim:
    """Claim 3 under the paper's second distance: NSOT beats independent on 1-NNA-EMD at ``metric_steps``."""
    cid = "nsot_beats_independent_1nna_emd"
    text = f"At {metric_steps} Euler steps NSOT beats independent coupling on 1-NNA-EMD"
    stat = f"independent - nsot, per-(category, seed) difference of 1-NNA-EMD (%) at {metric_steps} Euler steps"
    indep, nsot = (few_step_nna(eval_rows, m, [metric_steps], key="1nna_emd") for m in ("independent", "nsot"))
    if not indep or not nsot:
        return _unresolved(cid, text, stat, f"both nsot and independent were scored by EMD at {metric_steps} steps")
    a, b = _paired(indep, nsot)
    return decide_paired(cid, text, stat, a, b, direction="greater",
                         evidence=f"independent {pm(a, 1)}%, nsot {pm(b, 1)}%",
                         numbers={"independent_1nna_emd": mean(a), "nsot_1nna_emd": mean(b)})


def checks(ot_stats: dict[str, float], solver: str) -> list[Check]:
    """The exact offline OT pairing costs no more than the noise in its drawn order (one of the permutations
    it minimises over); an approximate solver carries no such guarantee, so it is not checked."""
    if solver != "exact":
        return []
    paired, unpaired = ot_stats["mean_pair_cost"], ot_stats["mean_independent_cost"]
    return [Check("superset_ot_not_above_unpaired", "exact superset OT pairs cost at most the unpaired supersets",
                  paired <= unpaired + 1e-6, f"mean pair cost {paired:.4f} vs {unpaired:.4f} unpaired",
                  {"mean_pair_cost": paired, "mean_independent_cost": unpaired})]


# --------------------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------------------
def _median(xs: list[float]) -> float | None:
    xs = sorted(xs)
    return None if not xs else (xs[len(xs) // 2] + xs[(len(xs) - 1) // 2]) / 2


def _cell(rows: list[dict[str, Any]], key: str, digits: int, category: str, **equal: Any) -> str | None:
    """``mean ± 95% half-width`` over seeds of ``key`` in one category, or for ``category="mean"`` of the
    per-seed means over the categories (seeds present in every category)."""
    picked = [r for r in rows_where(rows, **equal) if r.get(key) is not None
              and (category == "mean" or r["category"] == category)]
    per_seed: dict[int, list[float]] = {}
    for r in picked:
        per_seed.setdefault(int(r["seed"]), []).append(float(r[key]))
    n_categories = len({r["category"] for r in picked})
    xs = [sum(v) / len(v) for _, v in sorted(per_seed.items()) if len(v) == n_categories]
    return pm(xs, digits) if xs else None


def _times_of(timing_rows: list[dict[str, Any]], key: str, **equal: Any) -> list[float]:
    return [float(r[key]) for r in rows_where(timing_rows, **equal)]


def build_report(eval_rows: list[dict[str, Any]], cost_rows: list[dict[str, Any]],
                 timing_rows: list[dict[str, Any]], ot_stats: dict[str, float], params: NsotParams) -> Report:
    methods = method_names(params.train.couplings, params.train.betas)
    steps, ns, at = params.eval.euler_steps, params.eval.timing_points, params.eval.metric_steps
    categories = params.data.used_categories()
    full = [("1-NNA-EMD", "1nna_emd", 1), ("COV-CD", "cov_cd", 1), ("COV-EMD", "cov_emd", 1),
            ("MMD-CD", "mmd_cd", 4), ("MMD-EMD", "mmd_emd", 3)]
    columns = ["category", "method", "beta", "pair cost", *[f"1-NNA-CD @{s}" for s in steps],
               *[f"{name} @{at}" for name, _, _ in full]]
    table = []
    for category in [*categories, "mean"]:
        for m in methods:
            row: dict[str, Any] = {"category": category, "method": m, "beta": beta_of(m),
                                   "pair cost": _cell(cost_rows, "pair_cost", 3, category, method=m)}
            for s in steps:
                row[f"1-NNA-CD @{s}"] = _cell(eval_rows, "1nna_cd", 1, category, method=m, euler_steps=s)
            for name, key, digits in full:
                row[f"{name} @{at}"] = _cell(eval_rows, key, digits, category, method=m, euler_steps=at)
            table.append(row)
    timing_table = [{"N": n, **{m: f"{_median(_times_of(timing_rows, 'step_ms', method=m, n_points=n)):.1f} "
                                   f"({_median(_times_of(timing_rows, 'coupling_ms', method=m, n_points=n)):.1f})"
                                for m in TIMED if rows_where(timing_rows, method=m, n_points=n)}}
                    for n in ns]
    claims = (cost_claims(cost_rows) + timing_claims(timing_rows, ns)
              + nna_claims(eval_rows, methods, steps, at))
    n_units = len(categories) * len(params.seeds)
    brief_models = len(categories) * (len(params.train.couplings) + len(BRIEF_BETAS)) * len(params.seeds)
    notes = [f"Offline superset OT: {int(ot_stats['n_shapes'])} shapes x {int(ot_stats['n_points'])} points "
             f"solved in {ot_stats.get('ot_seconds', math.nan):.1f}s; mean pair cost "
             f"{ot_stats['mean_pair_cost']:.3f} vs {ot_stats['mean_independent_cost']:.3f} unpaired.",
             f"One model per category ({', '.join(categories)}), coupling and seed, {params.train.steps} steps at "
             f"batch {params.train.batch_size}; hybrid betas {params.train.betas}. Rows per category and their "
             f"mean; 1-NNA and COV in % (50% is the ideal 1-NNA), MMD in squared (CD) or plain (EMD) distance "
             f"units of the normalised clouds; mean ± 95% CI half-width over seeds {params.seeds} (for 'mean', "
             f"of the per-seed means over categories). 1-NNA-CD at every step count; the EMD metrics, COV and "
             f"MMD at {at} Euler steps, on {params.eval.n_generated} generated vs {params.eval.n_generated} test "
             "clouds per category.",
             f"The 1-NNA and pair-cost claims are decided on paired differences over the {n_units} (category, "
             "seed) units (a unit's methods share initial weights, shape batches and sampling noise), so they "
             f"are tighter than the table's per-category intervals over {len(params.seeds)} seeds; the "
             "step-time claims on timing rounds, each step on a batch of "
             f"{params.eval.timing_batch} clouds.",
             f"The default trains {params.train.steps} steps at batch {params.train.batch_size} with betas "
             f"{params.train.betas} to fit a few minutes; the brief's experiment is {BRIEF_STEPS} steps at batch 32 "
             f"with betas {list(BRIEF_BETAS)}: `--set train.steps={BRIEF_STEPS} train.batch_size=32 "
             f"'train.betas={list(BRIEF_BETAS)}'` trains {brief_models} models, about "
             f"{brief_models * BRIEF_STEPS * 0.047 / 60:.0f} min of training on one core at ~47 ms per step "
             f"(each further seed adds {brief_models // len(params.seeds) * BRIEF_STEPS * 0.047 / 60:.0f} min; "
             "more seeds narrow every interval).",
             "The paper reports ShapeNet airplane/chair/car 1-NNA against PVD, LION, PSF; no headline numbers "
             "were retrieved for the brief, so no paper column is shown."]
    return Report(slug="nsot", title="NSOT: couplings for point-cloud flow matching, per category "
                                     "(1-NNA / COV / MMD vs Euler steps)",
                  columns=columns, rows=table, claims=claims, checks=checks(ot_stats, params.ot.solver),
                  notes=notes,
                  extra_tables={"training step time (ms) vs N, of which drawing the coupled pairs": timing_table})
