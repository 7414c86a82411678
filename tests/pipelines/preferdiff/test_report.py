"""PreferDiff's claims on constructed numbers: every verdict reachable, the precondition, the convergence count
and the table's shape."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.preferdiff.params import PreferdiffParams
from pipelines.preferdiff.report import build_report, convergence_claim, epochs_to_reach, paired_claim, table


def _rows(values: dict[str, list[float]]) -> list[dict[str, Any]]:
    """One row per (method, seed) with recall@5 = ndcg@5 * 2 = the given fraction."""
    return [{"method": m, "seed": s, "recall@5": v, "ndcg@5": v / 2, "recall@10": v, "ndcg@10": v / 2,
             "best_epoch": 3} for m, vs in values.items() for s, v in enumerate(vs)]


def test_each_verdict_is_reachable() -> None:
    holds = paired_claim(_rows({"preferdiff": [0.05, 0.06, 0.07], "mse": [0.03, 0.035, 0.05]}), "pd", "c",
                         "preferdiff", "mse", "recall@5", n_items=1000)
    assert holds.verdict == "holds" and holds.n == 3
    assert holds.effect == pytest.approx(100 * (0.02 + 0.025 + 0.02) / 3) and holds.numbers["wins"] == 3
    worse = paired_claim(_rows({"preferdiff": [0.02, 0.025, 0.03], "mse": [0.03, 0.035, 0.041]}), "pd", "c",
                         "preferdiff", "mse", "recall@5", n_items=1000)
    assert worse.verdict == "does not hold"
    noisy = paired_claim(_rows({"cosine": [0.05, 0.02, 0.04], "mse": [0.03, 0.04, 0.04]}), "cm", "c",
                         "cosine", "mse", "ndcg@5", n_items=1000)
    assert noisy.verdict == "not resolved" and noisy.ci[0] < 0 < noisy.ci[1]


def test_precondition_mse_must_rank_above_chance() -> None:
    # MSE at 0.4% Recall@5 with 1000 items (chance 0.5%): PreferDiff's lead is not decidable
    claim = paired_claim(_rows({"preferdiff": [0.05, 0.06, 0.07], "mse": [0.004, 0.004, 0.004]}), "pd", "c",
                         "preferdiff", "mse", "recall@5", n_items=1000)
    assert claim.verdict == "not resolved" and not claim.precondition.met
    single = paired_claim(_rows({"preferdiff": [0.05], "mse": [0.03]}), "pd", "c", "preferdiff", "mse",
                          "recall@5", n_items=1000)
    assert single.verdict == "not resolved" and single.n == 1


def _curve(method: str, seed: int, values: list[float]) -> list[dict[str, Any]]:
    return [{"method": method, "seed": seed, "epoch": e + 1, "recall@5": v, "ndcg@5": v} for e, v in enumerate(values)]


def test_epochs_to_reach_and_the_convergence_claim() -> None:
    assert epochs_to_reach(_curve("mse", 0, [0.01, 0.03, 0.02]), 0.02) == 2
    assert epochs_to_reach(_curve("mse", 0, [0.01, 0.01]), 0.5) == 3          # never: one past the end
    faster = [c for s in range(3) for c in _curve("mse", s, [0.01, 0.02, 0.03, 0.04])
              + _curve("preferdiff", s, [0.02, 0.05 - 0.01 * (s == 2), 0.05, 0.05])]
    claim = convergence_claim(faster)
    # MSE reaches its final 0.04 at epoch 4; PreferDiff at epoch 2 on every seed
    assert claim.verdict == "holds" and claim.effect == pytest.approx(2.0)
    slower = [c for s in range(3) for c in _curve("mse", s, [0.04, 0.04 + 0.001 * s, 0.04, 0.04])
              + _curve("preferdiff", s, [0.01, 0.02, 0.03, 0.05])]
    assert convergence_claim(slower).verdict == "does not hold"


def test_table_and_report_shape() -> None:
    rows = _rows({"mse": [0.03, 0.04, 0.05], "cosine": [0.04, 0.04, 0.05], "preferdiff": [0.05, 0.05, 0.06],
                  "sasrec": [0.08, 0.09, 0.1]})
    columns, body = table(rows, ["mse", "cosine", "preferdiff", "sasrec"])
    assert columns[:5] == ["method", "recall@5", "ndcg@5", "recall@10", "ndcg@10"]
    assert body[0]["recall@5"].startswith("4.00 ±") and body[2]["paper Recall@5 / NDCG@5"] == "not retrieved"
    curves = [c for s in range(3) for m in ("mse", "preferdiff") for c in _curve(m, s, [0.01, 0.02])]
    report = build_report(rows, curves, {"source": "x", "n_items": 100, "train_users": 8, "valid_users": 1,
                                         "test_users": 1}, {"train_examples": 50, "test_examples": 5},
                          PreferdiffParams())
    assert [c.id for c in report.claims] == ["preferdiff_gt_mse_recall5", "preferdiff_gt_mse_ndcg5",
                                             "cosine_ge_mse_recall5", "preferdiff_converges_faster"]
    assert report.checks[0].id == "sasrec_learns" and report.checks[0].passed
