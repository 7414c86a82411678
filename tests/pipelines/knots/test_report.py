"""KnOTS report functions on constructed numbers: each verdict is reachable, gates block, the check can fail."""

from __future__ import annotations

import pytest

from pipelines.knots.params import KnotsParams
from pipelines.knots.report import (
    HEADLINE,
    KNOTS_TIES_BEATS_TIES,
    boundary_note,
    build_report,
    chosen_top_k,
    no_merge_scores,
    ta_check,
    ties_claim,
)

LAMBDAS = [0.1, 0.3, 0.5, 1.0]


def _rows(knots_ties: list[float], ties: list[float], lam: float = 0.3) -> list[dict]:
    rows = []
    for seed, (kt, t) in enumerate(zip(knots_ties, ties)):
        rows += [
            {"seed": seed, "method": "knots_ties", "avg_norm_acc": kt, "lam": lam},
            {"seed": seed, "method": "ties", "avg_norm_acc": t, "lam": lam},
        ]
    return rows


def _no_merge(n: int, value: float = 70.0) -> dict[int, float]:
    return {seed: value + 0.3 * seed for seed in range(n)}


def test_the_headline_is_declared() -> None:
    assert HEADLINE == (KNOTS_TIES_BEATS_TIES,) and KNOTS_TIES_BEATS_TIES.headline
    assert KNOTS_TIES_BEATS_TIES.rule.smallest_effect == pytest.approx(1.5)


def test_a_consistent_gain_over_seeds_holds() -> None:
    claim = ties_claim(_rows([90.0, 91.0, 92.0], [88.0, 89.1, 89.9]), _no_merge(3), LAMBDAS)
    assert claim.verdict == "holds" and claim.n == 3
    assert claim.effect == pytest.approx(2.0, abs=1e-9) and claim.ci[0] > 0
    assert all(g.passed for g in claim.gates)


def test_a_consistent_loss_does_not_hold() -> None:
    claim = ties_claim(_rows([85.0, 86.0, 87.0], [87.0, 88.1, 88.9]), _no_merge(3), LAMBDAS)
    assert claim.verdict == "does not hold" and claim.ci[1] < 0


def test_a_gain_below_the_smallest_effect_does_not_hold() -> None:
    # +0.3 points, not significant, and every effect of 1.5 points (the smallest of interest) is excluded
    ties = [88.0, 89.0, 90.0, 88.5, 89.5, 90.5]
    gains = [0.5, -0.2, 0.6, 0.1, 0.4, 0.4]
    claim = ties_claim(_rows([t + g for t, g in zip(ties, gains)], ties), _no_merge(6), LAMBDAS)
    assert claim.effect > 0 and claim.verdict == "does not hold"


def test_a_gain_within_seed_noise_is_not_resolved() -> None:
    claim = ties_claim(_rows([90.0, 85.0, 92.0], [88.0, 87.0, 89.0]), _no_merge(3), LAMBDAS)
    assert claim.effect > 0 and claim.verdict == "not resolved" and claim.units_needed


def test_one_seed_cannot_resolve_the_claim() -> None:
    claim = ties_claim(_rows([95.0], [80.0]), _no_merge(1), LAMBDAS)
    assert claim.verdict == "not resolved" and claim.ci == (float("-inf"), float("inf"))


def test_merges_that_barely_beat_no_merge_decide_nothing() -> None:
    # a decisive +2 points, but the better merge is only ~1 point above no merge (margin 3): gated
    claim = ties_claim(_rows([90.0, 91.0, 92.0], [88.0, 89.1, 89.9]), {0: 89.0, 1: 90.0, 2: 91.1}, LAMBDAS)
    assert claim.verdict == "not resolved" and "gate failed" in claim.reason and "best merge" in claim.reason


def test_an_arm_below_no_merge_decides_nothing() -> None:
    claim = ties_claim(_rows([70.0, 71.0, 72.0], [88.0, 89.1, 89.9]), {0: 80.0, 1: 80.5, 2: 81.2}, LAMBDAS)
    assert claim.verdict == "not resolved" and "knots_ties vs no merge" in claim.reason


def test_a_lambda_on_the_grid_edge_decides_nothing() -> None:
    claim = ties_claim(_rows([90.0, 91.0, 92.0], [88.0, 89.1, 89.9], lam=0.1), _no_merge(3), LAMBDAS)
    assert claim.verdict == "not resolved" and "edge" in claim.reason


def test_without_the_no_merge_reference_the_gate_fails() -> None:
    claim = ties_claim(_rows([90.0, 91.0, 92.0], [88.0, 89.1, 89.9]), None, LAMBDAS)
    assert claim.verdict == "not resolved" and "gate failed" in claim.reason


def test_pairs_follow_the_seed_not_the_row_order() -> None:
    rows = _rows([90.0, 91.0, 92.0], [88.0, 89.1, 89.9])
    assert ties_claim(list(reversed(rows)), _no_merge(3)).effect == pytest.approx(ties_claim(rows, _no_merge(3)).effect)


def test_arms_on_different_seeds_are_an_error() -> None:
    rows = _rows([90.0, 91.0, 92.0], [88.0, 89.1, 89.9])
    rows[-1]["seed"] = 7
    with pytest.raises(ValueError, match="different units"):
        ties_claim(rows, _no_merge(3))


def test_no_merge_is_the_frozen_head_over_the_own_lora_accuracy() -> None:
    single = {"seed0/a/test": 0.8, "seed0/a/zero_shot_test": 0.6, "seed0/b/test": 0.5, "seed0/b/zero_shot_test": 0.5}
    scores = no_merge_scores(single, ["a", "b"], [0])
    assert scores[0]["a_norm_acc"] == pytest.approx(75.0) and scores[0]["avg_norm_acc"] == pytest.approx(87.5)


def test_the_ta_check_fails_when_the_updates_differ() -> None:
    checks = {"seed0/knots_ta_minus_ta_max_abs": 1e-9, "seed0/delta_max_abs": 1.0}
    assert ta_check(checks, [0], []).passed
    checks["seed0/knots_ta_minus_ta_max_abs"] = 1e-3
    assert not ta_check(checks, [0], []).passed


def _report_inputs(ties: list[float], knots_ties: list[float], zero_shot: float, lam: float = 0.5):
    p = KnotsParams.model_validate(
        {
            "seeds": [0, 1, 2],
            "data": {"tasks": ["mnist", "fashion"]},
            "merge": {"methods": ["ties", "knots_ties"], "lambdas": [0.1, 0.5, 1.0]},
        }
    )
    rows = []
    for seed in (0, 1, 2):
        for method, value in (("ties", ties[seed]), ("knots_ties", knots_ties[seed])):
            rows.append(
                {
                    "seed": seed,
                    "method": method,
                    "avg_norm_acc": value,
                    "joint_acc": 50.0,
                    "lam": lam,
                    "top_k": (30.0, 20.0, 10.0)[seed],
                    "mnist_norm_acc": value,
                    "fashion_norm_acc": value,
                }
            )
    checks = {
        f"seed{s}/{k}": v
        for s in (0, 1, 2)
        for k, v in (
            ("knots_ta_minus_ta_max_abs", 0.0),
            ("delta_max_abs", 1.0),
            ("sign_conflict_original", 0.2),
            ("sign_conflict_knots", 0.1),
            ("subspace_alignment", 0.5),
        )
    }
    single = {f"seed{s}/{t}/test": 0.9 for s in (0, 1, 2) for t in ("mnist", "fashion")}
    single.update(
        {f"seed{s}/{t}/zero_shot_test": zero_shot + 0.01 * s for s in (0, 1, 2) for t in ("mnist", "fashion")}
    )
    return rows, checks, single, p


def test_report_table_has_the_no_merge_row_one_row_per_method_and_the_paper_column() -> None:
    report = build_report(*_report_inputs([80.0, 81.0, 82.5], [82.0, 83.1, 84.4], zero_shot=0.6))
    assert [r["method"] for r in report.rows] == ["no merge (λ = 0)", "ties", "knots_ties"]
    assert report.rows[0]["avg norm acc"].startswith("67.8 ±") and report.rows[0]["λ chosen"] == "0"
    assert report.rows[2]["paper ViT-B/32"] == 68.0 and report.rows[2]["avg norm acc"].startswith("83.2 ±")
    assert report.rows[1]["top-K % chosen"] == "30, 20, 10" and report.rows[1]["λ chosen"] == "0.5, 0.5, 0.5"
    assert report.claims[0].verdict == "holds" and report.claims[0].headline and report.checks[0].passed


def test_report_is_not_resolved_when_merging_barely_acts() -> None:
    report = build_report(*_report_inputs([80.0, 81.0, 82.5], [82.0, 83.1, 84.4], zero_shot=0.74))
    assert report.claims[0].verdict == "not resolved" and "gate failed" in report.claims[0].reason


def test_methods_without_a_top_k_show_a_dash() -> None:
    rows = [
        {"seed": 1, "method": "ta", "top_k": None},
        {"seed": 0, "method": "ta", "top_k": None},
        {"seed": 1, "method": "ties", "top_k": 50.0},
        {"seed": 0, "method": "ties", "top_k": 10.0},
    ]
    assert chosen_top_k(rows, "ta") == "–" and chosen_top_k(rows, "ties") == "10, 50"


def test_a_lambda_on_the_grid_edge_is_named() -> None:
    rows = [{"method": "ties", "lam": 0.1}, {"method": "knots_ties", "lam": 0.5}, {"method": "ta", "lam": 3.0}]
    note = boundary_note(rows, [0.1, 0.5, 3.0])
    assert "ties (0.1)" in note and "ta (3)" in note and "knots_ties" not in note
    assert boundary_note(rows[1:2], [0.1, 0.5, 3.0]).startswith("no chosen lambda")
