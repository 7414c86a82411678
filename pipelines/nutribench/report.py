"""NutriBench's table and claims, as pure functions of the loaded tables (no file I/O).

* The table: one row per strategy (Acc@7.5, MAE, answer rate, natural/metric split, the risk study's TIR,
  LBGI, HBGI and their paired differences against the true-carb bolus), the official Llama-3.1-8B numbers
  beside, and the true-carb arm.
* The prompting claims, RAG >= CoT >= base on Acc@7.5 (headline) and on MAE, are decided on the worse of the two
  consecutive gains, min(RAG - CoT, CoT - base) (MAE, a skewed metric: on log-ratios of the arms' MAEs; a few
  blunders of thousands of grams dominate an MAE, and the bootstrap's interval then spans them), with a paired
  bootstrap over the meals all three arms were asked (one
  benchmark, greedy decoding: the meals are the replicates). An abstention is never a hit. Gates: some LLM arm
  beats the training-mean predictor on the same meals (on the claim's metric), and every LLM arm answers at
  least ``MIN_ANSWER_RATE`` of the meals on its first pass, before the answer-line cue (the cue copies numbers
  out of the prompt, so an answer rate measured after it says nothing about estimation).
* The risk study's three relations (larger error -> more TIR lost, under-boluses raise HBGI, over-boluses raise
  LBGI) are properties of the UVa/Padova model (insulin lowers glucose monotonically): checks, not claims.
* Parse+lookup > ridge > mean: on curated meals the lookup reads the food table and household weights
  the labels were computed from, so it is a *check* of the curation and the parser; on a real NutriBench
  file it is a claim about the baselines.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from components.glucose import SENSOR_RANGE, bolus_carbs
from components.io import load_json, load_table
from components.metrics.stats import Estimate, bootstrap_ci, spearman_ci
from paperflows.claims import ClaimSpec, Gate, decide, gate, superiority
from paperflows.contract import StageContext, stage
from paperflows.report import REPORT_TIMINGS, Check, Claim, Report
from paperflows.rows import rows_where
from pipelines.nutribench.params import (
    BASELINE_STRATEGIES,
    LLM_STRATEGIES,
    MIN_ANSWER_RATE,
    PAPER_LLAMA31_8B,
    SERVING_TYPES,
    TRUE_BOLUS,
    NutribenchParams,
)
from pipelines.nutribench.pipeline import CURATION, ESTIMATION, REPORT, RISK, RISK_ROWS, SCORES

COLUMNS = [
    "strategy",
    "n",
    "Acc@7.5",
    "Acc@7.5 95% CI",
    "MAE (g)",
    "answer rate",
    "Acc answered",
    "MAE answered (g)",
    "Acc@7.5 official",
    "Acc@7.5 LLM meals",
    "Acc natural",
    "Acc metric",
    "MAE natural",
    "MAE metric",
    "truncated",
    "looped",
    "cued",
    "answer rate before cue",
    "risk meals",
    "TIR",
    "TIR - true",
    "LBGI",
    "LBGI - true",
    "HBGI",
    "HBGI - true",
    "paper Acc@7.5 (Llama-3.1-8B)",
    "paper MAE (Llama-3.1-8B)",
]
PROMPTING_ORDER = ("rag", "cot", "base")  # claimed best first
BASELINE_ORDER = ("lookup", "ridge", "mean")
FLOOR = "mean"  # the training-mean predictor: the floor an LLM arm must beat
BOOTSTRAP_DRAWS = 2000

# The official README's Llama-3.1-8B numbers on v2 (brief section c): CoT − base = 0.3527 − 0.3301 on Acc@7.5, and
# MAE 37.17 g against 36.18 g (2.7 %): the only gaps between two strategies the paper's code reports
PAPER_ACC_GAP = PAPER_LLAMA31_8B["cot"][0] - PAPER_LLAMA31_8B["base"][0]
PAPER_MAE_CHANGE = PAPER_LLAMA31_8B["cot"][1] / PAPER_LLAMA31_8B["base"][1] - 1
_ACC_SOURCE = "official README (brief section c), Llama-3.1-8B on v2: CoT − base = 0.3527 − 0.3301 = 0.023 Acc@7.5"
RAG_COT_BASE_ACC = ClaimSpec(
    "rag_cot_base_acc",
    "RAG >= CoT >= base on Acc@7.5 for the same LLM",
    "min(Acc@7.5 gain of RAG over CoT, of CoT over base), paired bootstrap over meals",
    superiority(PAPER_ACC_GAP, _ACC_SOURCE),
    headline=True,
)
HEADLINE = (RAG_COT_BASE_ACC,)
RAG_COT_BASE_MAE = ClaimSpec(
    "rag_cot_base_mae",
    "RAG <= CoT <= base on MAE for the same LLM",
    "min(MAE of CoT / MAE of RAG, MAE of base / MAE of CoT), paired bootstrap over meals (log-ratios)",
    superiority(
        PAPER_MAE_CHANGE,
        "official README (brief section c), Llama-3.1-8B on v2: MAE 36.18 g (base) vs "
        "37.17 g (CoT), a 2.7 % difference",
    ),
)
LOOKUP_RIDGE_MEAN_ACC = ClaimSpec(
    "lookup_ridge_mean_acc",
    "Baselines: parse+lookup > ridge > mean on Acc@7.5",
    "min(Acc@7.5 gain of lookup over ridge, of ridge over mean), paired bootstrap over meals",
    superiority(
        PAPER_ACC_GAP,
        f"brief section d, claim 1 gives no size: {_ACC_SOURCE}, the smallest gap between "
        "two strategies the paper's code reports",
    ),
)


def ordering(
    series: Sequence[Sequence[float]], *, log_ratio: bool = False, seed: int = 0
) -> tuple[Estimate | None, list[Estimate | None]]:
    """The worst consecutive gain and each gain, with one paired bootstrap over the shared meals (the positions of
    the arrays; one draw resamples the same meals for every arm).

    A gain is ``mean(series[i] - series[i + 1])`` (scores: higher is better), or with ``log_ratio`` ``log(mean(
    series[i + 1]) / mean(series[i]))`` (errors: lower is better). None where it is undefined (no meals, an MAE
    of 0)."""
    arrays = [np.asarray(x, dtype=float) for x in series]
    n = len(arrays[0])
    if n == 0:
        return None, [None] * (len(arrays) - 1)

    def gains(idx: np.ndarray) -> list[float]:
        out = []
        for a, b in pairwise(arrays):
            if log_ratio:
                ma, mb = float(a[idx].mean()), float(b[idx].mean())
                out.append(math.log(mb / ma) if ma > 0 and mb > 0 else math.nan)
            else:
                out.append(float((a[idx] - b[idx]).mean()))
        return out

    point = gains(np.arange(n))

    def estimate(statistic: Any, value: float) -> Estimate | None:
        # the same seed draws the same meals for the joint and for each gain: one paired bootstrap
        return (
            Estimate.resampled(statistic, (n,), BOOTSTRAP_DRAWS, seed, log=log_ratio) if math.isfinite(value) else None
        )

    joint = estimate(lambda idx: min(gains(idx)), min(point) if all(map(math.isfinite, point)) else math.nan)
    return joint, [estimate(lambda idx, i=i: gains(idx)[i], v) for i, v in enumerate(point)]


def _shared(scores: list[dict[str, Any]], arms: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Each arm's per-meal rows on the meals every arm was asked, in the first arm's order (the LLM arms share
    their meals by design; the baselines answer every eval meal, a superset)."""
    by = {a: {r["meal_id"]: r for r in rows_where(scores, strategy=a)} for a in arms}
    meals = [m for m in by[arms[0]] if all(m in by[a] for a in arms)]
    return {a: [by[a][m] for m in meals] for a in arms}


def _text(est: Estimate | None, digits: int) -> str:
    if est is None:
        return "–"
    low, high = (est.shown(v) for v in (est.interval().low, est.interval().high))
    return f"{est.shown(est.estimate):.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _order_numbers(
    prefix: str, arms: Sequence[str], joint: Estimate | None, pairs: list[Estimate | None]
) -> dict[str, float]:
    out = {f"{prefix}_min_gain": joint.shown(joint.estimate) if joint else math.nan}
    for (a, b), est in zip(pairwise(arms), pairs):
        if est is not None:
            interval = est.interval()
            out |= {
                f"{prefix}_{a}_minus_{b}": est.shown(est.estimate),
                f"{prefix}_{a}_minus_{b}_low": est.shown(interval.low),
                f"{prefix}_{a}_minus_{b}_high": est.shown(interval.high),
            }
    return out


def _pairs_text(label: str, arms: Sequence[str], pairs: list[Estimate | None], digits: int) -> str:
    return "; ".join(f"{label} {a} vs {b} = {_text(e, digits)}" for (a, b), e in zip(pairwise(arms), pairs))


def floor_gate(scores: list[dict[str, Any]], metric: str) -> Gate:
    """Some LLM arm beats the training-mean predictor on the same meals: Acc@7.5 difference (``acc``) or the
    ratio MAE(mean) / MAE(arm) (``mae``). The passing arm with the largest effect (else the best failing one)."""
    if not rows_where(scores, strategy=FLOOR):
        return gate("best LLM arm", "training-mean predictor", None)
    rows = _shared(scores, (*PROMPTING_ORDER, FLOOR))
    key, log = ("hit", False) if metric == "acc" else ("abs_error", True)
    floor = [float(r[key]) for r in rows[FLOOR]]
    gates = []
    for arm in PROMPTING_ORDER:
        series = [float(r[key]) for r in rows[arm]]
        _, (est,) = ordering([series, floor], log_ratio=log)
        gates.append(
            gate(
                f"{arm} (best LLM arm)",
                "training-mean predictor",
                est,
                statistic="Acc@7.5 difference" if not log else "MAE(mean) / MAE(arm)",
            )
        )
    passed = [g for g in gates if g.passed]
    return max(passed or gates, key=lambda g: g.effect if math.isfinite(g.effect) else -math.inf)


def answer_rate_gates(scores: list[dict[str, Any]]) -> list[Gate]:
    """Every LLM arm answers at least ``MIN_ANSWER_RATE`` of its meals on the first pass (before the cue)."""
    rows = _shared(scores, PROMPTING_ORDER)
    out = []
    for arm in PROMPTING_ORDER:
        first = [float(r.get("answered_first", r["answered"])) for r in rows[arm]]
        x = np.asarray(first)
        est = Estimate.resampled(lambda idx: x[idx].mean(), (len(x),), BOOTSTRAP_DRAWS) if first else None
        out.append(
            gate(
                arm,
                f"answer rate {MIN_ANSWER_RATE:g} before the cue",
                est,
                margin=MIN_ANSWER_RATE,
                statistic="share of meals answered on the first pass",
            )
        )
    return out


def prompting_claims(scores: list[dict[str, Any]], lm: str) -> list[Claim]:
    """RAG >= CoT >= base on Acc@7.5 and on MAE (module docstring); ``scores`` are the per-meal rows."""
    rows = _shared(scores, PROMPTING_ORDER)
    rates = {a: float(np.mean([r["answered"] for r in rows[a]])) if rows[a] else 0.0 for a in PROMPTING_ORDER}
    first = {
        a: float(np.mean([r.get("answered_first", r["answered"]) for r in rows[a]])) if rows[a] else 0.0
        for a in PROMPTING_ORDER
    }
    answering = answer_rate_gates(scores)
    claims = []
    for spec, metric, key, label, unit, digits in (
        (RAG_COT_BASE_ACC, "acc", "hit", "Acc@7.5", "", 3),
        (RAG_COT_BASE_MAE, "mae", "abs_error", "MAE", " g", 2),
    ):
        series = [[float(r[key]) for r in rows[a]] for a in PROMPTING_ORDER]
        joint, pairs = ordering(series, log_ratio=metric == "mae")
        per_arm = {a: float(np.mean(x)) if x else math.nan for a, x in zip(PROMPTING_ORDER, series)}
        gates = [floor_gate(scores, metric), *answering]
        n = len(series[0])
        evidence = (
            f"{lm}; "
            + _pairs_text(
                label + (" gain" if metric == "acc" else " ratio (worse / better)"), PROMPTING_ORDER, pairs, digits
            )
            + "; "
            + ", ".join(f"{label} {a} {v:.{digits}f}{unit}" for a, v in per_arm.items())
            + f" on the same {n} meals (an abstention is a miss and counts |-1 - gt| in MAE); answer rate "
            + ", ".join(f"{a} {first[a]:.2f} before the cue, {rates[a]:.2f} after" for a in PROMPTING_ORDER)
        )
        numbers = {
            **{f"{metric}_{a}": v for a, v in per_arm.items()},
            **{f"answer_rate_{a}": rates[a] for a in PROMPTING_ORDER},
            **{f"answer_rate_first_{a}": first[a] for a in PROMPTING_ORDER},
            **_order_numbers(metric, PROMPTING_ORDER, joint, pairs),
        }
        if joint is None:
            claims.append(
                decide(
                    spec,
                    None,
                    gates=gates,
                    evidence=evidence,
                    numbers=numbers,
                    missing="no meal shared by the three LLM arms, or an MAE of 0",
                )
            )
        else:
            claims.append(decide(spec, joint, gates=gates, evidence=evidence, numbers=numbers))
    return claims


def risk_checks(risk_rows: list[dict[str, Any]]) -> tuple[list[Check], list[str]]:
    """Larger error -> more TIR lost; under-boluses raise HBGI; over-boluses raise LBGI (paired with the
    true-carb bolus of the same meal and patient). Properties of the simulator, so checks: each passes when its
    95 % interval lies above 0. Also the notes of the checks that had too few simulations to run."""
    est = [r for r in risk_rows if r["strategy"] != TRUE_BOLUS]
    err = np.array([bolus_carbs(r["estimate"]) - r["carb"] for r in est])
    tir_loss = np.array([r["tir_true"] - r["tir"] for r in est])
    d_hbgi = np.array([r["hbgi"] - r["hbgi_true"] for r in est])
    d_lbgi = np.array([r["lbgi"] - r["lbgi_true"] for r in est])
    under, over = err < 0, err > 0
    unit = "(strategy, meal, patient) simulations, treated as independent"
    checks, skipped = [], []
    if len(est) >= 2:
        rho = spearman_ci(np.abs(err), tir_loss)
        checks.append(
            Check(
                "error_worsens_tir",
                "Larger carb error -> more time in range lost (Spearman rho of "
                "|bolus carbs - true carbs| vs TIR lost > 0; a property of the UVa/Padova model)",
                passed=rho.low > 0,
                evidence=f"rho = {rho.estimate:.3f} [{rho.low:.3f}, {rho.high:.3f}] "
                f"over {len(est)} {unit}; an unknown answer is no bolus",
                numbers={"spearman": rho.estimate, "low": rho.low, "high": rho.high},
            )
        )
    else:
        skipped.append("error_worsens_tir")
    for cid, text, d, mask, what in (
        (
            "underestimate_raises_hbgi",
            "Underestimating the carbs raises HBGI (vs the true-carb bolus)",
            d_hbgi,
            under,
            "underestimated",
        ),
        (
            "overestimate_raises_lbgi",
            "Overestimating the carbs raises LBGI (vs the true-carb bolus)",
            d_lbgi,
            over,
            "overestimated",
        ),
    ):
        if mask.sum() < 2:
            skipped.append(cid)
            continue
        change = bootstrap_ci(d[mask])
        checks.append(
            Check(
                cid,
                f"{text}; a property of the UVa/Padova model",
                passed=change.low > 0,
                evidence=f"mean paired change {change.estimate:+.3f} [{change.low:+.3f}, "
                f"{change.high:+.3f}] over {int(mask.sum())} {what} {unit}",
                numbers={"change": change.estimate, "n": float(mask.sum())},
            )
        )
    notes = [f"Risk check(s) {', '.join(skipped)} not run: fewer than 2 simulations of that kind."] if skipped else []
    return checks, notes


def baseline_order(scores: list[dict[str, Any]], curated: bool) -> Claim | Check:
    """Parse+lookup > ridge > mean on Acc@7.5: a check on curated meals, a claim on a real file."""
    rows = _shared(scores, BASELINE_ORDER)
    series = [[float(r["hit"]) for r in rows[a]] for a in BASELINE_ORDER]
    joint, pairs = ordering(series)
    numbers = {
        **{f"acc_{a}": float(np.mean(x)) if x else math.nan for a, x in zip(BASELINE_ORDER, series)},
        **_order_numbers("acc", BASELINE_ORDER, joint, pairs),
    }
    evidence = (
        f"min(Acc@7.5 lookup - ridge, ridge - mean) = {_text(joint, 3)}; "
        + _pairs_text("Acc@7.5 gain", BASELINE_ORDER, pairs, 3)
        + " (paired bootstrap over the eval meals)"
    )
    if curated:
        return Check(
            "lookup_ridge_mean_curated",
            "On curated meals parse+lookup > ridge > mean on Acc@7.5 (the lookup reads the food table and "
            "household weights the labels were computed from: this checks the curation and the parser)",
            passed=joint is not None and joint.interval().low > 0,
            evidence=evidence,
            numbers=numbers,
        )
    if joint is None:
        return decide(LOOKUP_RIDGE_MEAN_ACC, None, missing="no eval meal shared by the three baselines")
    return decide(LOOKUP_RIDGE_MEAN_ACC, joint, evidence=evidence, numbers=numbers)


def accuracy_rows(
    p: NutribenchParams, estimation: dict[str, Any], scores: list[dict[str, Any]], risk: dict[str, Any]
) -> list[dict[str, Any]]:
    """The paper-shaped table: one row per strategy, then the true-carb arm."""
    llm = [s for s in p.estimate.strategies if s in LLM_STRATEGIES]
    llm_meals = {r["meal_id"] for r in rows_where(scores, strategy=llm[0])} if llm else set()
    table = []
    for s in p.estimate.strategies:
        m, arm = estimation[s], risk[s]
        mine = rows_where(scores, strategy=s)
        on_llm = [r["hit"] for r in mine if r["meal_id"] in llm_meals]
        acc = bootstrap_ci([float(r["hit"]) for r in mine])
        is_llm = s in LLM_STRATEGIES
        row: dict[str, Any] = {
            "strategy": s,
            "n": int(m["all"]["n"]),
            "Acc@7.5": m["all"]["acc_7_5"],
            "Acc@7.5 95% CI": f"[{acc.low:.3f}, {acc.high:.3f}]",
            "MAE (g)": m["all"]["mae"],
            "answer rate": m["all"]["answer_rate"],
            "Acc answered": m["all"]["acc_answered"],
            "MAE answered (g)": m["all"]["mae_answered"],
            "Acc@7.5 official": m["all"]["acc_7_5_official"],
            "Acc@7.5 LLM meals": float(np.mean(on_llm)) if on_llm else None,
            "truncated": m["truncated_share"] if is_llm else None,
            "looped": m.get("looped_share") if is_llm else None,
            "cued": m.get("completed_share") if is_llm else None,
            "answer rate before cue": m.get("answer_rate_first") if is_llm else None,
            "risk meals": arm["meals"],
            "TIR": arm["tir"],
            "TIR - true": arm["tir_minus_true"],
            "LBGI": arm["lbgi"],
            "LBGI - true": arm["lbgi_minus_true"],
            "HBGI": arm["hbgi"],
            "HBGI - true": arm["hbgi_minus_true"],
            "paper Acc@7.5 (Llama-3.1-8B)": PAPER_LLAMA31_8B.get(s, (None, None))[0],
            "paper MAE (Llama-3.1-8B)": PAPER_LLAMA31_8B.get(s, (None, None))[1],
        }
        for serving in SERVING_TYPES:
            row[f"Acc {serving}"] = m.get(serving, {}).get("acc_7_5")
            row[f"MAE {serving}"] = m.get(serving, {}).get("mae")
        table.append(row)
    true_arm = risk[TRUE_BOLUS]
    table.append(
        {
            "strategy": TRUE_BOLUS,
            "risk meals": true_arm["meals"],
            "TIR": true_arm["tir"],
            "LBGI": true_arm["lbgi"],
            "HBGI": true_arm["hbgi"],
        }
    )
    return table


def notes(p: NutribenchParams, curation: dict[str, Any], estimation: dict[str, Any], risk: dict[str, Any]) -> list[str]:
    llm_n = sorted({int(estimation[s]["all"]["n"]) for s in p.estimate.strategies if s in LLM_STRATEGIES})
    origin = (
        f"from {p.data.path}"
        if p.data.path
        else f"curated from {curation['foods']} foods ({', '.join(p.data.sources)})"
    )
    gap = risk.get("reference_max_abs_dbg_mg_dl")
    reference = (
        ""
        if gap is None
        else f"; batched integrator vs simglucose's T1DPatient on the plotted case: max |dBG| = {gap:.2e} mg/dL"
    )
    r, ran = p.risk, [s for s in p.estimate.strategies if s in risk]
    return [
        (
            f"Benchmark: {curation['meals']} meals ({curation['eval_meals']} eval) {origin}; mean carbs "
            f"{curation['carb_mean_g']:.1f} g, median {curation['carb_median_g']:.1f} g."
        ),
        (
            f"LLM strategies ({p.estimate.lm_used}, greedy, chat template, {p.estimate.few_shot} worked examples) "
            f"answer the same {', '.join(map(str, llm_n)) or '-'} eval meals; baselines answer all eval meals "
            f"('Acc@7.5 LLM meals': every strategy on the LLM meals). Worked examples: the "
            f"'{p.estimate.prompt_set}' set. Budgets: "
            f"base {p.estimate.max_new_tokens} tokens, CoT/RAG {p.estimate.cot_max_new_tokens} tokens ('truncated' = "
            f"share of answers the budget cut; 'looped' = share ended in a greedy loop, their last "
            f"{p.estimate.loop_tokens} tokens repeating an earlier run). An answer that states no number is "
            f"continued once with its reasoning so far and the answer-line cue, {p.estimate.completion_tokens} tokens "
            "('cued' = share of meals that needed it, "
            f"'answer rate before cue' = the answer rate without it); an explicit -1 stays an abstention."
        ),
        (
            "Acc@7.5 counts an unknown (-1) answer as a miss; 'Acc@7.5 official' scores it as the number -1 as the "
            "official process_results does, which credits it on every meal under 6.5 g. MAE is lower-is-better (the "
            "official task YAML marks it higher_is_better, a known error) and counts -1 as the estimate; an unknown "
            "answer is no bolus in the risk study. 'Acc answered': Acc@7.5 over the answered meals."
        ),
        (
            f"Risk: up to {r.meals} answered meals per strategy, the meals all strategies answered first ('risk "
            f"meals') x {risk['patients']} virtual patients; '- true' columns are paired differences against the bolus "
            f"on the true carbs for the same meal and patient; basal u2ss*BW/6000 U/min, bolus = min(max(estimate, 0) "
            f"/ CR, {r.max_bolus_u:g} U pump limit) at t = {r.meal_time_min} min, {r.duration_min} min simulated; "
            f"readings reported within the CGM range {SENSOR_RANGE[0]:g}-{SENSOR_RANGE[1]:g} mg/dL; TIR {r.tir_low:g}-"
            f"{r.tir_high:g} mg/dL, LBGI/HBGI ({r.risk_convention} averaging){reference}. Capped boluses per strategy: "
            + ", ".join(f"{s} {risk[s]['capped_boluses']}" for s in ran)
            + "; readings below the sensor range: "
            + ", ".join(f"{s} {risk[s]['readings_below_sensor']}" for s in ran)
            + "."
        ),
        (
            "The risk checks' intervals treat the simulations as independent; the patients of one meal share its "
            "estimate error, so they are narrower than a bootstrap over meals would be. The prompting claims' answer-"
            "rate gates use the first pass (before the cue)."
        ),
        (
            "The lookup baseline and the RAG prompt read the same food table and household weights the curated "
            "labels were computed from, so on curated meals their remaining errors come from parsing and retrieval."
        ),
        (
            "Paper columns: Llama-3.1-8B-Instruct on NutriBench v2 (official README); not comparable in absolute "
            "value with a 135M-parameter model on curated meals."
        ),
    ]


def build_report(
    p: NutribenchParams,
    curation: dict[str, Any],
    estimation: dict[str, Any],
    scores: list[dict[str, Any]],
    risk: dict[str, Any],
    risk_rows: list[dict[str, Any]],
) -> Report:
    """The report from the loaded tables: ``estimation``/``risk`` are the metrics files, ``scores`` the per-meal
    rows ``{strategy, meal_id, answered, answered_first, hit, abs_error, ...}``, ``risk_rows`` the per-simulation
    rows."""
    ran = set(p.estimate.strategies)
    if set(LLM_STRATEGIES) <= ran:
        claims = prompting_claims(scores, p.estimate.lm_used)
    else:
        missing = f"the LLM strategies {', '.join(LLM_STRATEGIES)} are not all in estimate.strategies"
        claims = [decide(RAG_COT_BASE_ACC, None, missing=missing), decide(RAG_COT_BASE_MAE, None, missing=missing)]
    checks, risk_notes = risk_checks(risk_rows)
    if set(BASELINE_STRATEGIES) <= ran:
        found = baseline_order(scores, curated=p.data.path is None)
        if isinstance(found, Check):
            checks.insert(0, found)
        else:
            claims.append(found)
    return Report(
        slug="nutribench",
        title="NutriBench: carbohydrate estimation from meal descriptions (Acc@7.5, MAE) "
        "and T1D glucose risk of the resulting boluses",
        columns=COLUMNS,
        rows=accuracy_rows(p, estimation, scores, risk),
        claims=claims,
        checks=checks,
        notes=notes(p, curation, estimation, risk) + risk_notes,
    )


# --------------------------------------------------------------------------------------------------
# the paper-shaped table and the claims
# --------------------------------------------------------------------------------------------------
@stage(
    params=("data", "estimate", "risk"),
    deps=(CURATION, ESTIMATION, SCORES, RISK, RISK_ROWS),
    outs=(REPORT,),
    timings=REPORT_TIMINGS,
)
def report(ctx: StageContext) -> None:
    """Accuracy + risk table per strategy, the paper's numbers beside ours, and the claims."""
    build_report(
        ctx.params,
        load_json(ctx.path(CURATION)),
        load_json(ctx.path(ESTIMATION)),
        load_table(ctx.path(SCORES)),
        load_json(ctx.path(RISK)),
        load_table(ctx.path(RISK_ROWS)),
    ).save(ctx.path(REPORT))
