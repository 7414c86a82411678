"""NSOT report: the couplings table and the paper's four claims, as pure functions of loaded tables.

Inputs (as the stages write them):

* ``eval_rows``: ``{method, seed, euler_steps, nfe, 1nna_cd, cov_cd, mmd_cd}``; every method of a seed
  starts from the same initial weights and is sampled from the same noise, so methods pair by seed;
* ``cost_rows``: ``{method, seed, pair_cost}``; every method of a seed draws the same shapes;
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
from paperflows.report import Check, Claim, Precondition, Report, decide, decide_paired, mean, pm, rows_where, values
from pipelines.nsot.params import FEW_STEPS, SMALL_BETA, TIMED, NsotParams, beta_of, method_names

COST_GAP = 0.2        # claim 1: NSOT pairs cost at most 20% more than exact per-sample OT ...
COST_FRACTION = 0.5   # ... and at most half of independent pairs ("far below")
STEP_RATIO = 1.3      # claim 2: NSOT's training step at most 1.3x independent's ...
OT_SLOWDOWN = 2.0     # ... online OT's at least 2x at the largest N ...
OT_EXPONENT = 2.0     # ... and its per-step OT solve growing at least as N^2


def few_steps(euler_steps: Sequence[int]) -> list[int]:
    """The step counts of the few-step budget (1-5), or the smallest one when none is that small."""
    return [s for s in euler_steps if s <= FEW_STEPS] or list(euler_steps[:1])


def few_step_nna(rows: list[dict[str, Any]], method: str, few: Sequence[int]) -> dict[int, float]:
    """``seed -> 1-NNA-CD`` of ``method`` averaged over the few-step budget."""
    out: dict[int, float] = {}
    for seed in sorted({int(r["seed"]) for r in rows_where(rows, method=method)}):
        scores = [float(r["1nna_cd"]) for r in rows_where(rows, method=method, seed=seed) if r["euler_steps"] in few]
        if len(scores) == len(few):
            out[seed] = sum(scores) / len(scores)
    return out


def _paired(a: dict[int, float], b: dict[int, float]) -> tuple[list[float], list[float]]:
    seeds = sorted(set(a) & set(b))
    return [a[s] for s in seeds], [b[s] for s in seeds]


def _mean_over(series: list[dict[int, float]]) -> dict[int, float]:
    """Per seed, the mean of several per-seed series (seeds present in all of them)."""
    seeds = set.intersection(*(set(s) for s in series)) if series else set()
    return {seed: sum(s[seed] for s in series) / len(series) for seed in sorted(seeds)}


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
    per = {m: {int(r["seed"]): float(r["pair_cost"]) for r in rows_where(cost_rows, method=m)}
           for m in ("independent", "online_ot", "nsot")}
    near_text = f"NSOT pair cost is within {100 * COST_GAP:.0f}% of exact per-sample OT"
    below_text = "NSOT pair cost is far below independent coupling (at most half)"
    if not per["nsot"] or not per["online_ot"]:
        near = _unresolved("nsot_cost_near_exact_ot", near_text, "NSOT / exact OT pair cost - 1",
                           "the NSOT and online OT pair costs were measured")
    else:
        nsot, exact = _paired(per["nsot"], per["online_ot"])
        near = decide("nsot_cost_near_exact_ot", near_text, "NSOT / exact OT pair cost - 1, per seed",
                      mean_ci([a / b - 1 for a, b in zip(nsot, exact)]), threshold=COST_GAP, direction="less",
                      evidence=f"NSOT {pm(nsot, 3)} vs exact OT {pm(exact, 3)}",
                      numbers={"nsot_cost": mean(nsot), "exact_ot_cost": mean(exact)})
    if not per["nsot"] or not per["independent"]:
        below = _unresolved("nsot_cost_below_independent", below_text, "NSOT / independent pair cost",
                            "the NSOT and independent pair costs were measured")
    else:
        nsot, indep = _paired(per["nsot"], per["independent"])
        below = decide("nsot_cost_below_independent", below_text, "NSOT / independent pair cost, per seed",
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
def nna_claims(eval_rows: list[dict[str, Any]], methods: Sequence[str], euler_steps: Sequence[int]) -> list[Claim]:
    few = few_steps(euler_steps)
    stat = f"per-seed difference of 1-NNA-CD (%) averaged over Euler steps {few}"
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
    return claims


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


def build_report(eval_rows: list[dict[str, Any]], cost_rows: list[dict[str, Any]],
                 timing_rows: list[dict[str, Any]], ot_stats: dict[str, float], params: NsotParams) -> Report:
    methods = method_names(params.train.couplings, params.train.betas)
    steps, ns = params.eval.euler_steps, params.eval.timing_points
    last = steps[-1]
    columns = ["method", "beta", "pair cost", f"step ms (N={ns[0]})", *[f"1-NNA-CD @{s}" for s in steps],
               f"COV-CD @{last}", f"MMD-CD @{last}"]
    table = []
    for m in methods:
        cost = values(cost_rows, "pair_cost", method=m)
        row: dict[str, Any] = {"method": m, "beta": beta_of(m), "pair cost": pm(cost, 3) if cost else None,
                               f"step ms (N={ns[0]})": _median(values(timing_rows, "step_ms", "round", method=m,
                                                                       n_points=ns[0]))}
        for s in steps:
            row[f"1-NNA-CD @{s}"] = pm(values(eval_rows, "1nna_cd", method=m, euler_steps=s), 1)
        row[f"COV-CD @{last}"] = pm(values(eval_rows, "cov_cd", method=m, euler_steps=last), 1)
        row[f"MMD-CD @{last}"] = pm(values(eval_rows, "mmd_cd", method=m, euler_steps=last), 3)
        table.append(row)
    timing_table = [{"N": n, **{m: f"{_median(values(timing_rows, 'step_ms', 'round', method=m, n_points=n)):.1f} "
                                   f"({_median(values(timing_rows, 'coupling_ms', 'round', method=m, n_points=n)):.1f})"
                                for m in TIMED if rows_where(timing_rows, method=m, n_points=n)}}
                    for n in ns]
    claims = (cost_claims(cost_rows) + timing_claims(timing_rows, ns)
              + nna_claims(eval_rows, methods, steps))
    notes = [f"Offline superset OT: {int(ot_stats['n_shapes'])} shapes x {int(ot_stats['n_points'])} points "
             f"solved in {ot_stats.get('ot_seconds', math.nan):.1f}s; mean pair cost "
             f"{ot_stats['mean_pair_cost']:.3f} vs {ot_stats['mean_independent_cost']:.3f} unpaired.",
             f"1-NNA-CD and COV-CD in %, 50% is the ideal 1-NNA; mean ± 95% CI half-width over seeds "
             f"{params.seeds}. The 1-NNA claims are decided on per-seed paired differences (shared initial "
             "weights and sampling noise per seed); the step-time claims on timing rounds.",
             "The paper reports ShapeNet airplane/chair/car 1-NNA against PVD, LION, PSF; no headline numbers "
             "were retrieved for the brief, so no paper column is shown."]
    return Report(slug="nsot", title="NSOT: couplings for point-cloud flow matching (1-NNA-CD vs Euler steps)",
                  columns=columns, rows=table, claims=claims, checks=checks(ot_stats, params.ot.solver),
                  notes=notes,
                  extra_tables={"training step time (ms) vs N, of which drawing the coupled pairs": timing_table})
