"""bc_pmi claims and checks on constructed numbers: every verdict reachable, the headroom gate, the table."""

from __future__ import annotations

import math
from typing import Any

from pipelines.bc_pmi.params import BcPmiParams
from pipelines.bc_pmi.report import (build_report, checks, concentration_claim, equal_success_claim,
                                     style_accuracy_claim, table)


def _rows(pmi_style: list[float], bc_style: list[float], pmi_success: list[float] | None = None,
          bc_success: list[float] | None = None, ratio: list[float] | None = None, size: int = 5) -> list[dict[str, Any]]:
    n = len(pmi_style)
    pmi_success, bc_success = pmi_success or [0.9] * n, bc_success or [0.9] * n
    ratio = ratio or [2.0] * n
    rows = []
    for seed in range(n):
        for method, style, success in (("bc_pmi", pmi_style[seed], pmi_success[seed]),
                                       ("bc", bc_style[seed], bc_success[seed])):
            rows.append({"method": method, "size": size, "seed": seed, "success": success, "style_accuracy": style,
                         **{f"style_accuracy_{z}": style for z in range(3)}, "zone_ratio": ratio[seed]})
        rows.append({"method": "expert", "size": 0, "seed": seed, "success": 1.0, "style_accuracy": 0.97,
                     **{f"style_accuracy_{z}": 0.97 for z in range(3)}, "zone_ratio": math.nan})
    return rows


def test_style_accuracy_verdicts_and_headroom_gate() -> None:
    holds = style_accuracy_claim(_rows([0.90, 0.92, 0.95], [0.80, 0.83, 0.84]), 5)
    assert holds.verdict == "holds" and holds.n == 3 and abs(holds.effect - 0.1) < 1e-9
    worse = style_accuracy_claim(_rows([0.70, 0.72, 0.75], [0.80, 0.83, 0.84]), 5)
    assert worse.verdict == "does not hold"
    noisy = style_accuracy_claim(_rows([0.95, 0.70, 0.90], [0.80, 0.83, 0.84]), 5)
    assert noisy.verdict == "not resolved" and noisy.ci[0] < 0 < noisy.ci[1]
    ceiling = style_accuracy_claim(_rows([1.0, 1.0, 1.0], [0.985, 0.99, 0.99]), 5)   # BC already at the ceiling
    assert ceiling.verdict == "not resolved" and not ceiling.precondition.met


def test_equal_success_is_an_equivalence_test() -> None:
    style = [0.9, 0.9, 0.9]
    same = equal_success_claim(_rows(style, style, [0.90, 0.91, 0.92], [0.90, 0.90, 0.91]), 5, 0.05)
    assert same.verdict == "holds"
    apart = equal_success_claim(_rows(style, style, [0.60, 0.62, 0.61], [0.90, 0.91, 0.90]), 5, 0.05)
    assert apart.verdict == "does not hold"
    unclear = equal_success_claim(_rows(style, style, [0.70, 0.95, 0.80], [0.90, 0.85, 0.80]), 5, 0.05)
    assert unclear.verdict == "not resolved"


def test_concentration_verdicts() -> None:
    style = [0.9, 0.9, 0.9]
    assert concentration_claim(_rows(style, style, ratio=[2.0, 2.1, 1.9]), 5).verdict == "holds"
    assert concentration_claim(_rows(style, style, ratio=[0.8, 0.85, 0.9]), 5).verdict == "does not hold"
    assert concentration_claim(_rows(style, style, ratio=[0.5, 1.6, 1.1]), 5).verdict == "not resolved"


def test_checks_pass_and_fail() -> None:
    rows = _rows([0.9] * 3, [0.9] * 3)
    good = {"n5/s0": {"dv": 0.6, "pearson_exact": 0.85, "shared_pmi": 0.02},
            "n5/s1": {"dv": 0.7, "pearson_exact": 0.9, "shared_pmi": -0.05}}
    assert all(c.passed for c in checks(rows, good))
    bad = {"n5/s0": {"dv": 1.5, "pearson_exact": 0.2, "shared_pmi": 0.3}}
    assert [c.id for c in checks(rows, bad) if not c.passed] == ["dv_estimate_in_bounds", "mine_pmi_tracks_exact_pmi",
                                                                "pmi_zero_where_styles_agree"]
    weak_experts = [dict(r, style_accuracy=0.5) if r["method"] == "expert" else r for r in rows]
    assert [c.id for c in checks(weak_experts, good) if not c.passed] == ["experts_show_their_styles"]


def test_table_and_report_shape() -> None:
    rows = _rows([0.9, 0.92, 0.95], [0.8, 0.83, 0.84]) + _rows([0.99] * 3, [0.98] * 3, size=20)
    columns, body = table(rows, [5, 20], ["bc", "bc_pmi"])
    assert columns[:4] == ["episodes per style", "method", "success", "style accuracy"]
    assert [(r["episodes per style"], r["method"]) for r in body] == [
        ("–", "Experts (demonstrators)"), (5, "Conditional BC"), (5, "BC-PMI"), (20, "Conditional BC"), (20, "BC-PMI")]
    assert body[2]["weight zone / outside"].startswith("2.00") and body[1]["weight zone / outside"] is None
    report = build_report(rows, {"n5/s0": {"dv": 0.6, "pearson_exact": 0.8, "shared_pmi": 0.0}},
                          {"sizes": [5, 20], "source": "generated experts", "epsilon": 0.1}, BcPmiParams())
    assert [c.id for c in report.claims] == ["bc_pmi_style_accuracy_low_data", "bc_pmi_equal_success_low_data",
                                             "weights_concentrate_in_zone"]
    assert report.claims[0].verdict == "holds"
