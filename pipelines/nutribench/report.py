"""NutriBench's table and claims, as pure functions of the loaded tables (no file I/O).

* The table: one row per strategy (Acc@7.5, MAE, answer rate, natural/metric split, the risk study's TIR,
  LBGI, HBGI and their paired differences against the true-carb bolus), the official Llama-3.1-8B numbers
  beside, and the true-carb arm.
* The prompting claims (RAG >= CoT >= base on Acc@7.5 and on MAE) are decided on the worse of the two
  consecutive gains, min(RAG - CoT, CoT - base), with a paired bootstrap over the meals all three arms
  answered (one benchmark, greedy decoding: the meals are the replicates). An abstention is never a hit;
  the claims need every arm to answer at least ``MIN_ANSWER_RATE`` of the meals, otherwise they compare
  how often the arms abstain and come out *not resolved*.
* The risk claims: Spearman's rho of |bolus carbs - true carbs| against the TIR lost (bootstrap over
  simulations), and the paired HBGI (LBGI) change of under- (over-)estimated boluses.
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
from components.metrics.stats import Interval, bootstrap_ci, spearman_ci
from paperflows.report import (
    Check,
    Claim,
    Precondition,
    Report,
    decide,
    fmt_interval,
    rows_where,
)
from pipelines.nutribench.params import (
    BASELINE_STRATEGIES,
    LLM_STRATEGIES,
    MIN_ANSWER_RATE,
    PAPER_LLAMA31_8B,
    SERVING_TYPES,
    TRUE_BOLUS,
    NutribenchParams,
)

COLUMNS = ["strategy", "n", "Acc@7.5", "Acc@7.5 95% CI", "MAE (g)", "answer rate", "Acc answered",
           "MAE answered (g)", "Acc@7.5 official", "Acc@7.5 LLM meals", "Acc natural", "Acc metric", "MAE natural",
           "MAE metric", "truncated", "looped", "cued", "answer rate before cue", "risk meals",
           "TIR", "TIR - true", "LBGI", "LBGI - true", "HBGI", "HBGI - true", "paper Acc@7.5 (Llama-3.1-8B)",
           "paper MAE (Llama-3.1-8B)"]
PROMPTING_ORDER = ("rag", "cot", "base")      # claimed best first
BASELINE_ORDER = ("lookup", "ridge", "mean")
NO_INTERVAL = Interval(float("nan"), -math.inf, math.inf, 0)


def ordering(series: Sequence[np.ndarray]) -> tuple[Interval, list[Interval]]:
    """``min_i mean(series[i] - series[i + 1])`` (> 0: each arm beats the next) with a paired bootstrap over
    the shared meals (the positions of the arrays), and the interval of each consecutive difference."""
    diffs = [np.asarray(a, dtype=float) - np.asarray(b, dtype=float) for a, b in pairwise(series)]
    n = len(diffs[0])
    if n == 0:
        return NO_INTERVAL, [NO_INTERVAL for _ in diffs]

    def worst(positions: np.ndarray) -> float:   # resampled meal positions: one draw pairs all arms
        picked = positions.astype(int)
        return min(float(d[picked].mean()) for d in diffs)

    return bootstrap_ci(np.arange(n, dtype=float), worst), [bootstrap_ci(d) for d in diffs]


def _shared(scores: list[dict[str, Any]], arms: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Each arm's per-meal rows on the meals every arm answered, in the first arm's order."""
    by = {a: {r["meal_id"]: r for r in rows_where(scores, strategy=a)} for a in arms}
    meals = [m for m in by[arms[0]] if all(m in by[a] for a in arms)]
    return {a: [by[a][m] for m in meals] for a in arms}


def _order_numbers(prefix: str, arms: Sequence[str], joint: Interval, pairs: list[Interval]) -> dict[str, float]:
    out = {f"{prefix}_min_gain": joint.estimate}
    for (a, b), interval in zip(pairwise(arms), pairs):
        out |= {f"{prefix}_{a}_minus_{b}": interval.estimate, f"{prefix}_{a}_minus_{b}_low": interval.low,
                f"{prefix}_{a}_minus_{b}_high": interval.high}
    return out


def _pairs_text(label: str, arms: Sequence[str], pairs: list[Interval], digits: int) -> str:
    return "; ".join(f"{label} {a} - {b} = {fmt_interval(i, digits)}" for (a, b), i in zip(pairwise(arms), pairs))


def prompting_claims(scores: list[dict[str, Any]], lm: str) -> list[Claim]:
    """RAG >= CoT >= base on Acc@7.5 and on MAE (module docstring); ``scores`` are the per-meal rows."""
    rows = _shared(scores, PROMPTING_ORDER)
    rates = {a: float(np.mean([r["answered"] for r in rows[a]])) if rows[a] else 0.0 for a in PROMPTING_ORDER}
    lowest = min(rates.values())
    precondition = Precondition(
        f"every LLM arm answers >= {MIN_ANSWER_RATE:.0%} of the meals (answer rates "
        + ", ".join(f"{a} {rates[a]:.2f}" for a in PROMPTING_ORDER) + ")", met=lowest >= MIN_ANSWER_RATE, value=lowest)
    claims = []
    for metric, key, sign, label, unit, digits in (("acc", "hit", 1.0, "Acc@7.5", "", 3),
                                                   ("mae", "abs_error", -1.0, "MAE", " g", 2)):
        series = [sign * np.array([float(r[key]) for r in rows[a]]) for a in PROMPTING_ORDER]
        joint, pairs = ordering(series)
        gain = "Acc@7.5 gain" if sign > 0 else "MAE reduction (g)"
        per_arm = {a: float(np.mean(s)) * sign if len(s) else float("nan") for a, s in zip(PROMPTING_ORDER, series)}
        claims.append(decide(
            f"rag_cot_base_{metric}", f"RAG >= CoT >= base on {label} for the same LLM ({lm})",
            f"min({gain} of RAG over CoT, of CoT over base), paired bootstrap over meals", joint,
            evidence=(_pairs_text(label + " gain" if sign > 0 else "MAE reduction", PROMPTING_ORDER, pairs, digits)
                      + "; " + ", ".join(f"{label} {a} {v:.{digits}f}{unit}" for a, v in per_arm.items())
                      + f" on the same {joint.n} meals (an abstention is a miss and counts |-1 - gt| in MAE)"),
            numbers={**{f"{metric}_{a}": v for a, v in per_arm.items()},
                     **{f"answer_rate_{a}": rates[a] for a in PROMPTING_ORDER},
                     **_order_numbers(metric, PROMPTING_ORDER, joint, pairs)},
            precondition=precondition))
    return claims


def risk_claims(risk_rows: list[dict[str, Any]]) -> list[Claim]:
    """Larger error -> more TIR lost; under-boluses raise HBGI; over-boluses raise LBGI (paired with the
    true-carb bolus of the same meal and patient)."""
    est = [r for r in risk_rows if r["strategy"] != TRUE_BOLUS]
    err = np.array([bolus_carbs(r["estimate"]) - r["carb"] for r in est])
    tir_loss = np.array([r["tir_true"] - r["tir"] for r in est])
    d_hbgi = np.array([r["hbgi"] - r["hbgi_true"] for r in est])
    d_lbgi = np.array([r["lbgi"] - r["lbgi_true"] for r in est])
    under, over = err < 0, err > 0
    rho = spearman_ci(np.abs(err), tir_loss) if len(est) >= 2 else NO_INTERVAL

    def paired(d: np.ndarray) -> Interval:
        return bootstrap_ci(d) if d.size else NO_INTERVAL

    hbgi_under, lbgi_over = paired(d_hbgi[under]), paired(d_lbgi[over])
    side = {"lbgi_change_under": paired(d_lbgi[under]).estimate, "hbgi_change_over": paired(d_hbgi[over]).estimate}
    unit = f"(strategy, meal, patient) simulations, {int(under.sum())} under- and {int(over.sum())} over-estimates"
    return [
        decide("error_worsens_tir", "Larger carb error -> worse time in range",
               "Spearman rho of |bolus carbs - true carbs| vs TIR lost, bootstrap over simulations", rho,
               evidence=f"{len(est)} {unit}; an unknown answer is no bolus", numbers={"spearman": rho.estimate}),
        decide("underestimate_raises_hbgi", "Underestimating the carbs raises HBGI (vs the true-carb bolus)",
               "mean paired HBGI change of the underestimated boluses", hbgi_under,
               evidence=f"{hbgi_under.n} underestimated simulations; their mean LBGI change "
                        f"{side['lbgi_change_under']:+.3f}",
               numbers={"hbgi_change_under": hbgi_under.estimate, "n_under": float(under.sum()), **side}),
        decide("overestimate_raises_lbgi", "Overestimating the carbs raises LBGI (vs the true-carb bolus)",
               "mean paired LBGI change of the overestimated boluses", lbgi_over,
               evidence=f"{lbgi_over.n} overestimated simulations; their mean HBGI change "
                        f"{side['hbgi_change_over']:+.3f}",
               numbers={"lbgi_change_over": lbgi_over.estimate, "n_over": float(over.sum()), **side}),
    ]


def baseline_order(scores: list[dict[str, Any]], curated: bool) -> Claim | Check:
    """Parse+lookup > ridge > mean on Acc@7.5: a check on curated meals, a claim on a real file."""
    rows = _shared(scores, BASELINE_ORDER)
    series = [np.array([float(r["hit"]) for r in rows[a]]) for a in BASELINE_ORDER]
    joint, pairs = ordering(series)
    numbers = {**{f"acc_{a}": float(s.mean()) if len(s) else float("nan") for a, s in zip(BASELINE_ORDER, series)},
               **_order_numbers("acc", BASELINE_ORDER, joint, pairs)}
    evidence = (f"min(Acc@7.5 lookup - ridge, ridge - mean) = {fmt_interval(joint)}; "
                + _pairs_text("Acc@7.5", BASELINE_ORDER, pairs, 3) + " (paired bootstrap over the eval meals)")
    if curated:
        return Check("lookup_ridge_mean_curated",
                     "On curated meals parse+lookup > ridge > mean on Acc@7.5 (the lookup reads the food table and "
                     "household weights the labels were computed from: this checks the curation and the parser)",
                     passed=joint.low > 0, evidence=evidence, numbers=numbers)
    return decide("lookup_ridge_mean_acc", "Baselines: parse+lookup > ridge > mean on Acc@7.5",
                  "min(Acc@7.5 gain of lookup over ridge, of ridge over mean), paired bootstrap over meals", joint,
                  evidence=_pairs_text("Acc@7.5", BASELINE_ORDER, pairs, 3), numbers=numbers)


def accuracy_rows(p: NutribenchParams, estimation: dict[str, Any], scores: list[dict[str, Any]],
                  risk: dict[str, Any]) -> list[dict[str, Any]]:
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
            "strategy": s, "n": int(m["all"]["n"]), "Acc@7.5": m["all"]["acc_7_5"],
            "Acc@7.5 95% CI": f"[{acc.low:.3f}, {acc.high:.3f}]", "MAE (g)": m["all"]["mae"],
            "answer rate": m["all"]["answer_rate"], "Acc answered": m["all"]["acc_answered"],
            "MAE answered (g)": m["all"]["mae_answered"], "Acc@7.5 official": m["all"]["acc_7_5_official"],
            "Acc@7.5 LLM meals": float(np.mean(on_llm)) if on_llm else None,
            "truncated": m["truncated_share"] if is_llm else None, "looped": m.get("looped_share") if is_llm else None,
            "cued": m.get("completed_share") if is_llm else None,
            "answer rate before cue": m.get("answer_rate_first") if is_llm else None, "risk meals": arm["meals"],
            "TIR": arm["tir"], "TIR - true": arm["tir_minus_true"], "LBGI": arm["lbgi"],
            "LBGI - true": arm["lbgi_minus_true"], "HBGI": arm["hbgi"], "HBGI - true": arm["hbgi_minus_true"],
            "paper Acc@7.5 (Llama-3.1-8B)": PAPER_LLAMA31_8B.get(s, (None, None))[0],
            "paper MAE (Llama-3.1-8B)": PAPER_LLAMA31_8B.get(s, (None, None))[1]}
        for serving in SERVING_TYPES:
            row[f"Acc {serving}"] = m.get(serving, {}).get("acc_7_5")
            row[f"MAE {serving}"] = m.get(serving, {}).get("mae")
        table.append(row)
    true_arm = risk[TRUE_BOLUS]
    table.append({"strategy": TRUE_BOLUS, "risk meals": true_arm["meals"], "TIR": true_arm["tir"],
                  "LBGI": true_arm["lbgi"], "HBGI": true_arm["hbgi"]})
    return table


def notes(p: NutribenchParams, curation: dict[str, Any], estimation: dict[str, Any], risk: dict[str, Any]
          ) -> list[str]:
    llm_n = sorted({int(estimation[s]["all"]["n"]) for s in p.estimate.strategies if s in LLM_STRATEGIES})
    origin = (f"from {p.data.path}" if p.data.path
              else f"curated from {curation['foods']} foods ({', '.join(p.data.sources)})")
    gap = risk.get("reference_max_abs_dbg_mg_dl")
    reference = ("" if gap is None else
                 f"; batched integrator vs simglucose's T1DPatient on the plotted case: max |dBG| = {gap:.2e} mg/dL")
    r, ran = p.risk, [s for s in p.estimate.strategies if s in risk]
    return [
        (f"Benchmark: {curation['meals']} meals ({curation['eval_meals']} eval) {origin}; mean carbs "
         f"{curation['carb_mean_g']:.1f} g, median {curation['carb_median_g']:.1f} g."),
        (f"LLM strategies ({p.estimate.lm}, greedy, chat template, {p.estimate.few_shot} worked examples) answer the "
         f"same {', '.join(map(str, llm_n)) or '-'} eval meals; baselines answer all eval meals ('Acc@7.5 LLM meals': "
         f"every strategy on the LLM meals). Worked examples: the '{p.estimate.prompt_set}' set. Budgets: base "
         f"{p.estimate.max_new_tokens} tokens, CoT/RAG {p.estimate.cot_max_new_tokens} tokens ('truncated' = share "
         f"of answers the budget cut; 'looped' = share ended in a greedy loop, their last "
         f"{p.estimate.loop_tokens} tokens repeating an earlier run). An answer that states no number is "
         f"continued once with its reasoning so far and the answer-line cue, {p.estimate.completion_tokens} tokens ('cued' = share of meals that needed it, "
         f"'answer rate before cue' = the answer rate without it); an explicit -1 stays an abstention."),
        ("Acc@7.5 counts an unknown (-1) answer as a miss; 'Acc@7.5 official' scores it as the number -1 as the "
         "official process_results does, which credits it on every meal under 6.5 g. MAE is lower-is-better (the "
         "official task YAML marks it higher_is_better, a known error) and counts -1 as the estimate; an unknown "
         "answer is no bolus in the risk study. 'Acc answered': Acc@7.5 over the answered meals."),
        (f"Risk: up to {r.meals} answered meals per strategy, the meals all strategies answered first ('risk meals') "
         f"x {risk['patients']} virtual patients; '- true' columns are paired differences against the bolus on the "
         f"true carbs for the same meal and patient; basal u2ss*BW/6000 U/min, bolus = min(max(estimate, 0) / CR, "
         f"{r.max_bolus_u:g} U pump limit) at t = {r.meal_time_min} min, {r.duration_min} min simulated; readings "
         f"reported within the CGM range {SENSOR_RANGE[0]:g}-{SENSOR_RANGE[1]:g} mg/dL; TIR {r.tir_low:g}-"
         f"{r.tir_high:g} mg/dL, LBGI/HBGI ({r.risk_convention} averaging){reference}. Capped boluses per strategy: "
         + ", ".join(f"{s} {risk[s]['capped_boluses']}" for s in ran) + "; readings below the sensor range: "
         + ", ".join(f"{s} {risk[s]['readings_below_sensor']}" for s in ran) + "."),
        ("The risk intervals treat the simulations as independent; the patients of one meal share its estimate "
         "error, so they are narrower than a bootstrap over meals would be."),
        ("The lookup baseline and the RAG prompt read the same food table and household weights the curated "
         "labels were computed from, so on curated meals their remaining errors come from parsing and retrieval."),
        ("Paper columns: Llama-3.1-8B-Instruct on NutriBench v2 (official README); not comparable in absolute "
         "value with a 135M-parameter model on curated meals."),
    ]


def build_report(p: NutribenchParams, curation: dict[str, Any], estimation: dict[str, Any],
                 scores: list[dict[str, Any]], risk: dict[str, Any], risk_rows: list[dict[str, Any]]) -> Report:
    """The report from the loaded tables: ``estimation``/``risk`` are the metrics files, ``scores`` the per-meal
    rows ``{strategy, meal_id, answered, hit, abs_error, ...}``, ``risk_rows`` the per-simulation rows."""
    ran = set(p.estimate.strategies)
    claims: list[Claim] = []
    checks: list[Check] = []
    if set(LLM_STRATEGIES) <= ran:
        claims += prompting_claims(scores, p.estimate.lm)
    claims += risk_claims(risk_rows)
    if set(BASELINE_STRATEGIES) <= ran:
        found = baseline_order(scores, curated=p.data.path is None)
        (checks if isinstance(found, Check) else claims).append(found)
    return Report(slug="nutribench", title="NutriBench: carbohydrate estimation from meal descriptions (Acc@7.5, MAE) "
                                           "and T1D glucose risk of the resulting boluses",
                  columns=COLUMNS, rows=accuracy_rows(p, estimation, scores, risk), claims=claims, checks=checks,
                  notes=notes(p, curation, estimation, risk))
