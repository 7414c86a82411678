"""HRF claims and checks on constructed tables: every verdict is reachable, and the checks can fail."""

from __future__ import annotations

import math

import pytest

from pipelines.hrf.params import HrfParams
from pipelines.hrf.report import (best_by_nfe, bookkeeping_checks, build_report, crossing_claims,
                                  matched_nfe_claim, velocity_claims, w1_claim)
from paperflows.report import Precondition

P = HrfParams()  # seeds 0, 1, 2; t0 = 0; min mode fraction 0.25; crossing threshold 0.05; W1 target 0.1


def quality_rows(dataset: str, method: str, steps: str, values: list[float], flips: list[float] | None = None,
                 nfe: int | None = None, key: str = "distance", val: list[float] | None = None) -> list[dict]:
    """Rows of one schedule; the validation score equals the test score unless ``val`` is given."""
    nfe = nfe if nfe is not None else math.prod(int(n) for n in steps.split("x"))
    return [{"dataset": dataset, "method": method, "steps": steps, "nfe": nfe, "seed": seed, key: v,
             f"val_{key}": (val[seed] if val else v), "order_flips": (flips[seed] if flips else float("nan"))}
            for seed, v in enumerate(values)]


def floor_rows(dataset: str, values: list[float]) -> list[dict]:
    return [{"dataset": dataset, "seed": seed, "floor": v} for seed, v in enumerate(values)]


FLOOR = floor_rows("mixture", [0.004, 0.005, 0.006]) + floor_rows("moons", [0.004, 0.005, 0.006])
LOW = {0: 0.004, 1: 0.005, 2: 0.006}


def velocity_rows(dataset: str, method: str, distance: list[float], min_mode: list[float] | None = None,
                  spread: float = 0.0, t: float = 0.0) -> list[dict]:
    return [{"dataset": dataset, "method": method, "seed": seed, "t": t, "distance_to_true": d, "spread": spread,
             "min_mode_fraction": (min_mode[seed] if min_mode else None),
             "mode_fraction": (2 * min_mode[seed] if min_mode else None)} for seed, d in enumerate(distance)]


def by_id(claims):
    return {c.id: c for c in claims}


# ---- the velocity law at the origin --------------------------------------------------------------
def test_bimodal_velocity_holds_fails_or_is_unresolved():
    rows = velocity_rows("mixture", "RF", [1.0, 1.02, 0.98], spread=1e-8) + \
        velocity_rows("mixture", "HRF2", [0.10, 0.12, 0.11], [0.40, 0.42, 0.41], spread=0.9)
    claims, checks = velocity_claims(rows, P)
    c = by_id(claims)
    assert c["velocity_law_bimodal"].verdict == "holds" and c["velocity_law_bimodal"].n == 3
    assert c["velocity_law_closer_than_rf"].verdict == "holds"
    assert c["velocity_law_closer_than_rf"].effect == pytest.approx(0.89)
    assert checks[0].id == "rf_velocity_single_valued" and checks[0].passed
    # no moons rows: that claim cannot be decided
    assert c["velocity_law_closer_than_rf_moons"].verdict == "not resolved"
    assert c["velocity_law_closer_than_rf_moons"].precondition.met is False

    unimodal = velocity_rows("mixture", "HRF2", [0.9, 0.95, 1.0], [0.02, 0.03, 0.01]) + \
        velocity_rows("mixture", "RF", [0.5, 0.52, 0.51])
    c = by_id(velocity_claims(unimodal, P)[0])
    assert c["velocity_law_bimodal"].verdict == "does not hold"
    assert c["velocity_law_closer_than_rf"].verdict == "does not hold"

    noisy = velocity_rows("mixture", "HRF2", [0.2, 0.3, 0.25], [0.05, 0.45, 0.3])
    assert by_id(velocity_claims(noisy, P)[0])["velocity_law_bimodal"].verdict == "not resolved"
    one_seed = velocity_rows("mixture", "HRF2", [0.1], [0.45])
    one = by_id(velocity_claims(one_seed, P.model_copy(update={"seeds": [0]}))[0])["velocity_law_bimodal"]
    assert one.verdict == "not resolved" and one.n == 1


def test_rf_spread_check_fails_for_a_random_rf_and_moons_need_a_known_law():
    rows = velocity_rows("moons", "RF", [1.5, 1.4, 1.6], spread=0.3) + velocity_rows("moons", "HRF2", [0.7, 0.8, 0.6])
    claims, checks = velocity_claims(rows, P)
    assert by_id(claims)["velocity_law_closer_than_rf_moons"].verdict == "holds"
    assert not checks[0].passed
    later = [dict(r, t=0.5, distance_to_true=None) for r in rows]  # the moons' law is unknown at t > 0
    p = P.model_copy(update={"eval": P.eval.model_copy(update={"velocity_times": [0.5]})})
    claim = by_id(velocity_claims(later, p)[0])["velocity_law_closer_than_rf_moons"]
    assert claim.verdict == "not resolved" and "known" in claim.precondition.description


# ---- path crossing -------------------------------------------------------------------------------
def test_paths_cross_claim_and_rf_order_check():
    rows = (quality_rows("mixture", "RF", "1", [0.4] * 3, flips=[0.30, 0.31, 0.29]) +     # one Euler step: not checked
            quality_rows("mixture", "RF", "10", [0.1] * 3, flips=[0.0, 0.001, 0.0]) +
            quality_rows("mixture", "HRF2", "2x5", [0.1] * 3, flips=[0.30, 0.32, 0.31]) +
            quality_rows("mixture", "HRF2", "5x2", [0.1] * 3, flips=[0.20, 0.22, 0.21]) +
            quality_rows("mixture", "HRF2", "10x1", [0.1] * 3, flips=[0.01, 0.02, 0.01]))  # mean velocity: not judged
    claims, checks = crossing_claims(rows, P)
    assert claims[0].id == "hrf_paths_cross" and claims[0].verdict == "holds"
    assert claims[0].effect == pytest.approx(0.21)  # the smallest over the sampling HRF schedules, per seed
    assert "['10x1']" in claims[0].evidence
    assert checks[0].passed and "coarser RF schedules ['1']" in checks[0].evidence

    flat = [dict(r, order_flips=0.01) if r["method"] != "RF" else r for r in rows]
    assert crossing_claims(flat, P)[0][0].verdict == "does not hold"
    crossing_rf = [dict(r, order_flips=0.2) if r["steps"] == "10" else r for r in rows]
    assert not crossing_claims(crossing_rf, P)[1][0].passed
    assert crossing_claims([r for r in rows if r["method"] == "RF"], P)[0][0].verdict == "not resolved"


# ---- quality against NFE -------------------------------------------------------------------------
def test_w1_at_nfe_ten_uses_the_split_chosen_on_validation():
    rows = quality_rows("mixture", "HRF2", "2x5", [0.05, 0.06, 0.055]) + \
        quality_rows("mixture", "HRF2", "5x2", [0.30, 0.31, 0.29])
    assert best_by_nfe(rows, "mixture", "HRF2")[10][0] == "2x5"
    claim = w1_claim(rows, FLOOR, P)
    assert claim.verdict == "holds" and "2x5" in claim.evidence and claim.direction == "less"
    assert claim.numbers["floor"] == pytest.approx(0.005)
    # the split that is best on validation is reported with its test value, even when another is better on test
    swapped = quality_rows("mixture", "HRF2", "2x5", [0.05, 0.06, 0.055], val=[0.3, 0.3, 0.3]) + \
        quality_rows("mixture", "HRF2", "5x2", [0.30, 0.31, 0.29], val=[0.1, 0.1, 0.1])
    best = best_by_nfe(swapped, "mixture", "HRF2")[10]
    assert best[0] == "5x2" and best[1] == {0: 0.30, 1: 0.31, 2: 0.29}
    assert w1_claim(swapped, FLOOR, P).verdict == "does not hold"
    worse = quality_rows("mixture", "HRF2", "2x5", [0.30, 0.32, 0.31])
    assert w1_claim(worse, FLOOR, P).verdict == "does not hold"
    edge = quality_rows("mixture", "HRF2", "2x5", [0.05, 0.15, 0.10])
    assert w1_claim(edge, FLOOR, P).verdict == "not resolved"
    no_nfe10 = quality_rows("mixture", "HRF2", "1x5", [0.05, 0.06, 0.055])
    assert w1_claim(no_nfe10, FLOOR, P).verdict == "not resolved" and w1_claim(no_nfe10, FLOOR, P).n == 0
    # a floor above the target: the sample sizes cannot resolve the claim
    coarse = w1_claim(rows, floor_rows("mixture", [0.2, 0.2, 0.2]), P)
    assert coarse.verdict == "not resolved" and coarse.precondition.met is False


def _matched(rf: list[float], hrf: list[float], dataset: str = "moons", key: str = "distance") -> list[dict]:
    rows = []
    for nfe in (2, 10):
        rows += quality_rows(dataset, "RF", str(nfe), [v * 10 / nfe for v in rf], key=key)
        rows += quality_rows(dataset, "HRF2", f"{nfe // 2}x2", [v * 10 / nfe for v in hrf], key=key)
        rows += quality_rows(dataset, "HRF2", f"{nfe}x1", [v * 50 for v in hrf], key=key)  # a worse split
    return rows


def test_matched_nfe_claim_is_decided_on_paired_log_ratios():
    better = matched_nfe_claim(_matched([0.20, 0.22, 0.18], [0.10, 0.11, 0.09]), "moons", "distance", LOW)
    assert better.id == "hrf2_beats_rf_moons" and better.verdict == "holds"
    assert better.effect == pytest.approx(math.log(2)) and better.n == 3
    assert "NFE 2" in better.evidence and "(1x2)" in better.evidence and better.numbers["matched"] == 2
    worse = matched_nfe_claim(_matched([0.10, 0.11, 0.09], [0.20, 0.22, 0.18]), "moons", "distance", LOW)
    assert worse.verdict == "does not hold"
    # seed 0 favours HRF2, seeds 1 and 2 RF: the paired interval contains 0
    mixed = matched_nfe_claim(_matched([0.20, 0.10, 0.10], [0.10, 0.11, 0.12]), "moons", "distance", LOW)
    assert mixed.verdict == "not resolved" and mixed.ci[0] < 0 < mixed.ci[1]
    one_seed = matched_nfe_claim(_matched([0.20], [0.10]), "moons", "distance", LOW)
    assert one_seed.verdict == "not resolved" and one_seed.n == 1 and math.isinf(one_seed.ci[1])
    no_common = [r for r in _matched([0.2] * 3, [0.1] * 3) if not (r["method"] == "RF" and r["nfe"] == 2)]
    no_common = [r for r in no_common if not (r["method"] == "HRF2" and r["nfe"] == 10)]
    assert matched_nfe_claim(no_common, "moons", "distance", LOW).verdict == "not resolved"


def test_matched_nfe_gap_below_the_floor_is_not_resolved():
    """A consistent but tiny advantage (mean gap 0.003) under a floor of 0.005 decides nothing."""
    tiny = _matched([0.0110, 0.0112, 0.0108], [0.0100, 0.0101, 0.0099])
    assert paired_sign(tiny) > 0  # every seed favours HRF2 ...
    claim = matched_nfe_claim(tiny, "moons", "distance", LOW)
    assert claim.verdict == "not resolved" and claim.precondition.met is False  # ... below the floor
    assert "gap below floor" in claim.evidence and claim.numbers["floor"] == pytest.approx(0.005)
    assert matched_nfe_claim(tiny, "moons", "distance", {0: 1e-4, 1: 1e-4, 2: 1e-4}).verdict == "holds"


def paired_sign(rows: list[dict]) -> float:
    rf = [r["distance"] for r in rows if r["method"] == "RF"]
    hrf = [r["distance"] for r in rows if r["method"] == "HRF2" and r["steps"].endswith("x2")]
    return min(a - b for a, b in zip(rf, hrf))


def test_mnist_claim_needs_a_useful_feature_classifier():
    rows = _matched([20.0, 22.0, 18.0], [10.0, 11.0, 9.0], dataset="mnist", key="fid")
    weak = matched_nfe_claim(rows, "mnist", "fid", LOW, Precondition("classifier accuracy >= 0.9", met=False, value=0.4))
    assert weak.verdict == "not resolved" and weak.effect == pytest.approx(math.log(2))
    strong = matched_nfe_claim(rows, "mnist", "fid", LOW, Precondition("classifier accuracy >= 0.9", met=True, value=0.97))
    assert strong.verdict == "holds"


# ---- bookkeeping and the whole report ------------------------------------------------------------
def test_bookkeeping_checks_fail_on_a_wrong_nfe_or_unmatched_sizes():
    rows = quality_rows("mixture", "HRF2", "2x5", [0.1] * 3)
    sizes = {"mixture/RF": 1005.0, "mixture/HRF2": 1000.0}
    nfe, params = bookkeeping_checks(rows, sizes)
    assert nfe.passed and params.passed
    nfe, params = bookkeeping_checks(quality_rows("mixture", "HRF2", "2x5", [0.1], nfe=7),
                                     {"mixture/RF": 1100.0, "mixture/HRF2": 1000.0})
    assert not nfe.passed and not params.passed and "0/1 rows" in nfe.evidence


def test_build_report_has_every_claim_and_check():
    quality = (_matched([0.2] * 3, [0.1] * 3, dataset="mixture") + _matched([0.2] * 3, [0.1] * 3)
               + quality_rows("mixture", "HRF2", "2x5", [0.05, 0.06, 0.055], flips=[0.3] * 3))
    quality = [dict(r, order_flips=0.0 if r["method"] == "RF" else 0.3) if r["dataset"] == "mixture" else r
               for r in quality]
    velocity = (velocity_rows("mixture", "RF", [1.0, 1.02, 0.98], spread=1e-8)
                + velocity_rows("mixture", "HRF2", [0.1, 0.12, 0.11], [0.4, 0.42, 0.41], spread=0.9)
                + velocity_rows("moons", "RF", [1.5, 1.4, 1.6]) + velocity_rows("moons", "HRF2", [0.7, 0.8, 0.6]))
    mnist = _matched([20.0, 22.0, 18.0], [10.0, 11.0, 9.0], dataset="mnist", key="fid")
    mnist = [dict(r, confidence=0.9, inception_score=5.0) for r in mnist]
    sizes = {"mixture/RF": 1000.0, "mixture/HRF2": 1000.0, "moons/RF": 1000.0, "moons/HRF2": 1000.0,
             "mnist/RF": 1000.0, "mnist/HRF2": 1000.0}
    real = {f"real/seed{s}/{k}": v for s in range(3) for k, v in (("fid", 0.5), ("confidence", 0.99),
                                                                   ("inception_score", 9.0))}
    oracle = quality_rows("mixture", "RF", "10", [0.03] * 3) + quality_rows("mixture", "HRF2", "2x5", [0.04] * 3)
    report = build_report(quality, velocity, mnist, FLOOR, oracle, {"judge_test_accuracy": 0.5, **real}, sizes, P)
    verdicts = {c.id: c.verdict for c in report.claims}
    assert verdicts == {"velocity_law_bimodal": "holds", "velocity_law_closer_than_rf": "holds",
                        "velocity_law_closer_than_rf_moons": "holds", "hrf_paths_cross": "holds",
                        "hrf2_w1_nfe10": "holds", "hrf2_beats_rf_mixture": "holds", "hrf2_beats_rf_moons": "holds",
                        "hrf2_beats_rf_mnist": "not resolved"}  # the classifier reached 0.5 < 0.9
    # a good classifier, but noisy samples: the best flow FID (10) is 20x the real-image floor (0.5) > 5x
    noisy = build_report(quality, velocity, mnist, FLOOR, oracle, {"judge_test_accuracy": 0.99, **real}, sizes, P)
    mnist_claim = next(c for c in noisy.claims if c.id == "hrf2_beats_rf_mnist")
    assert mnist_claim.verdict == "not resolved" and "20.0x" in mnist_claim.precondition.description
    digit_like = [dict(r, fid=r["fid"] / 10) for r in mnist]  # best 1.0 = 2x the floor: decided
    decided = build_report(quality, velocity, digit_like, FLOOR, oracle, {"judge_test_accuracy": 0.99, **real},
                           sizes, P)
    assert next(c for c in decided.claims if c.id == "hrf2_beats_rf_mnist").verdict == "holds"
    ten = next(r for r in report.rows if r["dataset"] == "1-D mixture" and r["NFE"] == 10)
    assert ten["HRF2 split"] == "2x5" and ten["RF exact field"] == "0.030" and ten["floor"].startswith("0.0050")
    assert {c.id: c.passed for c in report.checks} == {"rf_velocity_single_valued": True,
                                                       "rf_paths_keep_order": True,
                                                       "nfe_is_product_of_steps": True,
                                                       "parameter_counts_matched": True}
    assert {r["dataset"] for r in report.rows} == {"1-D mixture", "2-D moons", "MNIST"}
    assert "velocity law at the origin" in report.extra_tables and report.to_markdown()
