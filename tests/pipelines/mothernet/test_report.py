"""MotherNet's claims and checks on constructed numbers: every verdict reachable (tables as units, paired), the
gates, the headline declared and not resolved without an MLP baseline, the checks, the table's shape."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.mothernet.params import LABELS, MothernetParams
from pipelines.mothernet.report import (
    HEADLINE,
    build_report,
    child_checks,
    child_ge_gd_mlp,
    child_near_baseline,
    far_above_untrained,
    inference_faster,
    table,
)

TABLES = ("a", "b", "c", "d", "e")


def _rows(
    child: list[float], untrained: list[float] | None = None, seeds: int = 2, **baselines: list[float]
) -> list[dict[str, Any]]:
    """One split per table; ``child`` / ``untrained`` / each baseline give the AUC per table (the child's seeds
    differ by ±0.005 around it)."""
    untrained = untrained or [0.5 + 0.01 * k for k in range(len(child))]
    rows = []
    for k, t in enumerate(TABLES[: len(child)]):
        for method, values in baselines.items():
            rows.append({"table": t, "split": 0, "method": method, "seed": -1, "auc": values[k]})
        for seed in range(seeds):
            shift = 0.005 * (1 if seed % 2 else -1)
            rows += [
                {"table": t, "split": 0, "method": "mothernet", "seed": seed, "auc": child[k] + shift},
                {"table": t, "split": 0, "method": "untrained", "seed": seed, "auc": untrained[k] - shift},
            ]
    return rows


CHILD = [0.80, 0.85, 0.90, 0.75, 0.82]


def test_the_headline_is_the_child_against_a_gd_trained_mlp() -> None:
    assert [s.id for s in HEADLINE] == ["child_ge_gd_mlp"] and HEADLINE[0].rule.kind == "non_inferiority"
    # rows without an MLP: not resolved, and says what is missing
    claim = child_ge_gd_mlp(_rows(CHILD, logreg=[0.85] * 5))
    assert claim.verdict == "not resolved" and claim.headline and "MLPClassifier(32)" in claim.reason


def test_the_headline_is_decided_once_an_mlp_runs() -> None:
    near = child_ge_gd_mlp(_rows(CHILD, mlp=[c + d for c, d in zip(CHILD, (0.01, -0.01, 0.02, 0.0, 0.01))]))
    assert near.verdict == "holds" and near.n == 5 and all(g.passed for g in near.gates)
    worse = child_ge_gd_mlp(_rows(CHILD, mlp=[c + d for c, d in zip(CHILD, (0.10, 0.09, 0.08, 0.11, 0.10))]))
    assert worse.verdict == "does not hold" and worse.effect == pytest.approx(-0.096)
    unsure = child_ge_gd_mlp(_rows(CHILD, mlp=[c + d for c, d in zip(CHILD, (0.15, -0.1, 0.05, -0.05, 0.1))]))
    assert unsure.verdict == "not resolved"
    # an MLP at chance, or a child no better than the untrained one, decides nothing
    blind = child_ge_gd_mlp(_rows(CHILD, mlp=[0.52, 0.47, 0.5, 0.53, 0.49]))
    assert blind.verdict == "not resolved" and LABELS["mlp"] in blind.reason
    flat = child_ge_gd_mlp(_rows([0.5, 0.52, 0.49, 0.51, 0.5], [0.5] * 5, mlp=[0.8] * 5))
    assert flat.verdict == "not resolved" and LABELS["untrained"] in flat.reason


def test_near_baseline_each_verdict_paired_by_table() -> None:
    near = child_near_baseline(
        _rows(CHILD, logreg=[c + d for c, d in zip(CHILD, (0.02, 0.0, 0.01, 0.03, 0.01))]), "logreg"
    )
    assert near.verdict == "holds" and near.effect == pytest.approx(-0.014) and near.n == 5
    far = child_near_baseline(_rows(CHILD, gbm=[c + d for c, d in zip(CHILD, (0.15, 0.12, 0.08, 0.2, 0.1))]), "gbm")
    assert far.verdict == "does not hold" and far.effect == pytest.approx(-0.13)
    unsure = child_near_baseline(
        _rows(CHILD, logreg=[c + d for c, d in zip(CHILD, (0.2, -0.1, 0.0, 0.1, -0.05))]), "logreg"
    )
    assert unsure.verdict == "not resolved"
    shuffled = list(reversed(_rows(CHILD, logreg=[c + 0.02 for c in CHILD])))
    assert child_near_baseline(shuffled, "logreg").effect == pytest.approx(-0.02)


def test_a_child_or_baseline_that_did_not_learn_decides_nothing() -> None:
    # the child is no better than the untrained hypernetwork's child
    flat = child_near_baseline(
        _rows([0.5, 0.52, 0.49, 0.51, 0.5], [0.5, 0.5, 0.5, 0.5, 0.5], logreg=[0.5, 0.51, 0.5, 0.52, 0.49]), "logreg"
    )
    assert flat.verdict == "not resolved" and "gate failed" in flat.reason and LABELS["untrained"] in flat.reason
    # a baseline at chance (ROC AUC 0.5) decides nothing either
    blind = child_near_baseline(_rows(CHILD, gbm=[0.52, 0.47, 0.5, 0.53, 0.49]), "gbm")
    assert blind.verdict == "not resolved" and "chance (ROC AUC 0.5)" in blind.reason
    assert child_near_baseline(_rows(CHILD), "gbm").verdict == "not resolved"  # gbm not run


def _timings(ratios: list[list[float]]) -> list[dict[str, Any]]:
    return [
        {"table": f"t{i}", "split": 0, "seed": seed, "hypernetwork_s": r * 1e-4, "child_s": 1e-4}
        for seed, per in enumerate(ratios)
        for i, r in enumerate(per)
    ]


def test_by_construction_facts_are_checks() -> None:
    assert far_above_untrained(_rows(CHILD)).passed
    assert not far_above_untrained(_rows([0.55] * 5, [0.5] * 5)).passed
    fast = inference_faster(_timings([[100, 100], [50, 200], [100, 100]]))
    assert fast.passed and fast.numbers["speedup"] == pytest.approx(100)
    assert fast.timed and not far_above_untrained(_rows(CHILD)).timed  # seconds stay out of the tracked report
    assert not inference_faster(_timings([[2, 2], [3, 3], [2.5, 2.5]])).passed
    assert not inference_faster([]).passed


def test_checks_pass_and_fail_on_the_measured_errors() -> None:
    good = child_checks(
        {"reload_error": 0.0, "row_sum_error": 1e-16, "child_row_sum_error": 1e-7, "permutation_error": 2e-6},
        ["iris.safetensors"],
    )
    assert [c.passed for c in good] == [True, True, True]
    bad = child_checks(
        {"reload_error": 0.0, "row_sum_error": 1e-16, "child_row_sum_error": 1e-7, "permutation_error": 0.5}, []
    )
    assert [c.passed for c in bad] == [False, True, False]


def test_table_and_report_shape() -> None:
    rows = _rows([0.84, 0.85], [0.50, 0.52], logreg=[0.85, 0.85], gbm=[0.86, 0.86])
    info = [
        {"table": "a", "rows": 100, "features": 4, "classes": 2},
        {"table": "b", "rows": 50, "features": 3, "classes": 3},
    ]
    columns, body = table(rows, info)
    assert columns[:2] == ["table", "rows x features x classes"] and columns[-1] == "paper"
    assert [r["table"] for r in body] == ["a", "b", "mean ROC AUC", "mean rank"]
    assert body[0][LABELS["gbm"]] == "0.860" and body[-1][LABELS["gbm"]] == "1.00"  # gbm best on both tables
    assert body[-1][LABELS["untrained"]] == "4.00"
    report = build_report(
        rows,
        info,
        _timings([[100, 100]] * 3),
        {"s0/final_loss": 1.2},
        {"reload_error": 0.0, "row_sum_error": 0.0, "child_row_sum_error": 0.0, "permutation_error": 0.0},
        ["a.safetensors"],
        MothernetParams(),
    )
    assert [c.id for c in report.claims] == ["child_ge_gd_mlp", "child_near_logreg", "child_near_gbm"]
    assert [c.id for c in report.checks][:2] == ["child_far_above_untrained", "child_inference_10x_faster"]
