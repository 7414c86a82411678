"""NutriBench's claims and checks on constructed numbers: every verdict, the floor and answer-rate gates, and the
risk study's checks."""

from __future__ import annotations

from typing import Any

import pytest

from paperflows.report import Check, Claim
from pipelines.nutribench.params import STRATEGIES, TRUE_BOLUS, NutribenchParams
from pipelines.nutribench.report import baseline_order, build_report, ordering, prompting_claims, risk_checks

N = 60


def _arm(
    strategy: str,
    hits: int,
    error: float,
    answered: int | None = None,
    offset: int = 0,
    n: int = N,
    first: int | None = None,
) -> list[dict[str, Any]]:
    """``n`` meals m00.. of one arm: the first ``hits`` are hits, the first ``answered`` are answered (the first
    ``first`` of them before the answer-line cue)."""
    answered = n if answered is None else answered
    first = answered if first is None else first
    return [
        {
            "strategy": strategy,
            "meal_id": f"m{i + offset:03d}",
            "serving_type": ("natural", "metric")[i % 2],
            "carb": 30.0,
            "pred": 30.0,
            "truncated": False,
            "answered": i < answered,
            "answered_first": i < first,
            "hit": i < hits and i < answered,
            "abs_error": error + (i % 5),
        }
        for i in range(n)
    ]


def _llm(
    hits: dict[str, int],
    errors: dict[str, float],
    answered: dict[str, int] | None = None,
    n: int = N,
    floor: tuple[int, float] = (5, 20.0),
    first: dict[str, int] | None = None,
) -> list[dict[str, Any]]:
    """The three LLM arms and the training-mean predictor (``floor``: its hits and error) on the same meals."""
    rows = [
        row
        for s in ("base", "cot", "rag")
        for row in _arm(s, hits[s], errors[s], (answered or {}).get(s), n=n, first=(first or {}).get(s))
    ]
    return rows + _arm("mean", floor[0], floor[1], n=n)


def _verdicts(claims: list[Claim]) -> dict[str, str]:
    return {c.id: c.verdict for c in claims}


def test_ordering_is_the_worse_of_the_consecutive_paired_gains() -> None:
    joint, pairs = ordering([[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]])
    assert joint.estimate == pytest.approx(0.25) and [p.estimate for p in pairs] == [0.25, 0.25]
    joint, _ = ordering([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0]])
    assert joint.estimate == pytest.approx(-0.25) and joint.n == 4
    errors, (ratio,) = ordering([[2.0, 2.0], [4.0, 4.0]], log_ratio=True)  # the first arm halves the error
    assert errors.log and errors.shown(errors.estimate) == pytest.approx(2.0)
    assert ordering([[], [], []]) == (None, [None, None])


def test_prompting_order_holds_when_each_arm_clearly_beats_the_next() -> None:
    claims = prompting_claims(_llm({"rag": 55, "cot": 35, "base": 15}, {"rag": 2.0, "cot": 6.0, "base": 12.0}), "x")
    assert _verdicts(claims) == {"rag_cot_base_acc": "holds", "rag_cot_base_mae": "holds"}
    acc, mae = claims
    assert acc.headline and not mae.headline
    assert acc.effect == pytest.approx(20 / N) and acc.ci[0] > 0 and acc.n == N
    assert acc.numbers["acc_rag"] == pytest.approx(55 / N) and all(g.passed for g in acc.gates)
    assert mae.numbers["mae_base"] == pytest.approx(14.0) and mae.effect == pytest.approx(14.0 / 8.0)  # base / CoT


def test_prompting_order_does_not_hold_when_base_is_clearly_best() -> None:
    claims = prompting_claims(_llm({"rag": 10, "cot": 30, "base": 50}, {"rag": 12.0, "cot": 6.0, "base": 2.0}), "x")
    assert _verdicts(claims) == {"rag_cot_base_acc": "does not hold", "rag_cot_base_mae": "does not hold"}
    assert claims[0].ci[1] < 0


def test_a_gain_of_one_meal_in_six_hundred_does_not_hold() -> None:
    """Each arm beats the next on one meal of 600: every gain of the paper's 0.023 is excluded."""
    rows = _llm({"rag": 301, "cot": 300, "base": 299}, {"rag": 5.0, "cot": 5.0, "base": 5.0}, n=600)
    acc = prompting_claims(rows, "x")[0]
    assert acc.ci[0] <= 0 < acc.ci[1] < 0.023 and acc.verdict == "does not hold"


def test_prompting_order_is_not_resolved_by_a_one_meal_difference() -> None:
    claims = prompting_claims(_llm({"rag": 31, "cot": 30, "base": 29}, {"rag": 5.0, "cot": 5.0, "base": 5.0}), "x")
    assert _verdicts(claims) == {"rag_cot_base_acc": "not resolved", "rag_cot_base_mae": "not resolved"}
    assert claims[0].ci[0] <= 0 <= claims[0].ci[1] and "interval" in claims[0].reason
    assert "no variance" in claims[1].reason  # identical errors on every meal


def test_no_arm_above_the_training_mean_decides_nothing() -> None:
    """The arms are clearly ordered, but the training-mean predictor beats all of them."""
    rows = _llm({"rag": 30, "cot": 20, "base": 10}, {"rag": 22.0, "cot": 26.0, "base": 30.0}, floor=(45, 3.0))
    claims = prompting_claims(rows, "x")
    assert _verdicts(claims) == {"rag_cot_base_acc": "not resolved", "rag_cot_base_mae": "not resolved"}
    assert all("vs training-mean predictor" in c.reason for c in claims)
    # one arm above the floor is enough
    above = prompting_claims(
        _llm({"rag": 55, "cot": 35, "base": 15}, {"rag": 2.0, "cot": 6.0, "base": 12.0}, floor=(25, 8.0)), "x"
    )
    assert _verdicts(above) == {"rag_cot_base_acc": "holds", "rag_cot_base_mae": "holds"}
    assert above[0].gates[0].arm.startswith("rag") and above[0].gates[0].passed


def test_an_arm_that_mostly_abstains_leaves_the_prompting_claims_not_resolved() -> None:
    """The hits are clearly ordered, but base answers only half of the meals: its answer-rate gate fails."""
    rows = _llm({"rag": 55, "cot": 35, "base": 15}, {"rag": 2.0, "cot": 6.0, "base": 12.0}, answered={"base": 30})
    claims = prompting_claims(rows, "x")
    assert _verdicts(claims) == {"rag_cot_base_acc": "not resolved", "rag_cot_base_mae": "not resolved"}
    assert "gate failed: base vs answer rate 0.8 before the cue" in claims[0].reason
    assert claims[0].numbers["answer_rate_base"] == pytest.approx(0.5)


def test_the_answer_rate_is_taken_before_the_cue() -> None:
    """Every arm answers every meal once cued, but base stated a number on a third of them by itself."""
    rows = _llm({"rag": 55, "cot": 35, "base": 15}, {"rag": 2.0, "cot": 6.0, "base": 12.0}, first={"base": 20})
    claims = prompting_claims(rows, "x")
    assert claims[0].verdict == "not resolved" and "base vs answer rate 0.8 before the cue" in claims[0].reason
    assert claims[0].numbers["answer_rate_base"] == 1.0 and claims[0].numbers["answer_rate_first_base"] == 1 / 3


def test_abstentions_are_not_hits_in_the_prompting_claims() -> None:
    """base abstains on meals 48..59; its rows say hit=False there, so base's accuracy is 48/60, not 60/60."""
    rows = _llm({"rag": 60, "cot": 54, "base": 60}, {"rag": 1.0, "cot": 2.0, "base": 3.0}, answered={"base": 48})
    claims = prompting_claims(rows, "x")
    assert claims[0].numbers["acc_base"] == pytest.approx(48 / N)
    assert claims[0].numbers["acc_cot_minus_base"] == pytest.approx(6 / N)


def _risk_rows(errors: list[float], tir_loss: float, dh: float, dl: float) -> list[dict[str, Any]]:
    """One simulation per error: TIR lost = tir_loss * |e|, HBGI + dh * underestimate, LBGI + dl * overestimate."""
    rows = [
        {
            "strategy": TRUE_BOLUS,
            "meal_id": "m",
            "carb": 50.0,
            "estimate": 50.0,
            "tir": 0.9,
            "tir_true": 0.9,
            "hbgi": 1.0,
            "hbgi_true": 1.0,
            "lbgi": 0.5,
            "lbgi_true": 0.5,
        }
    ]
    for i, e in enumerate(errors):
        est = 50.0 + e if e > -50 else -1.0  # an unknown answer: no bolus
        rows.append(
            {
                "strategy": "ridge",
                "meal_id": f"m{i}",
                "carb": 50.0,
                "estimate": est,
                "tir": 0.9 - tir_loss * abs(e),
                "tir_true": 0.9,
                "hbgi": 1.0 + dh * max(-e, 0.0),
                "hbgi_true": 1.0,
                "lbgi": 0.5 + dl * max(e, 0.0),
                "lbgi_true": 0.5,
            }
        )
    return rows


ERRORS = [float(e) for e in range(-20, 21) if e != 0] + [-50.0]


def test_risk_checks_pass_on_a_monotone_cohort() -> None:
    checks, notes = risk_checks(_risk_rows(ERRORS, 0.01, 0.1, 0.1))
    assert [(c.id, c.passed) for c in checks] == [
        ("error_worsens_tir", True),
        ("underestimate_raises_hbgi", True),
        ("overestimate_raises_lbgi", True),
    ] and notes == []
    assert checks[0].numbers["spearman"] == pytest.approx(1.0)
    # the unknown answer (-1) is an underestimate by the whole meal: 21 underestimates, 20 overestimates
    assert checks[1].numbers["n"] == 21 and checks[2].numbers["n"] == 20


def test_risk_checks_fail_when_errors_help() -> None:
    checks, _ = risk_checks(_risk_rows(ERRORS, -0.01, -0.1, -0.1))
    assert [c.passed for c in checks] == [False, False, False]


def test_risk_checks_without_underestimates_are_not_run() -> None:
    checks, notes = risk_checks(_risk_rows([1.0, 2.0, 3.0, 4.0], 0.0, 0.1, 0.0))
    assert [c.id for c in checks] == ["error_worsens_tir", "overestimate_raises_lbgi"]
    assert not checks[1].passed  # no LBGI change at all
    assert len(notes) == 1 and "underestimate_raises_hbgi" in notes[0]


def _baselines(hits: dict[str, int]) -> list[dict[str, Any]]:
    return [row for s in ("mean", "ridge", "lookup") for row in _arm(s, hits[s], 5.0)]


def test_baseline_order_is_a_check_on_curated_meals_and_a_claim_on_a_real_file() -> None:
    ordered, reversed_ = (
        _baselines({"lookup": 50, "ridge": 30, "mean": 10}),
        _baselines({"lookup": 10, "ridge": 30, "mean": 50}),
    )
    check = baseline_order(ordered, curated=True)
    assert isinstance(check, Check) and check.passed and check.numbers["acc_lookup"] == pytest.approx(50 / N)
    assert not baseline_order(reversed_, curated=True).passed
    claim = baseline_order(ordered, curated=False)
    assert isinstance(claim, Claim) and claim.id == "lookup_ridge_mean_acc" and claim.verdict == "holds"
    assert baseline_order(reversed_, curated=False).verdict == "does not hold"
    tied = baseline_order(_baselines({"lookup": 31, "ridge": 30, "mean": 29}), curated=False)
    assert tied.verdict == "not resolved"


def _metrics(acc: float) -> dict[str, float]:
    return {
        "acc_7_5": acc,
        "acc_7_5_official": acc + 0.1,
        "mae": 10.0,
        "answer_rate": 1.0,
        "acc_answered": acc,
        "mae_answered": 10.0,
        "n": float(N),
    }


def test_build_report_table_claims_and_checks() -> None:
    p = NutribenchParams()
    scores = [
        r
        for r in _llm({"rag": 55, "cot": 35, "base": 15}, {"rag": 2.0, "cot": 6.0, "base": 12.0})
        if r["strategy"] != "mean"
    ]
    # the baselines answer 80 meals; the LLM meals are the first 60 of them
    hits = {"mean": 5, "ridge": 20, "lookup": 40}
    scores += [row for s in hits for row in _arm(s, hits[s], 5.0) + _arm(s, 0, 50.0, offset=N)[:20]]
    estimation = {
        s: {"all": _metrics(0.5), "natural": _metrics(0.4), "metric": _metrics(0.6), "truncated_share": 0.0}
        for s in STRATEGIES
    }
    arm = {
        "meals": 4,
        "tir": 0.8,
        "lbgi": 0.1,
        "hbgi": 2.0,
        "tir_minus_true": -0.05,
        "lbgi_minus_true": 0.0,
        "hbgi_minus_true": 0.5,
        "capped_boluses": 0,
        "readings_below_sensor": 0,
    }
    risk = {"meals": 4, "patients": 1, "simulations": 28, TRUE_BOLUS: arm, **{s: arm for s in STRATEGIES}}
    curation = {"meals": 320, "eval_meals": 80, "foods": 40, "carb_mean_g": 50.0, "carb_median_g": 45.0}
    report = build_report(p, curation, estimation, scores, risk, _risk_rows(ERRORS, 0.01, 0.1, 0.1))
    assert [r["strategy"] for r in report.rows] == [*STRATEGIES, TRUE_BOLUS]
    lookup = next(r for r in report.rows if r["strategy"] == "lookup")
    assert lookup["Acc@7.5 LLM meals"] == pytest.approx(40 / N) and lookup["truncated"] is None
    assert lookup["paper Acc@7.5 (Llama-3.1-8B)"] is None
    base = next(r for r in report.rows if r["strategy"] == "base")
    assert base["paper MAE (Llama-3.1-8B)"] == 36.18 and base["Acc natural"] == 0.4
    assert [c.id for c in report.claims] == ["rag_cot_base_acc", "rag_cot_base_mae"]
    assert [c.verdict for c in report.claims] == ["holds", "holds"]
    assert [c.id for c in report.checks] == [
        "lookup_ridge_mean_curated",
        "error_worsens_tir",
        "underestimate_raises_hbgi",
        "overestimate_raises_lbgi",
    ]
    assert all(c.passed for c in report.checks)
    real = build_report(
        NutribenchParams.model_validate({"data": {"path": "v2.csv"}}),
        curation,
        estimation,
        scores,
        risk,
        _risk_rows(ERRORS, 0.01, 0.1, 0.1),
    )
    assert [c.id for c in real.checks] == ["error_worsens_tir", "underestimate_raises_hbgi", "overestimate_raises_lbgi"]
    assert real.claims[-1].id == "lookup_ridge_mean_acc" and real.claims[-1].verdict == "holds"
    baselines_only = build_report(
        NutribenchParams.model_validate({"estimate": {"strategies": ["mean", "ridge", "lookup"]}}),
        curation,
        estimation,
        scores,
        risk,
        _risk_rows(ERRORS, 0.01, 0.1, 0.1),
    )
    assert [c.verdict for c in baselines_only.claims] == ["not resolved", "not resolved"]
    assert "## Claims" in report.to_markdown()
