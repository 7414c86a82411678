"""grf_masking report functions on constructed numbers: every verdict of each claim is reachable, a model that
did not learn decides nothing, and the by-construction facts are checks."""

from __future__ import annotations

import math

import pytest

from pipelines.grf_masking.report import (
    HEADLINE,
    checks,
    grf_ge_unmasked,
    mask_error_check,
    ratios,
    scaling_checks,
    table,
)


def _acc(grf: list[float], lin: list[float], task: str = "point_clouds") -> list[dict]:
    return [
        row
        for seed, (grf_acc, lin_acc) in enumerate(zip(grf, lin))
        for row in (
            {"task": task, "seed": seed, "variant": "grf_mask", "test_accuracy": grf_acc, "parameters": 10},
            {"task": task, "seed": seed, "variant": "linear", "test_accuracy": lin_acc, "parameters": 10},
        )
    ]


def _clouds(rows: list[dict]):
    return grf_ge_unmasked(rows, "point_clouds", classes=6)


def test_the_point_cloud_comparison_is_the_headline() -> None:
    assert [s.id for s in HEADLINE] == ["grf_ge_unmasked_clouds"]
    assert all(s.rule.kind == "superiority" and math.isclose(s.rule.smallest_effect, 1.85) for s in HEADLINE)
    assert "3.7" in HEADLINE[0].rule.source
    mnist = grf_ge_unmasked(_acc([95.0, 96.0, 97.0], [91.0, 91.5, 92.0], "mnist"))
    assert not mnist.headline and _clouds(_acc([60.0, 61.0, 62.0], [50.0, 50.5, 51.0])).headline


def test_grf_claim_reaches_every_verdict() -> None:
    # the unmasked baseline learned (50-51 % > 2x chance = 33.3 % for 6 classes); GRF beats chance
    held = _clouds(_acc([60.0, 61.0, 62.0], [50.0, 50.5, 51.0]))
    assert held.verdict == "holds" and [g.passed for g in held.gates] == [True, True]
    assert _clouds(_acc([45.0, 45.9, 45.6], [50.0, 50.5, 51.0])).verdict == "does not hold"
    # no gain, measured well enough to exclude half the paper's +3.7 points, is a decided negative too
    small = _clouds(_acc([50.3, 50.3, 51.1], [50.0, 50.5, 51.0]))
    assert small.verdict == "does not hold" and 0 < small.effect < 1.85 and small.ci[0] < 0
    unsure = _clouds(_acc([65.0, 45.0, 56.0], [50.0, 50.0, 50.0]))
    assert unsure.verdict == "not resolved" and unsure.units_needed is not None


def test_an_unmasked_baseline_that_did_not_learn_decides_nothing() -> None:
    # GRF well ahead, but the unmasked arm is at 2x chance (33.3 %) within its interval: not a trained model
    claim = _clouds(_acc([55.0, 57.0, 56.0], [30.0, 36.0, 34.0]))
    assert claim.verdict == "not resolved" and "gate failed" in claim.reason and "unmasked linear" in claim.reason
    # on MNIST the bar is 90 %: a ViT at 75-80 % is not trained, whatever the GRF arm does
    vit = grf_ge_unmasked(_acc([70.0, 71.0, 72.0], [75.0, 80.0, 78.0], "mnist"))
    assert vit.verdict == "not resolved" and "90.0" in vit.reason
    # a GRF arm at chance (16.7 %) fails its own gate
    assert "GRF-masked linear" in _clouds(_acc([15.0, 18.0, 17.0], [50.0, 50.5, 51.0])).reason
    # one seed gives no interval for the gate either
    assert _clouds(_acc([90.0], [80.0])).verdict == "not resolved"


def test_a_missing_arm_is_not_resolved_and_seeds_pair_by_key() -> None:
    rows = [r for r in _acc([60.0, 61.0], [50.0, 51.0]) if r["variant"] == "grf_mask"]
    claim = _clouds(rows)
    assert claim.verdict == "not resolved" and "linear" in claim.reason
    shuffled = list(reversed(_acc([60.0, 61.0, 62.0], [55.0, 55.5, 56.0])))
    assert math.isclose(_clouds(shuffled).effect, 5.5)
    mismatched = _acc([60.0, 61.0, 62.0], [55.0, 55.5, 56.0])
    mismatched[-1] = {**mismatched[-1], "seed": 7}  # the linear arm's last seed is another unit
    with pytest.raises(ValueError, match="different units"):
        _clouds(mismatched)


def test_each_task_is_its_own_claim_with_its_own_bar() -> None:
    rows = _acc([95.0, 96.0, 97.0], [91.0, 91.5, 92.0], "mnist") + _acc([50.0, 52.0, 51.0], [40.0, 41.0, 42.0])
    mnist, clouds = grf_ge_unmasked(rows), _clouds(rows)
    assert (mnist.id, clouds.id) == ("grf_ge_unmasked", "grf_ge_unmasked_clouds")
    assert math.isclose(mnist.effect, 4.5) and math.isclose(clouds.effect, 10.0)
    assert mnist.verdict == clouds.verdict == "holds"
    # with 2 classes the bar is 2x 50 % = 100 %: the unmasked arm (40-42 %) cannot pass, nothing is decided
    two = grf_ge_unmasked(rows, "point_clouds", classes=2)
    assert two.verdict == "not resolved" and "100.0" in two.reason


def _errors(slopes: list[float]) -> list[dict]:
    # error = c * n ** slope exactly, so each seed's fitted slope is the one given
    return [
        {"seed": s, "n_walks": n, "relative_error": 2.0 * n**slope}
        for s, slope in enumerate(slopes)
        for n in (1, 2, 4, 8, 16)
    ]


def test_mask_error_rate_is_a_check() -> None:
    passed = mask_error_check(_errors([-0.5, -0.49, -0.51]))
    assert passed.passed and math.isclose(passed.numbers["slope"], -0.5, abs_tol=1e-9)
    assert not mask_error_check(_errors([-0.2, -0.21, -0.19])).passed
    assert not mask_error_check(_errors([-0.3, -0.5, -0.7])).passed  # too spread to lie inside -1/2 ± 0.1
    assert not mask_error_check([]).passed


def _cost(grf: list[float], dense: list[float], sizes: tuple[int, ...] = (1000, 2000, 4000)) -> list[dict]:
    rows = []
    for seed, (eg, ed) in enumerate(zip(grf, dense)):
        for n in sizes:
            rows.append(
                {"seed": seed, "n_tokens": n, "mask": "grf_mask", "seconds": 1e-4 * n**eg, "peak_bytes": 100.0 * n**eg}
            )
            rows.append(
                {"seed": seed, "n_tokens": n, "mask": "exact_mask", "seconds": 1e-7 * n**ed, "peak_bytes": 4.0 * n**ed}
            )
    return rows


def test_complexity_facts_are_checks() -> None:
    good = {c.id: c.passed for c in scaling_checks(_cost([1.0, 1.02, 0.98], [2.0, 1.98, 2.02]), 1000)}
    assert good == {
        "grf_time_linear": True,
        "grf_memory_linear": True,
        "dense_time_quadratic": True,
        "dense_memory_quadratic": True,
    }
    bad = {c.id: c.passed for c in scaling_checks(_cost([1.6, 1.62, 1.58], [1.1, 1.12, 1.08]), 1000)}
    assert set(bad.values()) == {False}
    # sizes below fit_min_n are left out of the fit: one size left gives no exponent, so no check passes
    few = {c.id: c.passed for c in scaling_checks(_cost([1.0, 1.0, 1.0], [2.0, 2.0, 2.0]), 4000)}
    assert set(few.values()) == {False}


def test_ratios_at_the_largest_common_size_and_the_table() -> None:
    r = ratios(_cost([1.0, 1.0], [2.0, 2.0]))
    assert r["n_tokens"] == 4000 and math.isclose(r["time_ratio"], 1e-7 * 4000**2 / (1e-4 * 4000))
    columns, rows = table(_acc([90.0, 91.0], [85.0, 86.0], "mnist") + _acc([50.0, 60.0], [40.0, 40.0]))
    assert columns[1:3] == ["MNIST test accuracy (%)", "point clouds test accuracy (%)"]
    assert [row["variant"] for row in rows] == ["Linear attention (unmasked)", "Linear + GRF mask (O(N), ours)"]
    assert rows[0]["point clouds test accuracy (%)"].startswith("40.0")
    assert rows[1]["paper ImageNet top-1 (%)"] == "linear + 3.7"


def test_machine_measurements_are_timed_checks() -> None:
    cost = _cost([1.0, 1.0], [2.0, 2.0])
    assert all(c.timed for c in scaling_checks(cost, 1000))
    by_id = {c.id: c for c in checks([{"variant": "grf_mask", "modulation": [[1.0, 0.5]]}], cost)}
    assert by_id["peak_memory_measured"].timed and "dense mask took" in by_id["peak_memory_measured"].evidence
    assert not by_id["modulation_nonnegative"].timed and by_id["modulation_nonnegative"].passed
