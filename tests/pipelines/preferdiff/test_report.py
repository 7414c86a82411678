"""PreferDiff's claims on constructed numbers: every verdict reachable, the popularity gate on every arm (the
convergence claim included), the convergence count and the table's shape."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.preferdiff.params import PreferdiffParams
from pipelines.preferdiff.report import (
    COSINE_GE_MSE_RECALL5,
    HEADLINE,
    PREFERDIFF_GT_MSE_RECALL5,
    build_report,
    convergence_claim,
    epochs_to_reach,
    paired_claim,
    table,
)

# the popularity ranker at 2 % Recall@5 (1 % NDCG@5) on test, 1.5 % on validation
POPULAR = {
    "popularity/recall_at_5": 0.02,
    "popularity/ndcg_at_5": 0.01,
    "popularity/recall_at_10": 0.04,
    "popularity/ndcg_at_10": 0.015,
    "popularity/valid_recall_at_5": 0.015,
}


def _rows(values: dict[str, list[float]]) -> list[dict[str, Any]]:
    """One row per (method, seed) with recall@5 = ndcg@5 * 2 = the given fraction."""
    return [
        {"method": m, "seed": s, "recall@5": v, "ndcg@5": v / 2, "recall@10": v, "ndcg@10": v / 2, "best_epoch": 3}
        for m, vs in values.items()
        for s, v in enumerate(vs)
    ]


def _headline(values: dict[str, list[float]], summary: dict[str, float] = POPULAR):
    return paired_claim(_rows(values), summary, PREFERDIFF_GT_MSE_RECALL5, "preferdiff", "mse", "recall@5", 1000)


def test_the_headline_is_preferdiff_over_mse_on_recall5() -> None:
    assert HEADLINE == (PREFERDIFF_GT_MSE_RECALL5,) and PREFERDIFF_GT_MSE_RECALL5.headline


def test_each_verdict_is_reachable() -> None:
    holds = _headline({"preferdiff": [0.05, 0.06, 0.07], "mse": [0.03, 0.035, 0.04]})
    assert holds.verdict == "holds" and holds.n == 3 and all(g.passed for g in holds.gates)
    assert holds.effect == pytest.approx(100 * (0.02 + 0.025 + 0.03) / 3) and holds.numbers["wins"] == 3
    assert _headline({"preferdiff": [0.03, 0.035, 0.04], "mse": [0.04, 0.045, 0.051]}).verdict == "does not hold"
    # no gain, measured tightly enough to exclude the smallest effect (0.5 pp): a decided negative
    tie = _headline({"preferdiff": [0.0401, 0.0449, 0.0502], "mse": [0.04, 0.045, 0.05]})
    assert tie.verdict == "does not hold" and abs(tie.effect) < 0.5
    noisy = paired_claim(
        _rows({"cosine": [0.05, 0.03, 0.06], "mse": [0.03, 0.05, 0.04]}),
        POPULAR,
        COSINE_GE_MSE_RECALL5,
        "cosine",
        "mse",
        "recall@5",
        1000,
    )
    assert noisy.verdict == "not resolved" and noisy.ci[0] < 0 < noisy.ci[1]


def test_an_arm_below_popularity_decides_nothing() -> None:
    # MSE at 0.4 % Recall@5 (below chance 0.5 %, far below popularity's 2 %): not resolved, the gate named
    claim = _headline({"preferdiff": [0.05, 0.06, 0.07], "mse": [0.004, 0.005, 0.003]})
    assert claim.verdict == "not resolved" and "gate failed" in claim.reason and "popularity" in claim.reason
    # above chance but not above popularity: a model that learned less than counting items decides nothing either
    assert _headline({"preferdiff": [0.015, 0.012, 0.01], "mse": [0.03, 0.035, 0.04]}).verdict == "not resolved"
    # popularity not measured: the gate cannot pass
    assert _headline({"preferdiff": [0.05, 0.06, 0.07], "mse": [0.03, 0.035, 0.04]}, {}).verdict == "not resolved"
    single = _headline({"preferdiff": [0.05], "mse": [0.03]})
    assert single.verdict == "not resolved" and single.n == 1
    missing = paired_claim(
        _rows({"preferdiff": [0.05, 0.06]}), POPULAR, PREFERDIFF_GT_MSE_RECALL5, "preferdiff", "mse", "recall@5", 1000
    )
    assert missing.verdict == "not resolved" and "mse not trained" in missing.reason


def test_seeds_pair_by_key() -> None:
    rows = _rows({"preferdiff": [0.05, 0.06, 0.07], "mse": [0.03, 0.035, 0.05]})
    reversed_rows = list(reversed(rows))
    claim = paired_claim(reversed_rows, POPULAR, PREFERDIFF_GT_MSE_RECALL5, "preferdiff", "mse", "recall@5", 1000)
    assert claim.effect == pytest.approx(100 * (0.02 + 0.025 + 0.02) / 3)
    rows[-1] = {**rows[-1], "seed": 9}
    with pytest.raises(ValueError, match="different units"):
        paired_claim(rows, POPULAR, PREFERDIFF_GT_MSE_RECALL5, "preferdiff", "mse", "recall@5", 1000)


def _curve(method: str, seed: int, values: list[float]) -> list[dict[str, Any]]:
    return [{"method": method, "seed": seed, "epoch": e + 1, "recall@5": v, "ndcg@5": v} for e, v in enumerate(values)]


def test_epochs_to_reach_and_the_convergence_claim() -> None:
    assert epochs_to_reach(_curve("mse", 0, [0.01, 0.03, 0.02]), 0.02) == 2
    assert epochs_to_reach(_curve("mse", 0, [0.01, 0.01]), 0.5) == 3  # never: one past the end
    faster = [
        c
        for s in range(3)
        for c in _curve("mse", s, [0.01, 0.02, 0.03, 0.04 + 0.001 * s])
        + _curve("preferdiff", s, [0.02, 0.05 - 0.01 * (s == 2), 0.05, 0.05])
    ]
    claim = convergence_claim(faster, POPULAR)
    # MSE reaches its final ~0.04 at epoch 4; PreferDiff at epoch 2 or 3
    assert claim.verdict == "holds" and claim.effect == pytest.approx(5 / 3)
    slower = [
        c
        for s in range(3)
        for c in _curve("mse", s, [0.04, 0.04 + 0.001 * s, 0.04, 0.04])
        + _curve("preferdiff", s, [0.01, 0.02, 0.03 + 0.01 * (s == 1), 0.05])
    ]
    assert convergence_claim(slower, POPULAR).verdict == "does not hold"


def test_convergence_at_chance_is_not_resolved() -> None:
    # MSE's final validation Recall@5 (0.4-0.6 %) is below popularity's 1.5 %: "reaching" it means nothing
    noise = [
        c
        for s in range(3)
        for c in _curve("mse", s, [0.006, 0.002, 0.004 + 0.001 * s]) + _curve("preferdiff", s, [0.01, 0.02, 0.03])
    ]
    claim = convergence_claim(noise, POPULAR)
    assert claim.verdict == "not resolved" and "gate failed" in claim.reason
    assert "Diffusion, MSE-x0" in claim.reason
    assert convergence_claim(_curve("mse", 0, [0.01]), POPULAR).reason.startswith("not measured")


def test_table_and_report_shape() -> None:
    rows = _rows(
        {
            "mse": [0.03, 0.04, 0.05],
            "cosine": [0.04, 0.04, 0.05],
            "preferdiff": [0.05, 0.05, 0.06],
            "sasrec": [0.08, 0.09, 0.1],
        }
    )
    columns, body = table(rows, ["mse", "cosine", "preferdiff", "sasrec"], POPULAR)
    assert columns[:5] == ["method", "recall@5", "ndcg@5", "recall@10", "ndcg@10"]
    assert body[0]["recall@5"].startswith("4.00 ±") and body[2]["paper Recall@5 / NDCG@5"] == "not retrieved"
    assert body[-1]["method"].startswith("Popularity") and body[-1]["recall@5"] == "2.00"
    curves = [c for s in range(3) for m in ("mse", "preferdiff") for c in _curve(m, s, [0.01, 0.02])]
    report = build_report(
        rows,
        curves,
        {"source": "x", "n_items": 1000, "train_users": 8, "valid_users": 1, "test_users": 1},
        {"train_examples": 50, "test_examples": 5, **POPULAR},
        PreferdiffParams(),
    )
    assert [c.id for c in report.claims] == [
        "preferdiff_gt_mse_recall5",
        "preferdiff_gt_mse_ndcg5",
        "cosine_ge_mse_recall5",
        "preferdiff_converges_faster",
    ]
    assert [c.id for c in report.headline] == ["preferdiff_gt_mse_recall5"]
    assert {c.id: c.passed for c in report.checks} == {"sasrec_learns": True, "popularity_above_chance": True}
