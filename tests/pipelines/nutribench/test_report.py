"""NutriBench's claims and checks on constructed numbers: every verdict, and the answer-rate precondition."""

from __future__ import annotations

from typing import Any

import pytest

from paperflows.report import Check, Claim
from pipelines.nutribench.params import STRATEGIES, TRUE_BOLUS, NutribenchParams
from pipelines.nutribench.report import (
    baseline_order,
    build_report,
    ordering,
    prompting_claims,
    risk_claims,
)

N = 60


def _arm(strategy: str, hits: int, error: float, answered: int = N, offset: int = 0) -> list[dict[str, Any]]:
    """N meals m00.. of one arm: the first ``hits`` are hits, the first ``answered`` are answered."""
    return [{"strategy": strategy, "meal_id": f"m{i + offset:02d}", "serving_type": ("natural", "metric")[i % 2],
             "carb": 30.0, "pred": 30.0, "truncated": False, "answered": i < answered, "hit": i < hits and i < answered,
             "abs_error": error + (i % 5)} for i in range(N)]


def _llm(hits: dict[str, int], errors: dict[str, float], answered: dict[str, int] | None = None
         ) -> list[dict[str, Any]]:
    return [row for s in ("base", "cot", "rag") for row in _arm(s, hits[s], errors[s], (answered or {}).get(s, N))]


def _verdicts(claims: list[Claim]) -> dict[str, str]:
    return {c.id: c.verdict for c in claims}


def test_ordering_is_the_worse_of_the_consecutive_paired_gains() -> None:
    joint, pairs = ordering([[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]])
    assert joint.estimate == pytest.approx(0.25) and [p.estimate for p in pairs] == [0.25, 0.25]
    joint, _ = ordering([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0]])
    assert joint.estimate == pytest.approx(-0.25) and joint.n == 4


def test_prompting_order_holds_when_each_arm_clearly_beats_the_next() -> None:
    claims = prompting_claims(_llm({"rag": 55, "cot": 35, "base": 15}, {"rag": 2.0, "cot": 6.0, "base": 12.0}), "x")
    assert _verdicts(claims) == {"rag_cot_base_acc": "holds", "rag_cot_base_mae": "holds"}
    acc = claims[0]
    assert acc.effect == pytest.approx(20 / N) and acc.ci[0] > 0 and acc.n == N
    assert acc.numbers["acc_rag"] == pytest.approx(55 / N) and acc.precondition.met
    assert claims[1].numbers["mae_base"] == pytest.approx(14.0) and claims[1].effect == pytest.approx(4.0)


def test_prompting_order_does_not_hold_when_base_is_clearly_best() -> None:
    claims = prompting_claims(_llm({"rag": 10, "cot": 30, "base": 50}, {"rag": 12.0, "cot": 6.0, "base": 2.0}), "x")
    assert _verdicts(claims) == {"rag_cot_base_acc": "does not hold", "rag_cot_base_mae": "does not hold"}
    assert claims[0].ci[1] < 0


def test_prompting_order_is_not_resolved_by_a_one_meal_difference() -> None:
    claims = prompting_claims(_llm({"rag": 31, "cot": 30, "base": 29}, {"rag": 5.0, "cot": 5.0, "base": 5.0}), "x")
    assert _verdicts(claims) == {"rag_cot_base_acc": "not resolved", "rag_cot_base_mae": "not resolved"}
    assert claims[0].ci[0] <= 0 <= claims[0].ci[1]


def test_an_arm_that_mostly_abstains_leaves_the_prompting_claims_not_resolved() -> None:
    """The hits are clearly ordered, but base answers only half of the meals: the precondition fails."""
    rows = _llm({"rag": 55, "cot": 35, "base": 15}, {"rag": 2.0, "cot": 6.0, "base": 12.0}, answered={"base": 30})
    claims = prompting_claims(rows, "x")
    assert _verdicts(claims) == {"rag_cot_base_acc": "not resolved", "rag_cot_base_mae": "not resolved"}
    assert claims[0].precondition is not None and not claims[0].precondition.met
    assert claims[0].precondition.value == pytest.approx(0.5) and "precondition not met" in claims[0].evidence


def test_abstentions_are_not_hits_in_the_prompting_claims() -> None:
    """base abstains on meals 48..59; its rows say hit=False there, so base's accuracy is 48/60, not 60/60."""
    rows = _llm({"rag": 60, "cot": 54, "base": 60}, {"rag": 1.0, "cot": 2.0, "base": 3.0}, answered={"base": 48})
    claims = prompting_claims(rows, "x")
    assert claims[0].numbers["acc_base"] == pytest.approx(48 / N)
    assert claims[0].numbers["acc_cot_minus_base"] == pytest.approx(6 / N)


def _risk_rows(errors: list[float], tir_loss: float, dh: float, dl: float) -> list[dict[str, Any]]:
    """One simulation per error: TIR lost = tir_loss * |e|, HBGI + dh * underestimate, LBGI + dl * overestimate."""
    rows = [{"strategy": TRUE_BOLUS, "meal_id": "m", "carb": 50.0, "estimate": 50.0, "tir": 0.9, "tir_true": 0.9,
             "hbgi": 1.0, "hbgi_true": 1.0, "lbgi": 0.5, "lbgi_true": 0.5}]
    for i, e in enumerate(errors):
        est = 50.0 + e if e > -50 else -1.0   # an unknown answer: no bolus
        rows.append({"strategy": "ridge", "meal_id": f"m{i}", "carb": 50.0, "estimate": est,
                     "tir": 0.9 - tir_loss * abs(e), "tir_true": 0.9, "hbgi": 1.0 + dh * max(-e, 0.0),
                     "hbgi_true": 1.0, "lbgi": 0.5 + dl * max(e, 0.0), "lbgi_true": 0.5})
    return rows


ERRORS = [float(e) for e in range(-20, 21) if e != 0] + [-50.0]


def test_risk_claims_hold_on_a_monotone_cohort() -> None:
    claims = risk_claims(_risk_rows(ERRORS, 0.01, 0.1, 0.1))
    assert _verdicts(claims) == {"error_worsens_tir": "holds", "underestimate_raises_hbgi": "holds",
                                 "overestimate_raises_lbgi": "holds"}
    assert claims[0].effect == pytest.approx(1.0) and claims[0].n == len(ERRORS)
    # the unknown answer (-1) is an underestimate by the whole meal: 21 underestimates, 20 overestimates
    assert claims[1].numbers["n_under"] == 21 and claims[2].numbers["n_over"] == 20


def test_risk_claims_do_not_hold_when_errors_help() -> None:
    claims = risk_claims(_risk_rows(ERRORS, -0.01, -0.1, -0.1))
    assert set(_verdicts(claims).values()) == {"does not hold"}


def test_risk_claims_without_underestimates_or_variation_are_not_resolved() -> None:
    claims = risk_claims(_risk_rows([1.0, 2.0, 3.0, 4.0], 0.0, 0.1, 0.0))
    assert _verdicts(claims) == {"error_worsens_tir": "not resolved", "underestimate_raises_hbgi": "not resolved",
                                 "overestimate_raises_lbgi": "not resolved"}
    assert claims[1].n == 0


def _baselines(hits: dict[str, int]) -> list[dict[str, Any]]:
    return [row for s in ("mean", "ridge", "lookup") for row in _arm(s, hits[s], 5.0)]


def test_baseline_order_is_a_check_on_curated_meals_and_a_claim_on_a_real_file() -> None:
    ordered, reversed_ = _baselines({"lookup": 50, "ridge": 30, "mean": 10}), _baselines({"lookup": 10, "ridge": 30,
                                                                                         "mean": 50})
    check = baseline_order(ordered, curated=True)
    assert isinstance(check, Check) and check.passed and check.numbers["acc_lookup"] == pytest.approx(50 / N)
    assert not baseline_order(reversed_, curated=True).passed
    claim = baseline_order(ordered, curated=False)
    assert isinstance(claim, Claim) and claim.id == "lookup_ridge_mean_acc" and claim.verdict == "holds"
    assert baseline_order(reversed_, curated=False).verdict == "does not hold"
    tied = baseline_order(_baselines({"lookup": 31, "ridge": 30, "mean": 29}), curated=False)
    assert tied.verdict == "not resolved"


def _metrics(acc: float) -> dict[str, float]:
    return {"acc_7_5": acc, "acc_7_5_official": acc + 0.1, "mae": 10.0, "answer_rate": 1.0, "acc_answered": acc,
            "mae_answered": 10.0, "n": float(N)}


def test_build_report_table_claims_and_checks() -> None:
    p = NutribenchParams()
    scores = _llm({"rag": 55, "cot": 35, "base": 15}, {"rag": 2.0, "cot": 6.0, "base": 12.0})
    # the baselines answer 80 meals; the LLM meals are the first 60 of them
    hits = {"mean": 5, "ridge": 20, "lookup": 40}
    scores += [row for s in hits for row in _arm(s, hits[s], 5.0) + _arm(s, 0, 50.0, offset=N)[:20]]
    estimation = {s: {"all": _metrics(0.5), "natural": _metrics(0.4), "metric": _metrics(0.6), "truncated_share": 0.0}
                  for s in STRATEGIES}
    arm = {"meals": 4, "tir": 0.8, "lbgi": 0.1, "hbgi": 2.0, "tir_minus_true": -0.05, "lbgi_minus_true": 0.0,
           "hbgi_minus_true": 0.5, "capped_boluses": 0, "readings_below_sensor": 0}
    risk = {"meals": 4, "patients": 1, "simulations": 28, TRUE_BOLUS: arm, **{s: arm for s in STRATEGIES}}
    curation = {"meals": 320, "eval_meals": 80, "foods": 40, "carb_mean_g": 50.0, "carb_median_g": 45.0}
    report = build_report(p, curation, estimation, scores, risk, _risk_rows(ERRORS, 0.01, 0.1, 0.1))
    assert [r["strategy"] for r in report.rows] == [*STRATEGIES, TRUE_BOLUS]
    lookup = next(r for r in report.rows if r["strategy"] == "lookup")
    assert lookup["Acc@7.5 LLM meals"] == pytest.approx(40 / N) and lookup["truncated"] is None
    assert lookup["paper Acc@7.5 (Llama-3.1-8B)"] is None
    base = next(r for r in report.rows if r["strategy"] == "base")
    assert base["paper MAE (Llama-3.1-8B)"] == 36.18 and base["Acc natural"] == 0.4
    assert [c.id for c in report.claims] == ["rag_cot_base_acc", "rag_cot_base_mae", "error_worsens_tir",
                                             "underestimate_raises_hbgi", "overestimate_raises_lbgi"]
    assert [c.id for c in report.checks] == ["lookup_ridge_mean_curated"] and report.checks[0].passed
    real = build_report(NutribenchParams.model_validate({"data": {"path": "v2.csv"}}), curation, estimation, scores,
                        risk, _risk_rows(ERRORS, 0.01, 0.1, 0.1))
    assert real.checks == [] and real.claims[-1].id == "lookup_ridge_mean_acc"
    assert "## Claims" in report.to_markdown()
