"""STAR's claims and checks on constructed numbers: every verdict reachable, the learning gates, the table shape."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.star.params import StarParams
from pipelines.star.report import HEADLINE, build_report, claims, headline_claim, invariant_checks, table


def _rows(
    star: list[float],
    base: list[float],
    sgd: list[float] | None = None,
    stream: str = "seq-mnist",
    buffer: int = 200,
    method: str = "er_star",
    base_method: str = "er",
) -> list[dict[str, Any]]:
    """Runs of ``method`` / ``base_method`` at one buffer; ``star[i]`` / ``base[i]`` / ``sgd[i]`` belong to seed i."""
    rows = []
    for seed, (a, b) in enumerate(zip(star, base)):
        for m, acc in ((method, a), (base_method, b)):
            rows.append(
                {
                    "stream": stream,
                    "method": m,
                    "buffer": buffer,
                    "seed": seed,
                    "class_il": acc,
                    "task_il": acc + 10,
                    "forgetting_class_il": 100 - acc,
                }
            )
    for seed, acc in enumerate(sgd or []):
        rows.append(
            {
                "stream": stream,
                "method": "sgd",
                "buffer": 0,
                "seed": seed,
                "class_il": acc,
                "task_il": 90.0,
                "forgetting_class_il": 95.0,
            }
        )
    return rows


SGD = [19.0, 20.0, 21.0, 19.5]


def test_the_headline_is_pre_registered() -> None:
    assert [s.id for s in HEADLINE] == ["er_star_ge_er_seq_mnist_b200"] and HEADLINE[0].headline
    assert HEADLINE[0].rule.smallest_effect == 1.0 and "buffer 200" in HEADLINE[0].rule.source


def test_each_verdict_is_reachable() -> None:
    holds = headline_claim(_rows([83, 84, 85, 85.5], [80, 81, 82, 82], SGD))
    assert holds.verdict == "holds" and holds.id == "er_star_ge_er_seq_mnist_b200" and holds.n == 4
    assert holds.effect == pytest.approx(3.125) and holds.numbers["wins"] == 4 and holds.headline
    worse = headline_claim(_rows([78, 78.7, 79, 79.8], [80, 80.5, 81, 82], SGD))
    assert worse.verdict == "does not hold" and worse.effect == pytest.approx(-2.0)
    noisy = headline_claim(_rows([85, 76, 84, 77], [80, 80, 80, 80], SGD))
    assert noisy.verdict == "not resolved" and noisy.ci[0] < 0 < noisy.ci[1] and noisy.units_needed


def test_a_gain_below_the_smallest_effect_is_a_decided_negative() -> None:
    # the interval straddles 0 but excludes every gain of 1 pp or more: a decided negative, not "not resolved"
    flat = headline_claim(_rows([80.2, 80.9, 82.1, 81.9], [80, 81, 82, 82], SGD))
    assert flat.ci[0] < 0 < flat.ci[1] < 1.0 and flat.verdict == "does not hold"


def test_arms_that_do_not_beat_fine_tuning_decide_nothing() -> None:
    # a clear STAR gain, but ER is no better than fine-tuning without replay: the comparison says nothing
    claim = headline_claim(_rows([23, 22.5, 25, 22.2], [20, 19, 22, 19], SGD))
    assert claim.verdict == "not resolved" and "gate failed" in claim.reason
    assert "SGD (fine-tuning, no replay)" in claim.reason and "ER vs" in claim.reason
    passed = headline_claim(_rows([83, 84, 85, 85.5], [80, 81, 82, 82], SGD))
    assert [g.passed for g in passed.gates] == [True, True]


def test_without_fine_tuning_the_arms_must_beat_chance() -> None:
    at_chance = headline_claim(_rows([12, 8, 13, 9.5], [9, 7, 11, 6]))
    assert at_chance.verdict == "not resolved" and "chance (10.0 %)" in at_chance.reason
    learned = headline_claim(_rows([83, 84, 85, 85.5], [80, 81, 82, 82]))
    assert learned.verdict == "holds" and all("chance" in g.reference for g in learned.gates)


def test_missing_cells_are_not_resolved_and_seeds_pair_by_key() -> None:
    elsewhere = headline_claim(_rows([83, 84, 85], [80, 81, 82], SGD[:3], buffer=500))
    assert elsewhere.verdict == "not resolved" and elsewhere.n == 0 and "buffer 200" in elsewhere.reason
    rows = _rows([83, 84, 85], [80, 81, 82], SGD[:3])
    rows = [r for r in rows if not (r["method"] == "er" and r["seed"] == 2)]
    with pytest.raises(ValueError, match="different units"):
        headline_claim(rows)


def test_secondary_claims_follow_the_grid() -> None:
    rows = _rows([83, 84, 85], [80, 81, 82], SGD[:3]) + _rows([83, 84, 85], [80, 81, 82], buffer=500)
    rows += _rows([83, 84, 85], [80, 81, 82], SGD[:3], stream="seq-fmnist")
    chance = {"seq-mnist": 10.0, "seq-fmnist": 10.0}
    out = claims(rows, ["seq-mnist", "seq-fmnist"], ["sgd", "er", "er_star", "derpp_star"], [200, 500], chance)
    assert [c.id for c in out] == [
        "er_star_ge_er_seq_mnist_b200",
        "er_star_ge_er_seq_mnist_b500",
        "er_star_ge_er_seq_fmnist_b200",
        "er_star_ge_er_seq_fmnist_b500",
    ]
    assert [c.headline for c in out] == [True, False, False, False]  # derpp_star has no base here
    assert out[-1].verdict == "not resolved" and out[-1].n == 0


def measured(**change: Any) -> dict[str, Any]:
    base = {
        "run": "seq-mnist_b200_s0",
        "mask": 60,
        "batch": 64,
        "gamma": 0.01,
        "steps": 1,
        "init": "official",
        "applied": True,
        "kl": 1e-4,
        "norm_ratio": {"features.0.weight": 1.0000001, "classifier.weight": 0.9999999},
        "max_norm_error": 1e-7,
        "perturbed": ["classifier.weight", "features.0.weight"],
        "unperturbed": ["classifier.bias", "features.0.bias"],
        "biases_untouched": True,
        "bit_exact": True,
        "grad_norms": {
            "features.0.weight": 0.02,
            "classifier.weight": 0.01,
            "features.0.bias": 0.0,
            "classifier.bias": 0.001,
        },
        "grad_nonzero": True,
        "skips_below_two": True,
        "grad_rel_diff": 0.0,
    }
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
    rows = _rows([82, 83], [80, 80], SGD[:2]) + _rows([84, 85], [81, 82], buffer=500)
    columns, body = table(rows, ["seq-mnist"], ["sgd", "er", "er_star"], [200, 500])
    assert columns == [
        "buffer",
        "method",
        "seq-MNIST Class-IL",
        "seq-MNIST Task-IL",
        "seq-MNIST forgetting",
        "published seq-MNIST Class-IL",
    ]
    assert [(r["buffer"], r["method"]) for r in body] == [
        ("–", "SGD (fine-tuning, no replay)"),
        (200, "ER"),
        (200, "ER + STAR"),
        (500, "ER"),
        (500, "ER + STAR"),
    ]
    assert body[1]["published seq-MNIST Class-IL"] == 80.43 and body[3]["published seq-MNIST Class-IL"] is None
    assert body[1]["seq-MNIST Class-IL"].startswith("80.00 ± ")
    data = {
        "streams": {
            "seq-mnist": {
                "tasks": 5,
                "train_per_task": [4000] * 5,
                "train_available": 60000,
                "test_per_task": [2000] * 5,
            }
        }
    }
    params = StarParams.model_validate(
        {"data": {"datasets": ["seq-mnist"]}, "train": {"methods": ["sgd", "er", "er_star"]}}
    )
    report = build_report(rows, {"er_star": measured()}, data, params)
    assert [c.id for c in report.claims] == ["er_star_ge_er_seq_mnist_b200", "er_star_ge_er_seq_mnist_b500"]
    assert len(report.checks) == 5 and report.headline[0].holm_verdict == report.headline[0].verdict
