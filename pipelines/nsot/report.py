"""NSOT report: the couplings table, the paper's claims and the checks, as pure functions of loaded tables.

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

The headline claim is the paper's main result at CPU scale: at few Euler steps NSOT (offline superset OT
pairs) beats independent coupling on 1-NNA-CD, paired by (category, seed). Every compared arm must first
beat the worst case of 1-NNA (100 %: every generated cloud told apart from the test clouds, what an unfit
model gives) at the most Euler steps evaluated. The hybrid-beta claims need more: each arm must be fitted
(1-NNA-CD at the most steps <= 65 %), because the paper's argument is about the converged field.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from components.io import load_json, load_table
from components.metrics.stats import Estimate
from paperflows.claims import ClaimSpec, Gate, decide, gate, non_inferiority, superiority
from paperflows.contract import StageContext, stage
from paperflows.report import REPORT_TIMINGS, Check, Claim, Report
from paperflows.rows import by_unit, mean, pm, rows_where
from pipelines.nsot.params import (
    BRIEF_BETAS,
    BRIEF_STEPS,
    COUPLINGS,
    FEW_STEPS,
    SMALL_BETA,
    TIMED,
    NsotParams,
    beta_of,
    method_names,
)
from pipelines.nsot.pipeline import CATEGORIES, EVAL, OT_METRICS, OT_TIMINGS, PAIR_COSTS, REPORT, STEP_TIMINGS

#: a replicate of the 1-NNA and pair-cost claims: one (category, seed), i.e. one model per method
Unit = tuple[str, int]
UNIT = ("category", "seed")

#: 1-NNA of a model whose clouds are all told apart from the test clouds (an unfit model); ideal is 50 %
NNA_WORST = 100.0
#: fit quality the hybrid-beta claims need: 1-NNA-CD at the most Euler steps at most this (audit N8)
FIT_NNA = 65.0
NNA_EFFECT = 5.0
NNA_SOURCE = (
    "the brief gives no paper numbers (section c); 5 points = a tenth of 1-NNA's range between the ideal "
    "50 % and the worst case 100 %"
)
COST_GAP = 0.2  # brief d) claim 1: NSOT pair cost "within about 20 %" of exact per-sample OT
COST_FRACTION = 0.5  # brief d) claim 1: "far below" independent pairs, read as at most half (a check)
BRIEF_EXPONENT = 3.0  # brief d) claim 2: online OT time "grows roughly as N^3"
EXPONENT_MARGIN = 0.5  # "roughly": closer to N^3 than to N^2
COUPLING_MARGIN = 1.0  # "matches": within a factor of 2 (+100 %)
OT_SLOWDOWN = 2.0  # online OT dominates the step: more than doubles it

NSOT_BEATS_INDEPENDENT = ClaimSpec(
    "nsot_beats_independent_few_steps",
    "At 1-5 Euler steps NSOT beats independent coupling on 1-NNA-CD",
    "independent − NSOT 1-NNA-CD (%), averaged over the few-step budgets, paired by (category, seed)",
    superiority(NNA_EFFECT, NNA_SOURCE),
    headline=True,
)
HEADLINE = (NSOT_BEATS_INDEPENDENT,)

ONLINE_OT_BEATS_INDEPENDENT = ClaimSpec(
    "online_ot_beats_independent_few_steps",
    "At 1-5 Euler steps online OT beats independent coupling on 1-NNA-CD",
    "independent − online OT 1-NNA-CD (%), averaged over the few-step budgets, paired by (category, seed)",
    superiority(NNA_EFFECT, NNA_SOURCE),
)
NSOT_BEATS_INDEPENDENT_EMD = ClaimSpec(
    "nsot_beats_independent_1nna_emd",
    "NSOT beats independent coupling on 1-NNA-EMD at the metric step count",
    "independent − NSOT 1-NNA-EMD (%) at eval.metric_steps, paired by (category, seed)",
    superiority(NNA_EFFECT, NNA_SOURCE),
)
SMALL_BETA_BEATS_BETA0 = ClaimSpec(
    "small_beta_beats_beta0",
    f"A small hybrid beta (<= {SMALL_BETA:g}) beats beta = 0 at 1-5 Euler steps",
    "beta=0 − small-beta 1-NNA-CD (%), few-step average, paired by (category, seed)",
    superiority(NNA_EFFECT, NNA_SOURCE),
)
LARGE_BETA_DRIFTS_BACK = ClaimSpec(
    "large_beta_drifts_back",
    "A large hybrid beta drifts back toward independent coupling (worse than a small beta)",
    "large-beta − small-beta 1-NNA-CD (%), few-step average, paired by (category, seed)",
    superiority(NNA_EFFECT, NNA_SOURCE),
)
NSOT_COST_NEAR_EXACT = ClaimSpec(
    "nsot_cost_near_exact_ot",
    f"NSOT pair cost is no more than {100 * COST_GAP:.0f} % above exact per-sample OT's",
    "NSOT / exact-OT mean pair cost, geometric mean over (category, seed)",
    non_inferiority(
        COST_GAP,
        "brief d) claim 1: NSOT pair cost 'within about 20 %' of exact per-sample OT",
        direction="less",
        boundary=1.0,
    ),
)
NSOT_COUPLING_MATCHES = ClaimSpec(
    "nsot_coupling_time_matches_independent",
    "NSOT's per-step coupling time matches independent coupling's (no online OT cost)",
    "NSOT / independent coupling time at the largest N, geometric mean over timing rounds",
    non_inferiority(
        COUPLING_MARGIN,
        "brief d) claim 2 ('NSOT step time matches independent coupling, while online "
        "OT time grows roughly as N^3'); no number given: 'matches' read as within a "
        "factor of 2, against a cost that grows as N^3",
        direction="less",
        boundary=1.0,
    ),
    timed=True,
)
ONLINE_OT_STEP_SLOWER = ClaimSpec(
    "online_ot_step_slower",
    "Online OT more than doubles the training step at the largest N",
    "online OT / independent training step time at the largest N, geometric mean over timing rounds",
    superiority(
        0.25,
        "brief d) claim 2: online OT's N^3 solve dominates the step at large N, read as more than "
        "doubling it (boundary 2x); smallest effect of interest a quarter beyond that",
        boundary=OT_SLOWDOWN,
    ),
    timed=True,
)
ONLINE_OT_GROWS_CUBICALLY = ClaimSpec(
    "online_ot_solve_grows_cubically",
    "Online OT's per-step OT solve time grows roughly as N^3",
    "exponent of the online OT coupling time in N (least-squares slope of log time on log N), per timing round",
    non_inferiority(
        EXPONENT_MARGIN,
        "brief d) claim 2: online OT time 'grows roughly as N^3' (boundary 3); "
        "'roughly' read as closer to N^3 than to N^2 (margin 0.5)",
        boundary=BRIEF_EXPONENT,
    ),
    timed=True,
)


def few_steps(euler_steps: Sequence[int]) -> list[int]:
    """The step counts of the few-step budget (1-5), or the smallest one when none is that small."""
    return [s for s in euler_steps if s <= FEW_STEPS] or list(euler_steps[:1])


def few_step_nna(
    rows: list[dict[str, Any]], method: str, few: Sequence[int], key: str = "1nna_cd"
) -> dict[Unit, float]:
    """``(category, seed) -> key`` of ``method`` averaged over the step counts ``few`` (units with a value
    at every one of them)."""
    per_step = [by_unit(rows, key, unit=UNIT, method=method, euler_steps=s) for s in few]
    return _mean_over(per_step)


def _mean_over(series: list[dict[Unit, float]]) -> dict[Unit, float]:
    """Per unit, the mean of several per-unit series (units present in all of them)."""
    units = set.intersection(*(set(s) for s in series)) if series else set()
    return {unit: sum(s[unit] for s in series) / len(series) for unit in sorted(units)}


def _nna(values: dict[Any, float]) -> str:
    return pm(list(values.values()), 1) if values else "–"


# --------------------------------------------------------------------------------------------------
# learning gates: an arm must beat the worst case (or be fitted) at the most Euler steps
# --------------------------------------------------------------------------------------------------
def fit_gate(rows: list[dict[str, Any]], arm: str, steps: int, ceiling: float = NNA_WORST) -> Gate:
    """``arm``'s 1-NNA-CD at ``steps`` Euler steps lies below ``ceiling`` (its interval over units)."""
    scores = by_unit(rows, "1nna_cd", unit=UNIT, method=arm, euler_steps=steps)
    reference = (
        "the 100 % 1-NNA worst case (an unfit model)"
        if ceiling >= NNA_WORST
        else f"fit quality: 1-NNA-CD <= {ceiling:g} % (audit fidelity-flows.md N8)"
    )
    return gate(
        arm,
        reference,
        Estimate.of(scores) if scores else None,
        statistic=f"1-NNA-CD (%) at {steps} Euler steps",
        margin=ceiling,
        direction="less",
    )


# --------------------------------------------------------------------------------------------------
# pair cost (no training involved): one claim and one check
# --------------------------------------------------------------------------------------------------
def _costs(cost_rows: list[dict[str, Any]], method: str) -> dict[Unit, float]:
    return by_unit(cost_rows, "pair_cost", unit=UNIT, method=method)


def cost_claim(cost_rows: list[dict[str, Any]]) -> Claim:
    nsot, exact = _costs(cost_rows, "nsot"), _costs(cost_rows, "online_ot")
    if not nsot or not exact:
        return decide(NSOT_COST_NEAR_EXACT, None, missing="the NSOT and online OT pair costs were not both measured")
    return decide(
        NSOT_COST_NEAR_EXACT,
        Estimate.paired(nsot, exact, log=True),
        evidence=f"NSOT {pm(list(nsot.values()), 3)} vs exact OT {pm(list(exact.values()), 3)}; "
        "no learned arm (pairs come from the couplings alone), so no learning gate",
        numbers={"nsot_cost": mean(list(nsot.values())), "exact_ot_cost": mean(list(exact.values()))},
    )


def cost_check(cost_rows: list[dict[str, Any]]) -> Check | None:
    """NSOT pairs cost at most half of independent pairs on every unit: an OT pairing against random pairs."""
    nsot, indep = _costs(cost_rows, "nsot"), _costs(cost_rows, "independent")
    units = sorted(set(nsot) & set(indep))
    if not units:
        return None
    ratios = [nsot[u] / indep[u] for u in units]
    return Check(
        "nsot_cost_below_independent",
        f"NSOT pairs cost at most {COST_FRACTION:g}x independent pairs on every (category, seed) "
        "(an OT pairing against random pairs: true by construction)",
        passed=max(ratios) <= COST_FRACTION,
        evidence=f"NSOT / independent pair cost {min(ratios):.3f}-{max(ratios):.3f} over {len(units)} units",
        numbers={"max_ratio": max(ratios), "mean_ratio": sum(ratios) / len(ratios)},
    )


# --------------------------------------------------------------------------------------------------
# step and coupling time against N, paired by timing round
# --------------------------------------------------------------------------------------------------
def _times(rows: list[dict[str, Any]], method: str, n: int, key: str) -> dict[int, float]:
    return by_unit(rows, key, unit="round", method=method, n_points=n)


def _slope(ns: Sequence[int], ms: Sequence[float]) -> float:
    """Least-squares slope of log(ms) against log(N)."""
    xs, ys = [math.log(n) for n in ns], [math.log(m) for m in ms]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def _time_ratio(spec: ClaimSpec, timing_rows: list[dict[str, Any]], a: str, b: str, n: int, key: str) -> Claim:
    """``spec`` decided on the log-ratio of ``a``'s to ``b``'s ``key`` time at ``n`` points, paired by round."""
    x, y = _times(timing_rows, a, n, key), _times(timing_rows, b, n, key)
    if not x or not y:
        return decide(spec, None, missing=f"{key} of {a} and {b} at N={n} were not both measured")
    return decide(
        spec,
        Estimate.paired(x, y, log=True),
        evidence=f"{key} at N={n}: {a} {pm(list(x.values()), 3)}, {b} {pm(list(y.values()), 3)}; "
        "a timing needs no learning gate",
    )


def timing_claims(timing_rows: list[dict[str, Any]], timing_points: Sequence[int]) -> list[Claim]:
    """NSOT's coupling time against independent's, online OT's step against independent's (largest N) and
    the growth exponent of online OT's solve."""
    ns = sorted(timing_points)
    hi = ns[-1]
    match = _time_ratio(NSOT_COUPLING_MATCHES, timing_rows, "nsot", "independent", hi, "coupling_ms")
    slow = _time_ratio(ONLINE_OT_STEP_SLOWER, timing_rows, "online_ot", "independent", hi, "step_ms")
    per_n = [_times(timing_rows, "online_ot", n, "coupling_ms") for n in ns]
    rounds = sorted(set.intersection(*(set(r) for r in per_n)))
    rounds = [k for k in rounds if all(r[k] > 0 for r in per_n)]
    slopes = {k: _slope(ns, [r[k] for r in per_n]) for k in rounds}
    grow = decide(
        ONLINE_OT_GROWS_CUBICALLY,
        Estimate.of(slopes) if slopes else None,
        missing="no timing round covers every N",
        evidence=f"over N = {ns}; the smallest N carries fixed per-call overhead, which flattens the slope",
        numbers={f"online_ot_coupling_ms_n{n}": mean(list(r.values())) for n, r in zip(ns, per_n) if r},
    )
    return [match, slow, grow]


# --------------------------------------------------------------------------------------------------
# few-step 1-NNA, paired by (category, seed)
# --------------------------------------------------------------------------------------------------
def beats_independent(
    eval_rows: list[dict[str, Any]],
    spec: ClaimSpec,
    method: str,
    few: Sequence[int],
    fit_steps: int,
    key: str = "1nna_cd",
) -> Claim:
    """``spec``: independent − ``method`` 1-NNA (``key``) over the step counts ``few``, both arms gated on
    beating the 100 % worst case at ``fit_steps``."""
    indep, other = few_step_nna(eval_rows, "independent", few, key), few_step_nna(eval_rows, method, few, key)
    if not indep or not other:
        return decide(spec, None, missing=f"{method} or independent was not scored on {key} at {list(few)} steps")
    gates = [fit_gate(eval_rows, arm, fit_steps) for arm in ("independent", method)]
    return decide(
        spec,
        Estimate.paired(indep, other),
        gates=gates,
        evidence=f"independent {_nna(indep)} %, {method} {_nna(other)} %",
        numbers={f"independent_{key}": mean(list(indep.values())), f"{method}_{key}": mean(list(other.values()))},
    )


def _betas(methods: Sequence[str]) -> list[float]:
    return [beta_of(m) for m in methods]


def beta_claims(
    eval_rows: list[dict[str, Any]], methods: Sequence[str], few: Sequence[int], fit_steps: int
) -> list[Claim]:
    """Small beta beats beta = 0; a large beta drifts back. Every arm must be fitted (FIT_NNA at ``fit_steps``)."""
    hybrids = [m for m in methods if m.startswith("nsot_b")]
    small = [m for m in hybrids if beta_of(m) <= SMALL_BETA]
    large = [m for m in hybrids if beta_of(m) > SMALL_BETA]
    nna = {m: few_step_nna(eval_rows, m, few) for m in ("nsot", *hybrids)}
    small_nna, large_nna = _mean_over([nna[m] for m in small]), _mean_over([nna[m] for m in large])
    fitted = {m: fit_gate(eval_rows, m, fit_steps, FIT_NNA) for m in ("nsot", *hybrids)}
    if not small_nna or not nna["nsot"]:
        small_claim = decide(
            SMALL_BETA_BEATS_BETA0,
            None,
            missing=f"NSOT with beta = 0 and with a beta in (0, {SMALL_BETA:g}] were not both trained",
        )
    else:
        small_claim = decide(
            SMALL_BETA_BEATS_BETA0,
            Estimate.paired(nna["nsot"], small_nna),
            gates=[fitted["nsot"], *(fitted[m] for m in small)],
            evidence=f"beta=0 {_nna(nna['nsot'])} %, small beta {_betas(small)} {_nna(small_nna)} %",
        )
    if not small_nna or not large_nna:
        large_claim = decide(
            LARGE_BETA_DRIFTS_BACK,
            None,
            missing=f"betas both <= {SMALL_BETA:g} and > {SMALL_BETA:g} were not both trained",
        )
    else:
        large_claim = decide(
            LARGE_BETA_DRIFTS_BACK,
            Estimate.paired(large_nna, small_nna),
            gates=[fitted[m] for m in (*large, *small)],
            evidence=f"large beta {_betas(large)} {_nna(large_nna)} %, small beta {_nna(small_nna)} %",
        )
    return [small_claim, large_claim]


def nna_claims(
    eval_rows: list[dict[str, Any]], methods: Sequence[str], euler_steps: Sequence[int], metric_steps: int | None = None
) -> list[Claim]:
    """The 1-NNA claims: the headline (NSOT vs independent), online OT vs independent, the EMD version and
    the two hybrid-beta claims; the learning gates are judged at the most Euler steps evaluated."""
    few, fit_steps = few_steps(euler_steps), max(euler_steps)
    at = metric_steps if metric_steps is not None else few[-1]
    return [
        beats_independent(eval_rows, NSOT_BEATS_INDEPENDENT, "nsot", few, fit_steps),
        beats_independent(eval_rows, ONLINE_OT_BEATS_INDEPENDENT, "online_ot", few, fit_steps),
        beats_independent(eval_rows, NSOT_BEATS_INDEPENDENT_EMD, "nsot", [at], fit_steps, key="1nna_emd"),
        *beta_claims(eval_rows, methods, few, fit_steps),
    ]


def checks(ot_stats: dict[str, float], solver: str, cost_rows: Sequence[dict[str, Any]] = ()) -> list[Check]:
    """The exact offline OT pairing costs no more than the noise in its drawn order (one of the permutations
    it minimises over; an approximate solver carries no such guarantee, so it is not checked), and NSOT's
    training pairs cost far less than random pairs."""
    found = []
    if solver == "exact":
        paired, unpaired = ot_stats["mean_pair_cost"], ot_stats["mean_independent_cost"]
        found.append(
            Check(
                "superset_ot_not_above_unpaired",
                "exact superset OT pairs cost at most the unpaired supersets",
                paired <= unpaired + 1e-6,
                f"mean pair cost {paired:.4f} vs {unpaired:.4f} unpaired",
                {"mean_pair_cost": paired, "mean_independent_cost": unpaired},
            )
        )
    below = cost_check(list(cost_rows))
    return found + ([below] if below else [])


# --------------------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------------------
def _median(xs: list[float]) -> float | None:
    xs = sorted(xs)
    return None if not xs else (xs[len(xs) // 2] + xs[(len(xs) - 1) // 2]) / 2


def _cell(rows: list[dict[str, Any]], key: str, digits: int, category: str, **equal: Any) -> str | None:
    """``mean ± 95% half-width`` over seeds of ``key`` in one category, or for ``category="mean"`` of the
    per-seed means over the categories (seeds present in every category)."""
    picked = [
        r
        for r in rows_where(rows, **equal)
        if r.get(key) is not None and (category == "mean" or r["category"] == category)
    ]
    per_seed: dict[int, list[float]] = {}
    for r in picked:
        per_seed.setdefault(int(r["seed"]), []).append(float(r[key]))
    n_categories = len({r["category"] for r in picked})
    xs = [sum(v) / len(v) for _, v in sorted(per_seed.items()) if len(v) == n_categories]
    return pm(xs, digits) if xs else None


def _times_of(timing_rows: list[dict[str, Any]], key: str, **equal: Any) -> list[float]:
    return [float(r[key]) for r in rows_where(timing_rows, **equal)]


def build_report(
    eval_rows: list[dict[str, Any]],
    cost_rows: list[dict[str, Any]],
    timing_rows: list[dict[str, Any]],
    ot_stats: dict[str, float],
    params: NsotParams,
) -> Report:
    methods = method_names(params.train.couplings, params.train.betas)
    steps, ns, at = params.eval.euler_steps, params.eval.timing_points, params.eval.metric_steps
    categories = params.data.used_categories()
    full = [
        ("1-NNA-EMD", "1nna_emd", 1),
        ("COV-CD", "cov_cd", 1),
        ("COV-EMD", "cov_emd", 1),
        ("MMD-CD", "mmd_cd", 4),
        ("MMD-EMD", "mmd_emd", 3),
    ]
    columns = [
        "category",
        "method",
        "beta",
        "pair cost",
        *[f"1-NNA-CD @{s}" for s in steps],
        *[f"{name} @{at}" for name, _, _ in full],
    ]
    table = []
    for category in [*categories, "mean"]:
        for m in methods:
            row: dict[str, Any] = {
                "category": category,
                "method": m,
                "beta": beta_of(m),
                "pair cost": _cell(cost_rows, "pair_cost", 3, category, method=m),
            }
            for s in steps:
                row[f"1-NNA-CD @{s}"] = _cell(eval_rows, "1nna_cd", 1, category, method=m, euler_steps=s)
            for name, key, digits in full:
                row[f"{name} @{at}"] = _cell(eval_rows, key, digits, category, method=m, euler_steps=at)
            table.append(row)
    timing_table = [
        {
            "N": n,
            **{
                m: f"{_median(_times_of(timing_rows, 'step_ms', method=m, n_points=n)):.1f} "
                f"({_median(_times_of(timing_rows, 'coupling_ms', method=m, n_points=n)):.1f})"
                for m in TIMED
                if rows_where(timing_rows, method=m, n_points=n)
            },
        }
        for n in ns
    ]
    claims = nna_claims(eval_rows, methods, steps, at) + [cost_claim(cost_rows)] + timing_claims(timing_rows, ns)
    n_units = len(categories) * len(params.seeds)
    brief_models = len(categories) * (len(COUPLINGS) + len(BRIEF_BETAS)) * len(params.seeds)
    notes = [
        f"Offline superset OT: {int(ot_stats['n_shapes'])} shapes x {int(ot_stats['n_points'])} points; mean pair "
        f"cost {ot_stats['mean_pair_cost']:.3f} vs {ot_stats['mean_independent_cost']:.3f} unpaired.",
        f"One model per category ({', '.join(categories)}), coupling and seed, {params.train.steps} steps at "
        f"batch {params.train.batch_size}; hybrid betas {params.train.betas}. Rows per category and their "
        f"mean; 1-NNA and COV in % (50% is the ideal 1-NNA), MMD in squared (CD) or plain (EMD) distance "
        f"units of the normalised clouds; mean ± 95% CI half-width over seeds {params.seeds} (for 'mean', "
        f"of the per-seed means over categories). 1-NNA-CD at every step count; the EMD metrics, COV and "
        f"MMD at {at} Euler steps, on {params.eval.n_generated} generated vs {params.eval.n_generated} test "
        "clouds per category.",
        f"The 1-NNA and pair-cost claims are decided on paired differences over the {n_units} (category, "
        "seed) units (a unit's methods share initial weights, shape batches and sampling noise), so they "
        f"are tighter than the table's per-category intervals over {len(params.seeds)} seeds. The time claims "
        "are wall-clock measurements of this machine (log-ratios paired by timing round, each step on a batch "
        f"of {params.eval.timing_batch} clouds): they are reported beside the tracked results, not in them.",
        f"Learning gates at {max(steps)} Euler steps: every arm of a coupling claim must lie below the 100 % "
        f"1-NNA worst case; every arm of a hybrid-beta claim must be fitted (1-NNA-CD <= {FIT_NNA:g} %), so "
        "that an under-trained run leaves those claims not resolved.",
        f"This run trains {params.train.steps} steps at batch {params.train.batch_size} with betas "
        f"{params.train.betas}; the brief's experiment is {BRIEF_STEPS} steps at batch 32 with betas "
        f"{list(BRIEF_BETAS)}: `--set scale=evidence 'train.couplings=[independent,online_ot,nsot]' "
        f"'train.betas={list(BRIEF_BETAS)}'` trains {brief_models} models (scale=evidence trains only the "
        "two couplings of the headline claim; SCALE_COST in params.py gives each scale's measured cost).",
        "The paper reports ShapeNet airplane/chair/car 1-NNA against PVD, LION, PSF; no headline numbers "
        "were retrieved for the brief, so no paper column is shown.",
    ]
    return Report(
        slug="nsot",
        title="NSOT: couplings for point-cloud flow matching, per category (1-NNA / COV / MMD vs Euler steps)",
        columns=columns,
        rows=table,
        claims=claims,
        checks=checks(ot_stats, params.ot.solver, cost_rows),
        notes=notes,
        timed_tables={
            "training step time (ms) vs N, of which drawing the coupled pairs": timing_table,
            "offline superset OT solve": [{"shapes": int(ot_stats["n_shapes"]), "wall s": ot_stats.get("ot_seconds")}],
        },
    )


# --------------------------------------------------------------------------------------------------
# stage 6: the paper-shaped table and the claims
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", *CATEGORIES, "ot", "train", "eval"),
    deps=(EVAL, PAIR_COSTS, STEP_TIMINGS, OT_METRICS, OT_TIMINGS),
    outs=(REPORT,),
    timings=REPORT_TIMINGS,
)
def report(ctx: StageContext) -> None:
    """Build the result table (categories x methods x metrics) and evaluate the claims."""
    ot_stats = {**load_json(ctx.path(OT_METRICS)), "ot_seconds": load_json(ctx.path(OT_TIMINGS))["solve_seconds"]}
    build_report(
        load_table(ctx.path(EVAL)),
        load_table(ctx.path(PAIR_COSTS)),
        load_json(ctx.path(STEP_TIMINGS))["steps"],
        ot_stats,
        ctx.params,
    ).save(ctx.path(REPORT))
