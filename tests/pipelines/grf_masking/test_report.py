"""grf_masking report functions on constructed numbers: every verdict of every claim is reachable."""

from __future__ import annotations

import math

from pipelines.grf_masking.report import grf_ge_unmasked, mask_error_claim, ratios, scaling_claims, table


def _acc(grf: list[float], lin: list[float], task: str = "mnist") -> list[dict]:
    return [row for seed, (g, l) in enumerate(zip(grf, lin))
            for row in ({"task": task, "seed": seed, "variant": "grf_mask", "test_accuracy": g, "parameters": 10},
                        {"task": task, "seed": seed, "variant": "linear", "test_accuracy": l, "parameters": 10})]


def test_grf_claim_reaches_every_verdict() -> None:
    assert grf_ge_unmasked(_acc([90.0, 91.0, 92.0], [85.0, 85.5, 86.0])).verdict == "holds"
    assert grf_ge_unmasked(_acc([80.0, 80.5, 81.0], [85.0, 85.5, 86.0])).verdict == "does not hold"
    assert grf_ge_unmasked(_acc([90.0, 80.0, 86.0], [85.0, 85.0, 85.0])).verdict == "not resolved"
    # a baseline that never learned decides nothing
    assert grf_ge_unmasked(_acc([15.0, 16.0, 17.0], [10.0, 10.0, 10.0])).verdict == "not resolved"
    assert grf_ge_unmasked(_acc([90.0], [80.0])).verdict == "not resolved"


def test_point_cloud_claim_is_its_own_and_uses_its_chance_level() -> None:
    rows = _acc([90.0, 91.0, 92.0], [85.0, 85.5, 86.0]) + _acc([50.0, 52.0, 51.0], [40.0, 41.0, 42.0], "point_clouds")
    mnist, clouds = grf_ge_unmasked(rows), grf_ge_unmasked(rows, "point_clouds", classes=6)
    assert (mnist.id, clouds.id) == ("grf_ge_unmasked", "grf_ge_unmasked_clouds")
    assert math.isclose(mnist.effect, 5.5) and math.isclose(clouds.effect, 10.0)
    assert clouds.verdict == "holds"
    # neither 51% nor 41% is twice chance for 2 classes: the task was not learned, nothing is decided
    assert grf_ge_unmasked(rows, "point_clouds", classes=2).verdict == "not resolved"


def _errors(slopes: list[float]) -> list[dict]:
    # error = c * n ** slope exactly, so each seed's fitted slope is the one given
    return [{"seed": s, "n_walks": n, "relative_error": 2.0 * n ** slope}
            for s, slope in enumerate(slopes) for n in (1, 2, 4, 8, 16)]


def test_mask_error_claim_reaches_every_verdict() -> None:
    held = mask_error_claim(_errors([-0.5, -0.49, -0.51]))
    assert held.verdict == "holds" and math.isclose(held.effect, -0.5, abs_tol=1e-9)
    assert mask_error_claim(_errors([-0.2, -0.21, -0.19])).verdict == "does not hold"
    assert mask_error_claim(_errors([-0.3, -0.5, -0.7])).verdict == "not resolved"


def _cost(grf: list[float], dense: list[float], sizes: tuple[int, ...] = (1000, 2000, 4000)) -> list[dict]:
    rows = []
    for seed, (eg, ed) in enumerate(zip(grf, dense)):
        for n in sizes:
            rows.append({"seed": seed, "n_tokens": n, "mask": "grf_mask", "seconds": 1e-4 * n ** eg,
                         "peak_bytes": 100.0 * n ** eg})
            rows.append({"seed": seed, "n_tokens": n, "mask": "exact_mask", "seconds": 1e-7 * n ** ed,
                         "peak_bytes": 4.0 * n ** ed})
    return rows


def test_scaling_claims_reach_every_verdict() -> None:
    good = {c.id: c.verdict for c in scaling_claims(_cost([1.0, 1.02, 0.98], [2.0, 1.98, 2.02]), 1000)}
    assert good == {"grf_time_linear": "holds", "grf_memory_linear": "holds", "dense_time_quadratic": "holds",
                    "dense_memory_quadratic": "holds"}
    bad = {c.id: c.verdict for c in scaling_claims(_cost([1.6, 1.62, 1.58], [1.1, 1.12, 1.08]), 1000)}
    assert set(bad.values()) == {"does not hold"}
    unsure = {c.id: c.verdict for c in scaling_claims(_cost([0.9, 1.6, 1.2], [1.2, 1.8, 1.5]), 1000)}
    assert set(unsure.values()) == {"not resolved"}
    # sizes below fit_min_n are left out of the fit: one size left decides nothing
    few = {c.id: c.verdict for c in scaling_claims(_cost([1.0, 1.0, 1.0], [2.0, 2.0, 2.0]), 4000)}
    assert set(few.values()) == {"not resolved"}


def test_ratios_at_the_largest_common_size_and_the_table() -> None:
    r = ratios(_cost([1.0, 1.0], [2.0, 2.0]))
    assert r["n_tokens"] == 4000 and math.isclose(r["time_ratio"], 1e-7 * 4000 ** 2 / (1e-4 * 4000))
    columns, rows = table(_acc([90.0, 91.0], [85.0, 86.0]) + _acc([50.0, 60.0], [40.0, 40.0], "point_clouds"))
    assert columns[1:3] == ["MNIST test accuracy (%)", "point clouds test accuracy (%)"]
    assert [row["variant"] for row in rows] == ["Linear attention (unmasked)", "Linear + GRF mask (O(N), ours)"]
    assert rows[0]["point clouds test accuracy (%)"].startswith("40.0")
    assert rows[1]["paper ImageNet top-1 (%)"] == "linear + 3.7"
