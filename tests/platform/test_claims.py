"""The platform's verdict rule on constructed numbers: every verdict, every way to "not resolved"."""

from __future__ import annotations

import math

import numpy as np
import pytest

from components.metrics.stats import Estimate, mean_ci
from paperflows.claims import ClaimSpec, decide, equivalence, fixed_gate, gate, holm, non_inferiority, superiority
from paperflows.report import Check, Report, by_unit

RULE = superiority(1.0, "paper Table 1: a 1-point gap")


def spec(rule=RULE, **kw):
    return ClaimSpec("a_beats_b", "A beats B", "A - B (points)", rule, **kw)


def seeds(*xs):
    return {i: float(x) for i, x in enumerate(xs)}


# -- superiority -------------------------------------------------------------------------------------
def test_holds_when_the_whole_interval_is_above_the_boundary():
    claim = decide(spec(), Estimate.of(seeds(2.0, 2.2, 1.9, 2.1)))
    assert claim.verdict == "holds" and claim.ci[0] > 0 and claim.p_value < 0.025


def test_does_not_hold_when_every_effect_that_matters_is_excluded():
    # a small positive effect, well measured: the interval straddles 0 but lies below 0 + 1.0
    claim = decide(spec(), Estimate.of(seeds(0.1, -0.1, 0.05, 0.0, -0.05, 0.1)))
    assert claim.ci[0] < 0 < claim.ci[1] < 1.0
    assert claim.verdict == "does not hold"


def test_a_small_but_significant_effect_below_the_smallest_effect_still_holds():
    claim = decide(spec(), Estimate.of(seeds(0.2, 0.21, 0.19, 0.2, 0.22)))
    assert claim.ci[0] > 0 and claim.ci[1] < 1.0
    assert claim.verdict == "holds"


def test_not_resolved_prints_the_units_that_would_decide_it():
    claim = decide(spec(), Estimate.of(seeds(0.2, 1.8, -0.5, 1.4)))
    assert claim.verdict == "not resolved"
    assert claim.units_needed is not None and claim.units_needed > 4
    assert f"about {claim.units_needed} units" in claim.evidence
    # with that many units at the same spread and mean, the interval would be narrow enough
    est = Estimate.of(seeds(0.2, 1.8, -0.5, 1.4))
    sd = est.spread
    half = 1.959963984540054 * sd / math.sqrt(claim.units_needed)
    assert half < max(est.estimate - 0.0, 1.0 - est.estimate)


def test_direction_less_mirrors_the_rule():
    rule = superiority(0.05, "brief", direction="less")
    assert decide(spec(rule), Estimate.of(seeds(-0.2, -0.3, -0.25))).verdict == "holds"
    assert decide(spec(rule), Estimate.of(seeds(0.01, -0.01, 0.0, 0.02, -0.02))).verdict == "does not hold"
    assert decide(spec(rule), Estimate.of(seeds(0.3, 0.2, 0.25))).verdict == "does not hold"


def test_every_claim_prints_boundary_smallest_effect_and_source():
    claim = decide(spec(), Estimate.of(seeds(2.0, 2.2, 1.9)))
    row = claim.to_dict()
    assert row["boundary"] == 0.0 and row["smallest_effect"] == 1.0 and row["source"].startswith("paper Table 1")
    assert "smallest effect of interest 1" in claim.evidence and "paper Table 1" in claim.evidence


# -- non-inferiority and equivalence ----------------------------------------------------------------
def test_non_inferiority():
    rule = non_inferiority(0.05, "paper: within 5 points")
    assert decide(spec(rule), Estimate.of(seeds(-0.01, 0.0, -0.02, 0.01))).verdict == "holds"
    assert decide(spec(rule), Estimate.of(seeds(-0.2, -0.25, -0.22))).verdict == "does not hold"
    assert decide(spec(rule), Estimate.of(seeds(-0.1, 0.05, -0.04))).verdict == "not resolved"


def test_equivalence():
    rule = equivalence(0.05, "paper: equal success within ±0.05")
    assert decide(spec(rule), Estimate.of(seeds(0.01, -0.01, 0.0, 0.005))).verdict == "holds"
    assert decide(spec(rule), Estimate.of(seeds(0.3, 0.35, 0.32))).verdict == "does not hold"
    assert decide(spec(rule), Estimate.of(seeds(0.0, 0.1, -0.05))).verdict == "not resolved"


# -- zero spread, deterministic, missing --------------------------------------------------------------
def test_zero_spread_is_not_resolved_unless_deterministic():
    same = Estimate.of(seeds(1.0, 1.0, 1.0))
    claim = decide(spec(), same)
    assert claim.verdict == "not resolved" and "no variance" in claim.reason
    assert decide(spec(deterministic=True), same).verdict == "holds"


def test_an_exact_estimate_needs_a_deterministic_claim():
    with pytest.raises(ValueError, match="deterministic"):
        decide(spec(), Estimate.exact(3.0))
    assert decide(spec(deterministic=True), Estimate.exact(3.0)).verdict == "holds"
    assert decide(spec(deterministic=True), Estimate.exact(-0.5)).verdict == "does not hold"


def test_one_unit_is_not_resolved():
    claim = decide(spec(), Estimate.of(seeds(5.0)))
    assert claim.verdict == "not resolved" and "too few" in claim.reason


def test_a_missing_measurement_names_what_is_missing():
    claim = decide(spec(), None, missing="the baseline was not trained")
    assert claim.verdict == "not resolved" and "baseline was not trained" in claim.evidence
    with pytest.raises(ValueError):
        decide(spec(), None)


# -- gates -------------------------------------------------------------------------------------------
def test_a_failed_gate_makes_the_claim_not_resolved_and_names_it():
    learned = gate("A", "chance (25 %)", Estimate.of(seeds(40, 45, 50)), statistic="accuracy - 25")
    never = gate("B", "chance (25 %)", Estimate.of(seeds(1.0, -2.0, 0.5)), statistic="accuracy - 25")
    assert learned.passed and not never.passed
    decisive = Estimate.of(seeds(-5.0, -6.0, -5.5))  # would be a clear "does not hold"
    claim = decide(spec(), decisive, gates=[learned, never])
    assert claim.verdict == "not resolved"
    assert "gate failed" in claim.reason and "B vs chance (25 %)" in claim.reason
    assert decide(spec(), decisive, gates=[learned]).verdict == "does not hold"


def test_gates_with_zero_spread_beyond_the_reference_pass():
    assert gate("A", "chance", Estimate.of(seeds(0.5, 0.5, 0.5))).passed
    assert not gate("A", "chance", Estimate.of(seeds(0.0, 0.0, 0.0))).passed
    assert not gate("A", "chance", None).passed
    assert fixed_gate("lambda", "inside the grid", 0.3, True, "chosen lambda").passed


def test_a_gate_on_a_log_ratio():
    est = Estimate.paired(seeds(2.0, 2.1, 1.9), seeds(1.0, 1.0, 1.0), log=True)
    assert gate("A", "B", est, margin=1.5).passed
    assert not gate("A", "B", est, margin=2.5).passed


# -- pairing by key ---------------------------------------------------------------------------------
def test_pairing_is_by_key_never_by_position():
    a = {2: 10.0, 0: 1.0, 1: 5.0}
    b = {0: 0.0, 1: 4.0, 2: 9.0}
    est = Estimate.paired(a, b)
    assert est.units == (1.0, 1.0, 1.0) and est.keys == (0, 1, 2)


def test_a_seed_mismatch_is_an_error():
    with pytest.raises(ValueError, match="different units"):
        Estimate.paired({0: 1.0, 1: 2.0}, {0: 1.0, 2: 2.0})


def test_by_unit_refuses_repeated_units():
    rows = [{"seed": 0, "m": "a", "x": 1.0}, {"seed": 0, "m": "a", "x": 2.0}]
    with pytest.raises(ValueError, match="appears twice"):
        by_unit(rows, "x", m="a")
    rows = [{"seed": 0, "task": "t1", "x": 1.0}, {"seed": 0, "task": "t2", "x": 2.0}]
    assert by_unit(rows, "x", unit=("task", "seed")) == {("t1", 0): 1.0, ("t2", 0): 2.0}


# -- skewed metrics: log-ratios and the sign-flip test -------------------------------------------------
def test_log_ratio_claims_are_reported_as_ratios():
    rule = superiority(0.05, "brief: 5 % lower FD", direction="less")
    est = Estimate.paired(seeds(8.0, 9.0, 7.5, 8.2), seeds(10.0, 11.0, 10.0, 10.5), log=True)
    claim = decide(spec(rule), est)
    assert claim.verdict == "holds"
    assert 0.7 < claim.effect < 0.85 and claim.ci[1] < 1.0 and claim.to_dict()["scale"] == "log-ratio"


def test_sign_flip_interval_inverts_the_test_and_agrees_with_t_on_normal_data():
    rng = np.random.default_rng(0)
    x = {i: float(v) for i, v in enumerate(rng.normal(1.0, 1.0, 12))}
    flip, t = Estimate.of(x, test="sign_flip").interval(), Estimate.of(x).interval()
    assert flip.low < flip.estimate < flip.high
    assert abs(flip.low - t.low) < 0.5 and abs(flip.high - t.high) < 0.5
    # too few units for the permutation test to reject anything: unbounded
    assert math.isinf(Estimate.of(seeds(1.0, 2.0, 3.0), test="sign_flip").interval().low)


def test_sign_flip_is_robust_to_one_huge_unit():
    # one outlier inflates the t interval's width; the sign-flip test still sees 9 of 9 positive
    x = seeds(0.5, 0.6, 0.55, 0.7, 0.45, 0.65, 0.5, 0.6, 30.0)
    assert decide(spec(superiority(0.1, "brief")), Estimate.of(x, test="sign_flip")).verdict == "holds"


def test_t_p_values_agree_with_the_interval():
    est = Estimate.of(seeds(0.3, 0.9, 0.1, 0.7, 0.5))
    interval = mean_ci(est.units)
    assert est.p_above(interval.low) == pytest.approx(0.025, abs=1e-9)
    assert est.p_below(interval.high) == pytest.approx(0.025, abs=1e-9)


def test_bootstrap_estimates():
    rng = np.random.default_rng(1)
    draws = rng.normal(0.4, 0.05, 2000)
    est = Estimate.bootstrap(0.4, draws, n=200)
    assert decide(spec(superiority(0.1, "brief")), est).verdict == "holds"
    wide = Estimate.bootstrap(0.05, rng.normal(0.05, 0.3, 2000), n=20)
    claim = decide(spec(superiority(0.1, "brief")), wide)
    assert claim.verdict == "not resolved" and claim.units_needed and claim.units_needed > 20


# -- Holm and headline --------------------------------------------------------------------------------
def test_holm_keeps_the_headline_and_adjusts_the_secondary_claims():
    head = decide(ClaimSpec("head", "h", "s", RULE, headline=True), Estimate.of(seeds(0.5, 0.9, 0.7)))
    strong = decide(ClaimSpec("strong", "s", "s", RULE), Estimate.of(seeds(*np.linspace(4.0, 4.2, 10))))
    # decided on its own at 2.5 %, but not at 2.5 % / 2 (the second of three secondary claims)
    weak_x = seeds(0.8, -0.3, 0.6, 0.9, -0.2, 0.7, 0.1, 0.5)
    weak = decide(ClaimSpec("weak", "w", "s", RULE), Estimate.of(weak_x))
    weak2 = decide(ClaimSpec("weak2", "w", "s", RULE), Estimate.of(weak_x))
    assert weak.verdict == "holds" and 0.0125 < weak.p_value < 0.025
    holm([head, strong, weak, weak2])
    assert head.holm_verdict == head.verdict == "holds"
    assert strong.holm_verdict == "holds"
    assert weak.holm_verdict == weak2.holm_verdict == "not resolved"
    holm([head, strong, weak])  # the last of two: tested at 2.5 % / 1
    assert weak.holm_verdict == "holds"


def test_a_report_names_one_or_two_headline_claims():
    secondary = decide(spec(), Estimate.of(seeds(2.0, 2.2, 1.9)))
    with pytest.raises(ValueError, match="headline"):
        Report("x", "X", [], [], [secondary])
    head = decide(ClaimSpec("h", "h", "s", RULE, headline=True), Estimate.of(seeds(2.0, 2.2, 1.9)))
    report = Report("x", "X", [], [], [head, secondary], checks=[Check("c", "by construction", True, "ok")])
    assert [c.id for c in report.headline] == ["h"]
    saved = report.to_dict()["claims"]
    assert saved[0]["headline"] is True and saved[1]["holm_verdict"] in ("holds", "not resolved")


def test_reports_refuse_hand_built_claims():
    class Fake:
        id, headline = "fake", True

    with pytest.raises(TypeError):
        Report("x", "X", [], [], [Fake()])  # type: ignore[list-item]


def test_a_rule_needs_a_positive_smallest_effect_and_a_source():
    with pytest.raises(ValueError):
        superiority(0.0, "brief")
    with pytest.raises(ValueError):
        superiority(1.0, " ")
