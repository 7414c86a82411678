"""MotherNet's claims and checks on constructed numbers: every verdict reachable, the table's shape."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pipelines.mothernet.params import LABELS, MothernetParams
from pipelines.mothernet.report import (build_report, child_checks, child_far_above_untrained,
                                        child_inference_faster, child_near_baseline, table)


def _rows(child: list[float], untrained: list[float], logreg: float = 0.85, gbm: float = 0.86) -> list[dict[str, Any]]:
    """Two tables, one split each; the child / untrained AUC of seed i is the same on both tables."""
    rows = []
    for t in ("a", "b"):
        rows += [{"table": t, "split": 0, "method": "logreg", "seed": -1, "auc": logreg},
                 {"table": t, "split": 0, "method": "gbm", "seed": -1, "auc": gbm}]
        for seed, (c, u) in enumerate(zip(child, untrained)):
            rows += [{"table": t, "split": 0, "method": "mothernet", "seed": seed, "auc": c},
                     {"table": t, "split": 0, "method": "untrained", "seed": seed, "auc": u}]
    return rows


def test_far_above_untrained_each_verdict() -> None:
    holds = child_far_above_untrained(_rows([0.84, 0.85, 0.86], [0.50, 0.52, 0.49]))
    assert holds.verdict == "holds" and holds.effect == pytest.approx(0.85 - 1.51 / 3) and holds.n == 3
    fails = child_far_above_untrained(_rows([0.55, 0.56, 0.57], [0.50, 0.51, 0.52]))
    assert fails.verdict == "does not hold" and fails.effect == pytest.approx(0.05)
    noisy = child_far_above_untrained(_rows([0.90, 0.55, 0.70], [0.50, 0.50, 0.50]))
    assert noisy.verdict == "not resolved" and noisy.ci[0] < 0.1 < noisy.ci[1]
    lonely = child_far_above_untrained(_rows([0.9], [0.5]))
    assert lonely.verdict == "not resolved" and math.isnan(lonely.effect)


def test_near_baseline_each_verdict() -> None:
    near = child_near_baseline(_rows([0.83, 0.84, 0.835], [0.5] * 3, logreg=0.85), "logreg")
    assert near.verdict == "holds" and near.effect == pytest.approx(-0.015) and near.threshold == -0.05
    far = child_near_baseline(_rows([0.70, 0.71, 0.72], [0.5] * 3, gbm=0.86), "gbm")
    assert far.verdict == "does not hold" and far.effect == pytest.approx(-0.15)
    unsure = child_near_baseline(_rows([0.75, 0.85, 0.80], [0.5] * 3, logreg=0.85), "logreg")
    assert unsure.verdict == "not resolved"


def _timings(ratios: list[list[float]]) -> list[dict[str, Any]]:
    return [{"table": f"t{i}", "split": 0, "seed": seed, "hypernetwork_s": r * 1e-4, "child_s": 1e-4}
            for seed, per in enumerate(ratios) for i, r in enumerate(per)]


def test_speed_claim_each_verdict() -> None:
    fast = child_inference_faster(_timings([[100, 100], [50, 200], [100, 100]]))
    assert fast.verdict == "holds" and fast.effect == pytest.approx(2.0)
    assert fast.numbers["speedup"] == pytest.approx(100)
    slow = child_inference_faster(_timings([[2, 2], [3, 3], [2.5, 2.5]]))
    assert slow.verdict == "does not hold"
    mixed = child_inference_faster(_timings([[1000, 1000], [1, 1], [10, 10]]))
    assert mixed.verdict == "not resolved"


def test_checks_pass_and_fail_on_the_measured_errors() -> None:
    good = child_checks({"reload_error": 0.0, "row_sum_error": 1e-16, "child_row_sum_error": 1e-7,
                         "permutation_error": 2e-6}, ["iris.safetensors"])
    assert [c.passed for c in good] == [True, True, True]
    bad = child_checks({"reload_error": 0.0, "row_sum_error": 1e-16, "child_row_sum_error": 1e-7,
                        "permutation_error": 0.5}, [])
    assert [c.passed for c in bad] == [False, True, False]


def test_table_and_report_shape() -> None:
    rows = _rows([0.84, 0.85, 0.86], [0.50, 0.52, 0.49])
    info = [{"table": "a", "rows": 100, "features": 4, "classes": 2}, {"table": "b", "rows": 50, "features": 3,
                                                                       "classes": 3}]
    columns, body = table(rows, info)
    assert columns[:2] == ["table", "rows x features x classes"] and columns[-1] == "paper"
    assert [r["table"] for r in body] == ["a", "b", "mean ROC AUC", "mean rank"]
    assert body[0][LABELS["gbm"]] == "0.860" and body[-1][LABELS["gbm"]] == "1.00"     # gbm best on both tables
    assert body[-1][LABELS["untrained"]] == "4.00"
    report = build_report(rows, info, _timings([[100, 100]] * 3), {"s0/final_loss": 1.2}, {
        "reload_error": 0.0, "row_sum_error": 0.0, "child_row_sum_error": 0.0, "permutation_error": 0.0},
        ["a.safetensors"], MothernetParams())
    assert [c.id for c in report.claims] == ["child_far_above_untrained", "child_near_logreg", "child_near_gbm",
                                             "child_inference_10x_faster"]
