"""KnOTS report functions on constructed numbers: each verdict is reachable, the check can fail."""

from __future__ import annotations

import pytest

from pipelines.knots.params import KnotsParams
from pipelines.knots.report import boundary_note, build_report, chosen_top_k, ta_check, ties_claim


def _rows(knots_ties: list[float], ties: list[float]) -> list[dict]:
    rows = []
    for seed, (kt, t) in enumerate(zip(knots_ties, ties)):
        rows += [{"seed": seed, "method": "knots_ties", "avg_norm_acc": kt},
                 {"seed": seed, "method": "ties", "avg_norm_acc": t}]
    return rows


def test_a_consistent_gain_over_seeds_holds() -> None:
    claim = ties_claim(_rows([90.0, 91.0, 92.0], [88.0, 89.1, 89.9]))
    assert claim.verdict == "holds" and claim.n == 3
    assert claim.effect == pytest.approx(2.0, abs=1e-9) and claim.ci[0] > 0


def test_a_consistent_loss_does_not_hold() -> None:
    claim = ties_claim(_rows([85.0, 86.0, 87.0], [87.0, 88.1, 88.9]))
    assert claim.verdict == "does not hold" and claim.ci[1] < 0


def test_a_gain_within_seed_noise_is_not_resolved() -> None:
    # higher mean, but the paired differences straddle zero
    claim = ties_claim(_rows([90.0, 85.0, 92.0], [88.0, 87.0, 89.0]))
    assert claim.effect > 0 and claim.verdict == "not resolved"


def test_one_seed_cannot_resolve_the_claim() -> None:
    claim = ties_claim(_rows([95.0], [80.0]))
    assert claim.verdict == "not resolved" and claim.ci == (float("-inf"), float("inf"))


def test_pairs_follow_the_seed_not_the_row_order() -> None:
    rows = _rows([90.0, 91.0, 92.0], [88.0, 89.1, 89.9])
    assert ties_claim(list(reversed(rows))).effect == pytest.approx(ties_claim(rows).effect)


def test_the_ta_check_fails_when_the_updates_differ() -> None:
    checks = {"seed0/knots_ta_minus_ta_max_abs": 1e-9, "seed0/delta_max_abs": 1.0}
    assert ta_check(checks, [0], []).passed
    checks["seed0/knots_ta_minus_ta_max_abs"] = 1e-3
    assert not ta_check(checks, [0], []).passed


def test_report_table_has_one_row_per_method_and_the_paper_column() -> None:
    p = KnotsParams.model_validate({"seeds": [0, 1], "data": {"tasks": ["mnist", "fashion"]},
                                    "merge": {"methods": ["ties", "knots_ties"]}})
    rows = []
    for seed in (0, 1):
        for method, value in (("ties", 80.0 + seed), ("knots_ties", 82.0 + seed)):
            rows.append({"seed": seed, "method": method, "avg_norm_acc": value, "joint_acc": 50.0, "lam": 0.5,
                         "top_k": (30.0, 20.0)[seed], "mnist_norm_acc": value, "fashion_norm_acc": value})
    checks = {f"seed{s}/{k}": v for s in (0, 1) for k, v in (("knots_ta_minus_ta_max_abs", 0.0),
              ("delta_max_abs", 1.0), ("sign_conflict_original", 0.2), ("sign_conflict_knots", 0.1),
              ("subspace_alignment", 0.5))}
    single = {f"seed{s}/{t}/{k}": 0.9 for s in (0, 1) for t in ("mnist", "fashion") for k in ("test", "zero_shot_test")}
    report = build_report(rows, checks, single, p)
    assert [r["method"] for r in report.rows] == ["ties", "knots_ties"]
    assert report.rows[1]["paper ViT-B/32"] == 68.0 and report.rows[1]["avg norm acc"].startswith("82.5 ±")
    assert report.rows[0]["top-K % chosen"] == "30, 20" and report.rows[0]["λ chosen"] == "0.5, 0.5"
    # identical gains on both seeds: a zero-width interval above zero
    assert report.claims[0].verdict == "holds" and report.checks[0].passed


def test_methods_without_a_top_k_show_a_dash() -> None:
    rows = [{"seed": 1, "method": "ta", "top_k": None}, {"seed": 0, "method": "ta", "top_k": None},
            {"seed": 1, "method": "ties", "top_k": 50.0}, {"seed": 0, "method": "ties", "top_k": 10.0}]
    assert chosen_top_k(rows, "ta") == "–" and chosen_top_k(rows, "ties") == "10, 50"


def test_a_lambda_on_the_grid_edge_is_named() -> None:
    rows = [{"method": "ties", "lam": 0.1}, {"method": "knots_ties", "lam": 0.5}, {"method": "ta", "lam": 3.0}]
    note = boundary_note(rows, [0.1, 0.5, 3.0])
    assert "ties (0.1)" in note and "ta (3)" in note and "knots_ties" not in note
    assert boundary_note(rows[1:2], [0.1, 0.5, 3.0]).startswith("no chosen lambda")
