"""STAR's claims and checks on constructed numbers: every verdict reachable, the precondition, the table shape."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pipelines.star.params import StarParams
from pipelines.star.report import build_report, claims, invariant_checks, star_claim, table


def _rows(stream: str, star: list[float], base: list[float], sgd: float | None = 20.0,
          buffers: tuple[int, ...] = (200, 500)) -> list[dict[str, Any]]:
    """Runs of er_star / er on ``stream``; ``star[i]`` / ``base[i]`` belong to unit i = (buffer, seed)."""
    units = [(b, s) for b in buffers for s in range(len(star) // len(buffers))]
    rows = []
    for (buffer, seed), a, b in zip(units, star, base):
        for method, acc in (("er_star", a), ("er", b)):
            rows.append({"stream": stream, "method": method, "buffer": buffer, "seed": seed, "class_il": acc,
                         "task_il": acc + 10, "forgetting_class_il": 100 - acc, "seconds": 1.0})
    if sgd is not None:
        rows += [{"stream": stream, "method": "sgd", "buffer": 0, "seed": s, "class_il": sgd, "task_il": 90.0,
                  "forgetting_class_il": 95.0, "seconds": 1.0} for s in range(len(star) // len(buffers))]
    return rows


def test_each_verdict_is_reachable() -> None:
    holds = star_claim(_rows("seq-mnist", [82, 83, 84, 85], [80, 80.5, 81, 82]), "seq-mnist", "er_star")
    assert holds.verdict == "holds" and holds.id == "er_star_ge_er_seq_mnist" and holds.n == 4
    assert holds.effect == pytest.approx(2.625) and holds.numbers["wins"] == 4
    assert holds.numbers["difference_b200"] == pytest.approx(2.25)
    worse = star_claim(_rows("seq-mnist", [78, 78.5, 79, 80], [80, 80.5, 81, 82]), "seq-mnist", "er_star")
    assert worse.verdict == "does not hold" and worse.effect == pytest.approx(-2.0)
    noisy = star_claim(_rows("seq-mnist", [85, 76, 84, 77], [80, 80, 80, 80]), "seq-mnist", "er_star")
    assert noisy.verdict == "not resolved" and noisy.ci[0] < 0 < noisy.ci[1]


def test_precondition_rehearsal_must_beat_fine_tuning() -> None:
    # STAR's gain is clear, but the base is no better than fine-tuning: the comparison says nothing
    claim = star_claim(_rows("seq-mnist", [22, 23, 24, 25], [19, 19.5, 20, 21], sgd=25.0), "seq-mnist", "er_star")
    assert claim.verdict == "not resolved" and not claim.precondition.met
    assert "fine-tuning" in claim.precondition.description
    without_sgd = star_claim(_rows("seq-mnist", [22, 23, 24, 25], [19, 19.5, 20, 21], sgd=None), "seq-mnist",
                             "er_star")
    assert without_sgd.verdict == "holds" and without_sgd.precondition is None


def test_missing_pairs_are_not_resolved_and_claims_follow_the_methods() -> None:
    rows = [r for r in _rows("seq-fmnist", [82, 83, 84, 85], [80, 80, 81, 82]) if r["method"] != "er"]
    lonely = star_claim(rows, "seq-fmnist", "er_star")
    assert lonely.verdict == "not resolved" and lonely.n == 0 and math.isnan(lonely.effect)
    both = [r for stream in ("seq-mnist", "seq-fmnist") for r in _rows(stream, [82, 83, 84, 85], [80, 80, 81, 82])]
    ids = [c.id for c in claims(both, ["seq-mnist", "seq-fmnist"], ["sgd", "er", "er_star", "derpp_star"])]
    assert ids == ["er_star_ge_er_seq_mnist", "er_star_ge_er_seq_fmnist"]   # derpp_star has no base here


def measured(**change: Any) -> dict[str, Any]:
    base = {"run": "seq-mnist_b200_s0", "mask": 60, "batch": 64, "gamma": 0.01, "steps": 1, "init": "official",
            "applied": True, "kl": 1e-4, "norm_ratio": {"features.0.weight": 1.0000001, "classifier.weight": 0.9999999},
            "max_norm_error": 1e-7, "perturbed": ["classifier.weight", "features.0.weight"],
            "unperturbed": ["classifier.bias", "features.0.bias"], "biases_untouched": True, "bit_exact": True,
            "grad_norms": {"features.0.weight": 0.02, "classifier.weight": 0.01, "features.0.bias": 0.0,
                           "classifier.bias": 0.001},
            "grad_nonzero": True, "skips_below_two": True, "grad_rel_diff": 0.0}
    return {**base, **change}


def test_checks_pass_on_good_measurements_and_fail_on_each_broken_invariant() -> None:
    assert all(c.passed for c in invariant_checks({"er_star": measured()}))
    broken = {
        "er_star_delta_norm": measured(max_norm_error=0.02),
        "er_star_biases_untouched": measured(biases_untouched=False),
        "er_star_weights_bit_exact": measured(bit_exact=False),
        "er_star_gradient_nonzero": measured(skips_below_two=False),
        "er_star_gradient_at_perturbed_weights": measured(grad_rel_diff=0.5),
    }
    for check_id, m in broken.items():
        failed = [c.id for c in invariant_checks({"er_star": m}) if not c.passed]
        assert failed == [check_id]
    skipped = invariant_checks({"derpp_star": {"run": "x", "mask": 1, "batch": 64, "applied": False}})
    assert [(c.id, c.passed) for c in skipped] == [("derpp_star_term_applied", False)]


def test_table_groups_rows_by_buffer_and_cites_the_published_cells() -> None:
    rows = _rows("seq-mnist", [82, 83, 84, 85], [80, 80, 81, 82])
    columns, body = table(rows, ["seq-mnist"], ["sgd", "er", "er_star"], [200, 500])
    assert columns == ["buffer", "method", "seq-MNIST Class-IL", "seq-MNIST Task-IL", "seq-MNIST forgetting",
                       "published seq-MNIST Class-IL"]
    assert [(r["buffer"], r["method"]) for r in body] == [("–", "SGD (fine-tuning, no replay)"), (200, "ER"),
                                                         (200, "ER + STAR"), (500, "ER"), (500, "ER + STAR")]
    assert body[1]["published seq-MNIST Class-IL"] == 80.43 and body[3]["published seq-MNIST Class-IL"] is None
    assert body[1]["seq-MNIST Class-IL"].startswith("80.00 ± ")
    data = {"streams": {"seq-mnist": {"tasks": 5, "train_per_task": [4000] * 5, "train_available": 60000,
                                      "test_per_task": [2000] * 5}}}
    params = StarParams.model_validate({"data": {"datasets": ["seq-mnist"]},
                                        "train": {"methods": ["sgd", "er", "er_star"]}})
    report = build_report(rows, {"er_star": measured()}, data, params)
    assert [c.id for c in report.claims] == ["er_star_ge_er_seq_mnist"] and len(report.checks) == 5
