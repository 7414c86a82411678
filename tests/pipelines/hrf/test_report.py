"""HRF claims and checks on constructed tables: every verdict is reachable, the gates block, the checks can fail."""

from __future__ import annotations

import math

import pytest

from pipelines.hrf.params import HrfParams
from pipelines.hrf.plots import best_by_nfe
from pipelines.hrf.report import (
    HEADLINE,
    HRF2_BEATS_RF_MIXTURE,
    HRF2_BEATS_RF_MOONS,
    bookkeeping_checks,
    build_report,
    crossing_checks,
    exact_field_gates,
    matched_nfe_claim,
    mnist_gates,
    untrained_gates,
    velocity_checks,
    velocity_claim,
    w1_claim,
)

P = HrfParams()  # seeds 0, 1, 2; t0 = 0; min mode fraction 0.25; crossing threshold 0.05; W1 target 0.1


def quality_rows(
    dataset: str,
    method: str,
    steps: str,
    values: list[float],
    flips: list[float] | None = None,
    nfe: int | None = None,
    key: str = "distance",
    val: list[float] | None = None,
) -> list[dict]:
    """Rows of one schedule; the validation score equals the test score unless ``val`` is given."""
    nfe = nfe if nfe is not None else math.prod(int(n) for n in steps.split("x"))
    return [
        {
            "dataset": dataset,
            "method": method,
            "steps": steps,
            "nfe": nfe,
            "seed": seed,
            key: v,
            f"val_{key}": (val[seed] if val else v),
            "order_flips": (flips[seed] if flips else float("nan")),
        }
        for seed, v in enumerate(values)
    ]


def floor_rows(dataset: str, values: list[float], source: float | None = 5.0) -> list[dict]:
    return [{"dataset": dataset, "seed": seed, "floor": v, "source": source} for seed, v in enumerate(values)]


FLOOR = floor_rows("mixture", [0.004, 0.005, 0.006]) + floor_rows("moons", [0.004, 0.005, 0.006])


def velocity_rows(
    dataset: str,
    method: str,
    distance: list[float],
    min_mode: list[float] | None = None,
    spread: float = 0.0,
    t: float = 0.0,
) -> list[dict]:
    return [
        {
            "dataset": dataset,
            "method": method,
            "seed": seed,
            "t": t,
            "distance_to_true": d,
            "spread": spread,
            "min_mode_fraction": (min_mode[seed] if min_mode else None),
            "mode_fraction": (2 * min_mode[seed] if min_mode else None),
        }
        for seed, d in enumerate(distance)
    ]


def test_the_headline_is_hrf2_against_rf_at_low_nfe_on_both_low_dim_targets():
    assert HEADLINE == (HRF2_BEATS_RF_MIXTURE, HRF2_BEATS_RF_MOONS) and all(s.headline for s in HEADLINE)
    assert HRF2_BEATS_RF_MIXTURE.rule.boundary == 1.0 and "5.56" in HRF2_BEATS_RF_MIXTURE.rule.source


# ---- the velocity law at the origin --------------------------------------------------------------
def test_bimodal_velocity_claim_reaches_every_verdict():
    assert velocity_claim(velocity_rows("mixture", "HRF2", [0.1] * 3, [0.40, 0.42, 0.41]), P).verdict == "holds"
    assert velocity_claim(velocity_rows("mixture", "HRF2", [0.9] * 3, [0.02, 0.03, 0.01]), P).verdict == "does not hold"
    # just above the boundary on average, every share that would matter (>= 0.30) excluded: a decided negative
    barely = velocity_claim(velocity_rows("mixture", "HRF2", [0.5] * 6, [0.24, 0.27, 0.26, 0.25, 0.27, 0.23]), P)
    assert barely.effect > 0.25 and barely.verdict == "does not hold"
    noisy = velocity_claim(velocity_rows("mixture", "HRF2", [0.2, 0.3, 0.25], [0.05, 0.45, 0.3]), P)
    assert noisy.verdict == "not resolved" and noisy.units_needed
    one = velocity_claim(velocity_rows("mixture", "HRF2", [0.1], [0.45]), P)
    assert one.verdict == "not resolved" and one.n == 1
    assert velocity_claim(velocity_rows("moons", "HRF2", [0.1] * 3), P).reason.startswith("not measured")
    # the boundary follows the params
    strict = P.model_copy(update={"eval": P.eval.model_copy(update={"min_mode_fraction": 0.45})})
    claim = velocity_claim(velocity_rows("mixture", "HRF2", [0.1] * 3, [0.40, 0.42, 0.41]), strict)
    assert claim.verdict == "does not hold" and claim.boundary == 0.45


def test_velocity_checks_single_value_and_closer_than_rf():
    rows = velocity_rows("mixture", "RF", [1.0, 1.02, 0.98], spread=1e-8) + velocity_rows(
        "mixture", "HRF2", [0.10, 0.12, 0.11], [0.40, 0.42, 0.41], spread=0.9
    )
    checks = {c.id: c for c in velocity_checks(rows, P)}
    assert checks["rf_velocity_single_valued"].passed and checks["velocity_law_closer_than_rf"].passed
    assert "velocity_law_closer_than_rf_moons" not in checks  # no moons rows
    farther = velocity_rows("mixture", "RF", [0.5, 0.52, 0.51]) + velocity_rows("mixture", "HRF2", [0.9, 0.3, 1.0])
    assert not {c.id: c for c in velocity_checks(farther, P)}["velocity_law_closer_than_rf"].passed
    moons = velocity_rows("moons", "RF", [1.5, 1.4, 1.6], spread=0.3) + velocity_rows("moons", "HRF2", [0.7, 0.8, 0.6])
    checks = {c.id: c for c in velocity_checks(moons, P)}
    assert checks["velocity_law_closer_than_rf_moons"].passed and not checks["rf_velocity_single_valued"].passed
    later = [dict(r, t=0.5, distance_to_true=None) for r in moons]  # the moons' law is unknown at t > 0
    p = P.model_copy(update={"eval": P.eval.model_copy(update={"velocity_times": [0.5]})})
    assert "velocity_law_closer_than_rf_moons" not in {c.id for c in velocity_checks(later, p)}


# ---- path crossing -------------------------------------------------------------------------------
def test_paths_cross_and_rf_order_checks():
    rows = (
        quality_rows("mixture", "RF", "1", [0.4] * 3, flips=[0.30, 0.31, 0.29])  # one Euler step: not checked
        + quality_rows("mixture", "RF", "10", [0.1] * 3, flips=[0.0, 0.001, 0.0])
        + quality_rows("mixture", "HRF2", "2x5", [0.1] * 3, flips=[0.30, 0.32, 0.31])
        + quality_rows("mixture", "HRF2", "5x2", [0.1] * 3, flips=[0.20, 0.22, 0.21])
        + quality_rows("mixture", "HRF2", "10x1", [0.1] * 3, flips=[0.01, 0.02, 0.01])
    )  # mean velocity: not judged
    checks = {c.id: c for c in crossing_checks(rows, P)}
    assert checks["hrf_paths_cross"].passed and checks["hrf_paths_cross"].numbers["hrf_min_flips"] == 0.20
    assert "['10x1']" in checks["hrf_paths_cross"].evidence
    order = checks["rf_paths_keep_order"]
    assert order.passed and "coarser RF schedules ['1']" in order.evidence
    flat = [dict(r, order_flips=0.01) if r["method"] != "RF" else r for r in rows]
    assert not {c.id: c for c in crossing_checks(flat, P)}["hrf_paths_cross"].passed
    crossing_rf = [dict(r, order_flips=0.2) if r["steps"] == "10" else r for r in rows]
    assert not {c.id: c for c in crossing_checks(crossing_rf, P)}["rf_paths_keep_order"].passed
    assert [c.id for c in crossing_checks([r for r in rows if r["method"] == "RF"], P)] == ["rf_paths_keep_order"]


# ---- W1 at NFE 10 (a secondary claim against the brief's line) -----------------------------------
def test_w1_at_nfe_ten_uses_the_split_chosen_on_validation():
    rows = quality_rows("mixture", "HRF2", "2x5", [0.05, 0.06, 0.055]) + quality_rows(
        "mixture", "HRF2", "5x2", [0.30, 0.31, 0.29]
    )
    assert best_by_nfe(rows, "mixture", "HRF2")[10][0] == "2x5"
    claim = w1_claim(rows, FLOOR, P)
    assert claim.verdict == "holds" and "2x5" in claim.evidence and claim.rule.direction == "less" and claim.log
    assert claim.numbers["floor"] == pytest.approx(0.005)
    # the split that is best on validation is reported with its test value, even when another is better on test
    swapped = quality_rows("mixture", "HRF2", "2x5", [0.05, 0.06, 0.055], val=[0.3, 0.3, 0.3]) + quality_rows(
        "mixture", "HRF2", "5x2", [0.30, 0.31, 0.29], val=[0.1, 0.1, 0.1]
    )
    best = best_by_nfe(swapped, "mixture", "HRF2")[10]
    assert best[0] == "5x2" and best[1] == {0: 0.30, 1: 0.31, 2: 0.29}
    assert w1_claim(swapped, FLOOR, P).verdict == "does not hold"
    edge = quality_rows("mixture", "HRF2", "2x5", [0.05, 0.15, 0.10])
    assert w1_claim(edge, FLOOR, P).verdict == "not resolved"
    no_nfe10 = quality_rows("mixture", "HRF2", "1x5", [0.05, 0.06, 0.055])
    assert w1_claim(no_nfe10, FLOOR, P).verdict == "not resolved" and w1_claim(no_nfe10, FLOOR, P).n == 0
    # a floor above the target: the sample sizes cannot resolve the claim (a failed gate)
    coarse = w1_claim(rows, floor_rows("mixture", [0.2, 0.21, 0.2]), P)
    assert coarse.verdict == "not resolved" and "gate failed" in coarse.reason


# ---- quality against NFE: the headline claims ------------------------------------------------------
NFES = {2: "1x2", 5: "1x5", 20: "10x2"}


def _matched(
    rf: list[float], hrf: list[float], dataset: str = "moons", key: str = "distance", high: float = 1.0
) -> list[dict]:
    """RF and HRF2 (best split, plus a worse one) at NFE 2, 5 and 20; at 20 HRF2's values are scaled by ``high``."""
    rows = []
    for nfe, split in NFES.items():
        scale = high if nfe == 20 else 1.0
        rows += quality_rows(dataset, "RF", str(nfe), [v * 10 / nfe for v in rf], key=key)
        rows += quality_rows(dataset, "HRF2", split, [v * 10 / nfe * scale for v in hrf], key=key)
        rows += quality_rows(dataset, "HRF2", f"{nfe}x1", [v * 50 for v in hrf], key=key)  # a worse split
    return rows


def test_matched_nfe_claim_is_decided_on_paired_log_ratios_at_low_nfe():
    better = matched_nfe_claim(_matched([0.20, 0.22, 0.18], [0.10, 0.11, 0.09]), "moons", "distance")
    assert better.id == "hrf2_beats_rf_moons" and better.verdict == "holds" and better.headline
    assert better.effect == pytest.approx(2.0) and better.n == 3 and better.log
    assert "NFE [2, 5]" in better.evidence and "(1x2)" in better.evidence and "(reported only)" in better.evidence
    worse = matched_nfe_claim(_matched([0.10, 0.11, 0.09], [0.20, 0.22, 0.18]), "moons", "distance")
    assert worse.verdict == "does not hold"
    # seed 0 favours HRF2, seeds 1 and 2 RF: the paired interval contains 1
    mixed = matched_nfe_claim(_matched([0.20, 0.10, 0.10], [0.10, 0.11, 0.12]), "moons", "distance")
    assert mixed.verdict == "not resolved" and mixed.ci[0] < 1 < mixed.ci[1]
    one_seed = matched_nfe_claim(_matched([0.20], [0.10]), "moons", "distance")
    assert one_seed.verdict == "not resolved" and one_seed.n == 1 and math.isinf(one_seed.ci[1])
    no_common = [r for r in _matched([0.2] * 3, [0.1] * 3) if not (r["method"] == "RF" and r["nfe"] <= 5)]
    assert matched_nfe_claim(no_common, "moons", "distance").reason.startswith("not measured")


def test_a_small_gain_below_the_smallest_effect_does_not_hold():
    # HRF2 ~9 % better on average, the interval [0.94, 1.26] excludes the smallest ratio of interest (1.47)
    ratios = [1.3, 0.9, 1.1, 1.2, 0.95, 1.15]
    claim = matched_nfe_claim(_matched([0.1 * r for r in ratios], [0.1] * 6), "moons", "distance")
    assert 1.0 < claim.effect < 1.47 and claim.verdict == "does not hold"


def test_only_the_low_nfes_decide_the_headline():
    # equal at NFE 2 and 5, HRF2 ten times better at NFE 20: the low-NFE claim sees no gain
    claim = matched_nfe_claim(_matched([0.2, 0.21, 0.19], [0.2, 0.21, 0.19], high=0.1), "moons", "distance")
    assert claim.effect == pytest.approx(1.0) and claim.verdict == "not resolved"  # no variance
    every = matched_nfe_claim(
        _matched([0.2, 0.21, 0.19], [0.2, 0.21, 0.19], high=0.1), "moons", "distance", low_nfe=None
    )
    assert every.effect > 1.0


def test_each_low_nfe_is_also_decided_alone():
    # HRF2 twice as good at NFE 2, equal (within noise) at NFE 5: the per-NFE claims tell them apart
    rows = _matched([0.20, 0.22, 0.18], [0.10, 0.11, 0.09])
    rows = [
        dict(r, distance=r["distance"] * (1.0 if r["method"] == "RF" else 2.0 * (1 + 0.05 * r["seed"])))
        if r["nfe"] == 5
        else r
        for r in rows
    ]
    at2 = matched_nfe_claim(rows, "moons", "distance", only=2)
    at5 = matched_nfe_claim(rows, "moons", "distance", only=5)
    assert at2.id == "hrf2_beats_rf_moons_nfe2" and not at2.headline and at2.verdict == "holds"
    assert at5.id == "hrf2_beats_rf_moons_nfe5" and at5.verdict == "does not hold" and "NFE [5]" in at5.evidence


def test_arms_on_different_seeds_are_an_error():
    rows = _matched([0.20, 0.22, 0.18], [0.10, 0.11, 0.09])
    rows = [dict(r, seed=7) if r["method"] == "HRF2" and r["seed"] == 2 else r for r in rows]
    with pytest.raises(ValueError, match="different units"):
        matched_nfe_claim(rows, "moons", "distance")


def test_the_mixture_claim_needs_fields_close_to_the_exact_ones():
    rows = _matched([0.20, 0.22, 0.18], [0.10, 0.11, 0.09], dataset="mixture")
    # learned at NFE 20: RF 0.10, 0.11, 0.09; HRF2 0.05, 0.055, 0.045
    close = quality_rows("mixture", "RF", "20", [0.09]) + quality_rows("mixture", "HRF2", "10x2", [0.045])
    gates = exact_field_gates(rows, close)
    assert all(g.passed for g in gates) and "NFE 20" in gates[0].statistic
    assert matched_nfe_claim(rows, "mixture", "distance", gates).verdict == "holds"
    far = quality_rows("mixture", "RF", "20", [0.02]) + quality_rows("mixture", "HRF2", "10x2", [0.04])
    claim = matched_nfe_claim(rows, "mixture", "distance", exact_field_gates(rows, far))
    assert claim.verdict == "not resolved" and "RF vs its exact field" in claim.reason
    missing = matched_nfe_claim(rows, "mixture", "distance", exact_field_gates(rows, []))
    assert missing.verdict == "not resolved" and "gate failed" in missing.reason


def test_the_moons_claim_needs_flows_below_the_untrained_one():
    rows = _matched([0.20, 0.22, 0.18], [0.10, 0.11, 0.09])
    assert all(g.passed for g in untrained_gates(rows, FLOOR, "moons"))
    untrained = floor_rows("moons", [0.004, 0.005, 0.006], source=0.05)  # RF at NFE 20 is 0.10: worse
    claim = matched_nfe_claim(rows, "moons", "distance", untrained_gates(rows, untrained, "moons"))
    assert claim.verdict == "not resolved" and "untrained flow" in claim.reason
    old = floor_rows("moons", [0.004, 0.005, 0.006], source=None)  # a floor table without the reference
    assert not any(g.passed for g in untrained_gates(rows, old, "moons"))


def test_the_mnist_claim_needs_a_useful_classifier_and_digit_like_images():
    rows = _matched([2.0, 2.2, 1.8], [1.0, 1.1, 0.9], dataset="mnist", key="fid")
    real = {0: 0.5, 1: 0.5, 2: 0.5}  # FIDs at NFE 20: RF 1.0 (2x), HRF2 0.5 (1x)
    decided = matched_nfe_claim(rows, "mnist", "fid", mnist_gates(rows, real, 0.99, P), low_nfe=None)
    assert decided.verdict == "holds" and not decided.headline
    weak = matched_nfe_claim(rows, "mnist", "fid", mnist_gates(rows, real, 0.4, P), low_nfe=None)
    assert weak.verdict == "not resolved" and "digit classifier" in weak.reason
    noisy = matched_nfe_claim(rows, "mnist", "fid", mnist_gates(rows, {0: 0.1, 1: 0.1, 2: 0.1}, 0.99, P), low_nfe=None)
    assert noisy.verdict == "not resolved" and "real-image floor" in noisy.reason


# ---- bookkeeping and the whole report ------------------------------------------------------------
def test_bookkeeping_checks_fail_on_a_wrong_nfe_or_unmatched_sizes():
    rows = quality_rows("mixture", "HRF2", "2x5", [0.1] * 3)
    sizes = {"mixture/RF": 1005.0, "mixture/HRF2": 1000.0}
    nfe, params = bookkeeping_checks(rows, sizes)
    assert nfe.passed and params.passed
    nfe, params = bookkeeping_checks(
        quality_rows("mixture", "HRF2", "2x5", [0.1], nfe=7), {"mixture/RF": 1100.0, "mixture/HRF2": 1000.0}
    )
    assert not nfe.passed and not params.passed and "0/1 rows" in nfe.evidence


def _report_inputs(judge: float = 0.99, fid_scale: float = 1.0):
    quality = (
        _matched([0.2, 0.22, 0.18], [0.1, 0.11, 0.09], dataset="mixture")
        + _matched([0.2, 0.22, 0.18], [0.1, 0.11, 0.09])
        + quality_rows("mixture", "HRF2", "2x5", [0.05, 0.06, 0.055])
    )
    quality = [
        dict(r, order_flips=0.0 if r["method"] == "RF" else 0.3) if r["dataset"] == "mixture" else r for r in quality
    ]
    velocity = (
        velocity_rows("mixture", "RF", [1.0, 1.02, 0.98], spread=1e-8)
        + velocity_rows("mixture", "HRF2", [0.1, 0.12, 0.11], [0.4, 0.42, 0.41], spread=0.9)
        + velocity_rows("moons", "RF", [1.5, 1.4, 1.6])
        + velocity_rows("moons", "HRF2", [0.7, 0.8, 0.6])
    )
    mnist = _matched([2.0, 2.2, 1.8], [1.0, 1.1, 0.9], dataset="mnist", key="fid")
    mnist = [dict(r, fid=r["fid"] * fid_scale, confidence=0.9, inception_score=5.0) for r in mnist]
    sizes = {
        "mixture/RF": 1000.0,
        "mixture/HRF2": 1000.0,
        "moons/RF": 1000.0,
        "moons/HRF2": 1000.0,
        "mnist/RF": 1000.0,
        "mnist/HRF2": 1000.0,
    }
    real = {
        f"real/seed{s}/{k}": v
        for s in range(3)
        for k, v in (("fid", 0.5), ("confidence", 0.99), ("inception_score", 9.0))
    }
    oracle = (
        quality_rows("mixture", "RF", "20", [0.09])
        + quality_rows("mixture", "HRF2", "10x2", [0.045])
        + quality_rows("mixture", "RF", "10", [0.03])
        + quality_rows("mixture", "HRF2", "2x5", [0.04])
    )
    return quality, velocity, mnist, FLOOR, oracle, {"judge_test_accuracy": judge, **real}, sizes, P


def test_build_report_has_every_claim_and_check():
    report = build_report(*_report_inputs())
    verdicts = {c.id: c.verdict for c in report.claims}
    assert verdicts == {
        "hrf2_beats_rf_mixture": "holds",
        "hrf2_beats_rf_moons": "holds",
        **{f"hrf2_beats_rf_{d}_nfe{n}": "holds" for d in ("mixture", "moons") for n in (2, 5)},
        "hrf2_beats_rf_mnist": "holds",
        "velocity_law_bimodal": "holds",
        "hrf2_w1_nfe10": "holds",
    }
    assert [c.id for c in report.headline] == ["hrf2_beats_rf_mixture", "hrf2_beats_rf_moons"]
    assert all(c.holm_verdict for c in report.claims)
    # noisy images: each flow's FID is 20x / 10x the real-image floor (> 5x): the MNIST claim is gated
    noisy = build_report(*_report_inputs(fid_scale=10.0))
    assert next(c for c in noisy.claims if c.id == "hrf2_beats_rf_mnist").verdict == "not resolved"
    weak = build_report(*_report_inputs(judge=0.5))
    assert next(c for c in weak.claims if c.id == "hrf2_beats_rf_mnist").verdict == "not resolved"
    ten = next(r for r in report.rows if r["dataset"] == "1-D mixture" and r["NFE"] == 10)
    assert ten["HRF2 split"] == "2x5" and ten["RF exact field"] == "0.030" and ten["floor"].startswith("0.0050")
    assert {c.id: c.passed for c in report.checks} == {
        "rf_velocity_single_valued": True,
        "velocity_law_closer_than_rf": True,
        "velocity_law_closer_than_rf_moons": True,
        "hrf_paths_cross": True,
        "rf_paths_keep_order": True,
        "nfe_is_product_of_steps": True,
        "parameter_counts_matched": True,
    }
    assert {r["dataset"] for r in report.rows} == {"1-D mixture", "2-D moons", "MNIST"}
    assert "velocity law at the origin" in report.extra_tables and report.to_markdown()
