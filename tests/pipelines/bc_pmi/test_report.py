"""bc_pmi claims and checks on constructed numbers: every verdict reachable, the random-policy and headroom
gates, equal success as an equivalence claim, the zone concentration as a check, the table."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pipelines.bc_pmi.params import BcPmiParams
from pipelines.bc_pmi.report import (
    HEADLINE,
    build_report,
    checks,
    claim_rows,
    concentration_check,
    control_claim,
    equal_success_claim,
    style_accuracy_claim,
    table,
)


def _rows(
    pmi_style: list[float],
    bc_style: list[float],
    pmi_success: list[float] | None = None,
    bc_success: list[float] | None = None,
    ratio: list[float] | None = None,
    size: int = 5,
    random: tuple[float, float] = (0.05, 0.0),
) -> list[dict[str, Any]]:
    """BC and BC-PMI per seed at ``size``, the experts, and the random policy (style accuracy, success) with
    a little spread over seeds."""
    n = len(pmi_style)
    pmi_success, bc_success = pmi_success or [0.9] * n, bc_success or [0.9] * n
    ratio = ratio or [2.0] * n
    rows = []
    for seed in range(n):
        for method, style, success in (
            ("bc_pmi", pmi_style[seed], pmi_success[seed]),
            ("bc", bc_style[seed], bc_success[seed]),
        ):
            rows.append(
                {
                    "method": method,
                    "size": size,
                    "seed": seed,
                    "success": success,
                    "style_accuracy": style,
                    **{f"style_accuracy_{z}": style for z in range(3)},
                    "zone_ratio": ratio[seed],
                }
            )
        rows.append(
            {
                "method": "expert",
                "size": 0,
                "seed": seed,
                "success": 1.0,
                "style_accuracy": 0.97,
                **{f"style_accuracy_{z}": 0.97 for z in range(3)},
                "zone_ratio": math.nan,
            }
        )
        style, success = random[0] + 0.01 * seed, random[1] + 0.01 * seed
        rows.append(
            {
                "method": "random",
                "size": 0,
                "seed": seed,
                "success": success,
                "style_accuracy": style,
                **{f"style_accuracy_{z}": style for z in range(3)},
                "zone_ratio": math.nan,
            }
        )
    return rows


def test_the_headline_is_style_accuracy_at_low_data() -> None:
    assert [s.id for s in HEADLINE] == ["bc_pmi_style_accuracy_low_data"] and HEADLINE[0].rule.kind == "superiority"


def test_style_accuracy_verdicts() -> None:
    holds = style_accuracy_claim(_rows([0.90, 0.92, 0.95], [0.80, 0.83, 0.84]), 5)
    assert holds.verdict == "holds" and holds.n == 3 and abs(holds.effect - 0.1) < 1e-9
    assert [g.passed for g in holds.gates] == [True, True, True]
    worse = style_accuracy_claim(_rows([0.70, 0.72, 0.75], [0.80, 0.83, 0.84]), 5)
    assert worse.verdict == "does not hold"
    # no gain, measured tightly enough to exclude the smallest effect (0.05): a decided negative
    small = style_accuracy_claim(_rows([0.81, 0.825, 0.845], [0.80, 0.83, 0.84]), 5)
    assert small.verdict == "does not hold" and 0 < small.effect < 0.05 and small.ci[0] < 0
    noisy = style_accuracy_claim(_rows([0.95, 0.70, 0.90], [0.80, 0.83, 0.84]), 5)
    assert noisy.verdict == "not resolved" and noisy.ci[0] < 0 < noisy.ci[1]


def test_gates_random_policy_and_headroom() -> None:
    # BC already at the ceiling: no room for a gain of 0.05, nothing is decided
    ceiling = style_accuracy_claim(_rows([1.0, 1.0, 1.0], [0.975, 0.99, 0.985]), 5)
    assert ceiling.verdict == "not resolved" and "ceiling" in ceiling.reason
    # BC no better than a random policy: it did not learn, nothing is decided
    blind = style_accuracy_claim(_rows([0.30, 0.35, 0.32], [0.05, 0.07, 0.06], random=(0.05, 0.0)), 5)
    assert blind.verdict == "not resolved" and "the random policy" in blind.reason
    # without the random policy's rows the gate is not passed either
    rows = [r for r in _rows([0.90, 0.92, 0.95], [0.80, 0.83, 0.84]) if r["method"] != "random"]
    assert style_accuracy_claim(rows, 5).verdict == "not resolved"
    only_bc = [r for r in rows if r["method"] != "bc_pmi"]
    assert "not measured" in style_accuracy_claim(only_bc, 5).reason


def test_equal_success_is_an_equivalence_claim() -> None:
    style = [0.9, 0.9, 0.9]
    same = equal_success_claim(_rows(style, style, [0.90, 0.91, 0.92], [0.90, 0.90, 0.91]), 5)
    assert same.verdict == "holds" and same.rule.kind == "equivalence" and same.rule.smallest_effect == 0.05
    apart = equal_success_claim(_rows(style, style, [0.60, 0.62, 0.61], [0.90, 0.91, 0.90]), 5)
    assert apart.verdict == "does not hold"
    unclear = equal_success_claim(_rows(style, style, [0.70, 0.95, 0.80], [0.90, 0.85, 0.80]), 5)
    assert unclear.verdict == "not resolved"
    # the margin comes from report.success_margin; another value is named as this run's
    wide = equal_success_claim(_rows(style, style, [0.80, 0.82, 0.81], [0.90, 0.91, 0.90]), 5, margin=0.2)
    assert wide.verdict == "holds" and "0.2 in this run's params" in wide.rule.source
    # a policy that never succeeds more than the random one decides nothing
    failing = equal_success_claim(_rows(style, style, [0.0, 0.02, 0.01], [0.01, 0.0, 0.02], random=(0.05, 0.0)), 5)
    assert failing.verdict == "not resolved" and "gate failed" in failing.reason


def test_seeds_pair_by_key() -> None:
    rows = _rows([0.90, 0.92, 0.95], [0.80, 0.83, 0.84])
    assert style_accuracy_claim(list(reversed(rows)), 5).effect == pytest.approx(0.1)
    rows = [dict(r, seed=9) if r["method"] == "bc" and r["seed"] == 2 else r for r in rows]
    with pytest.raises(ValueError, match="different units"):
        style_accuracy_claim(rows, 5)


def test_zone_concentration_is_a_check() -> None:
    style = [0.9, 0.9, 0.9]
    assert concentration_check(_rows(style, style, ratio=[2.0, 2.1, 1.9]), 5).passed
    assert not concentration_check(_rows(style, style, ratio=[0.8, 0.85, 0.9]), 5).passed


def test_checks_pass_and_fail() -> None:
    rows = _rows([0.9] * 3, [0.9] * 3)
    good = {
        "n5/s0": {"dv": 0.6, "pearson_exact": 0.85, "shared_pmi": 0.02},
        "n5/s1": {"dv": 0.7, "pearson_exact": 0.9, "shared_pmi": -0.05},
    }
    assert all(c.passed for c in checks(rows, good))
    bad = {"n5/s0": {"dv": 1.5, "pearson_exact": 0.2, "shared_pmi": 0.3}}
    assert [c.id for c in checks(rows, bad) if not c.passed] == [
        "dv_estimate_in_bounds",
        "mine_pmi_tracks_exact_pmi",
        "pmi_zero_where_styles_agree",
    ]
    weak_experts = [dict(r, style_accuracy=0.5) if r["method"] == "expert" else r for r in rows]
    assert [c.id for c in checks(weak_experts, good) if not c.passed] == ["experts_show_their_styles"]


def test_table_and_report_shape() -> None:
    rows = _rows([0.9, 0.92, 0.95], [0.8, 0.83, 0.84]) + [
        r for r in _rows([0.99] * 3, [0.98] * 3, size=20) if r["method"] in ("bc", "bc_pmi")
    ]
    columns, body = table(rows, [5, 20], ["bc", "bc_pmi"])
    assert columns[:5] == ["episodes per style", "method", "actions", "success", "style accuracy"]
    assert [(r["episodes per style"], r["method"]) for r in body] == [
        ("–", "Experts (demonstrators)"),
        ("–", "Random policy (uniform actions; the gates' reference)"),
        (5, "Conditional BC"),
        (5, "BC-PMI"),
        (20, "Conditional BC"),
        (20, "BC-PMI"),
    ]
    assert body[3]["weight zone / outside"].startswith("2.00") and body[2]["weight zone / outside"] is None
    report = build_report(
        rows,
        {"n5/s0": {"dv": 0.6, "pearson_exact": 0.8, "shared_pmi": 0.0}},
        {"sizes": [5, 20], "source": "generated experts", "epsilon": 0.1},
        BcPmiParams(),
    )
    assert [c.id for c in report.claims] == [
        "bc_pmi_style_accuracy_low_data",
        "bc_pmi_equal_success_low_data",
        "bc_pmi_gt_count_pmi_low_data",
        "bc_pmi_gt_zone_low_data",
    ]
    assert report.claims[0].verdict == "holds" and report.checks[0].id == "weights_concentrate_in_zone"
    assert report.claims[2].verdict == "not resolved"  # the controls were not in these rows: not measured


def test_controls_are_claims_against_bc_pmi() -> None:
    rows = _rows([0.90, 0.92, 0.95], [0.80, 0.83, 0.84])
    zone = [dict(r, method="bc_zone") for r in rows if r["method"] == "bc"]
    assert control_claim(rows + zone, 5, "bc_zone").verdict == "holds"
    same = [
        dict(r, method="bc_count_pmi", style_accuracy=r["style_accuracy"] + 0.01 * (r["seed"] - 1))
        for r in rows
        if r["method"] == "bc_pmi"
    ]
    assert control_claim(rows + same, 5, "bc_count_pmi").verdict == "does not hold"
    blind = [dict(r, method="bc_zone", style_accuracy=0.05) for r in rows if r["method"] == "bc"]
    assert control_claim(rows + blind, 5, "bc_zone").verdict == "not resolved"  # the control did not learn
    assert control_claim(rows, 5, "bc_zone").verdict == "not resolved"


def test_claims_read_one_way_of_acting() -> None:
    greedy = [
        dict(r, action="greedy") if r["method"] in ("bc", "bc_pmi") else dict(r, action="own")
        for r in _rows([0.80, 0.83, 0.84], [0.81, 0.82, 0.84])
    ]
    sample = [
        dict(r, action="sample")
        for r in _rows([0.90, 0.92, 0.95], [0.80, 0.83, 0.84])
        if r["method"] in ("bc", "bc_pmi")
    ]
    rows = greedy + sample
    assert style_accuracy_claim(claim_rows(rows, "sample"), 5).verdict == "holds"
    assert style_accuracy_claim(claim_rows(rows, "greedy"), 5).verdict == "does not hold"
    _, body = table(rows, [5], ["bc", "bc_pmi"])
    assert [(r["method"], r["actions"]) for r in body][2:] == [
        ("Conditional BC", "greedy"),
        ("BC-PMI", "greedy"),
        ("Conditional BC", "sample"),
        ("BC-PMI", "sample"),
    ]


def test_shared_path_pmi_is_compared_with_the_exact_pmi_where_there_is_one() -> None:
    rows = _rows([0.9] * 3, [0.9] * 3)
    few = {"n2/s0": {"dv": 0.6, "pearson_exact": 0.8, "shared_pmi": 0.30, "shared_pmi_exact": 0.28}}
    assert next(c for c in checks(rows, few) if c.id == "pmi_zero_where_styles_agree").passed
    off = {"n2/s0": {"dv": 0.6, "pearson_exact": 0.8, "shared_pmi": 0.30, "shared_pmi_exact": 0.0}}
    assert not next(c for c in checks(rows, off) if c.id == "pmi_zero_where_styles_agree").passed
    no_exact = {"n2/s0": {"dv": 0.6, "shared_pmi": 0.30}}  # the Reacher: no count PMI, so 0 is the reference
    assert not next(c for c in checks(rows, no_exact, env="reacher") if c.id == "pmi_zero_where_styles_agree").passed


def test_an_undefined_pearson_is_named_not_compared() -> None:
    """Styles that act alike make the count PMI constant: its Pearson is NaN, saved as null in JSON."""
    rows = _rows([0.9] * 3, [0.9] * 3)
    alike = {
        "n5/s0": {"dv": 0.01, "pearson_exact": None, "shared_pmi": 0.0},
        "n5/s1": {"dv": 0.02, "pearson_exact": float("nan"), "shared_pmi": 0.0},
    }
    tracked = next(c for c in checks(rows, alike) if c.id == "mine_pmi_tracks_exact_pmi")
    assert not tracked.passed and "undefined at n5/s0, n5/s1" in tracked.evidence
    mixed = {**alike, "n5/s2": {"dv": 0.6, "pearson_exact": 0.8, "shared_pmi": 0.0}}
    tracked = next(c for c in checks(rows, mixed) if c.id == "mine_pmi_tracks_exact_pmi")
    assert tracked.passed and "n5/s2 0.80" in tracked.evidence
