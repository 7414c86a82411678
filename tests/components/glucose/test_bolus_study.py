"""The bolus study: meal choice, bolus rule, pump cap, CGM clipping, pairing with the true-carb bolus."""

from __future__ import annotations

import numpy as np
import pytest

from components.glucose import (
    SENSOR_RANGE,
    TRUE_CARBS,
    BolusStudyConfig,
    SimConfig,
    bolus_carbs,
    choose_meals,
    load_patients,
    reference_gap,
    risk_indices,
    run_bolus_study,
    simulate_meal,
    time_in_range,
)

PATIENTS = load_patients(["adult#001", "adult#002"])
SIM = SimConfig(duration_min=240, meal_time_min=30, substeps=2)
CARBS = {"m1": 40.0, "m2": 60.0, "m3": 25.0, "m4": 90.0}


def test_bolus_carbs_treats_unknown_as_no_bolus() -> None:
    assert bolus_carbs(-1.0) == 0.0 and bolus_carbs(-7.0) == 0.0 and bolus_carbs(42.5) == 42.5


def test_meal_choice_puts_shared_meals_first() -> None:
    answered = {"a": ["m1", "m2", "m3", "m4"], "b": ["m4", "m2", "m5"]}
    assert choose_meals(answered, None) == {"a": ["m2", "m4", "m1", "m3"], "b": ["m2", "m4", "m5"]}
    assert choose_meals(answered, 3) == {"a": ["m2", "m4", "m1"], "b": ["m2", "m4", "m5"]}
    assert choose_meals(answered, 1) == {"a": ["m2"], "b": ["m2"]}
    with pytest.raises(ValueError, match="no meal was answered by every arm"):
        choose_meals({"a": ["m1"], "b": ["m2"]}, None)


def test_exact_estimates_equal_the_true_bolus_and_rows_are_what_the_simulator_gives() -> None:
    estimates = {"exact": dict(CARBS), "half": {m: c / 2 for m, c in CARBS.items()}}
    cfg = BolusStudyConfig(sim=SIM, meals_per_arm=None, trace_patient="adult#002")
    study = run_bolus_study(PATIENTS, CARBS, estimates, cfg)
    assert len(study.rows) == 3 * 4 * 2 and study.summary["simulations"] == 24
    exact = [r for r in study.rows if r["strategy"] == "exact"]
    assert all(r["tir"] == r["tir_true"] and r["hbgi"] == r["hbgi_true"] for r in exact)
    assert study.summary["exact"]["tir_minus_true"] == 0.0 and study.summary["exact"]["hbgi_minus_true"] == 0.0
    # one row recomputed by hand: adult#002 (CR from Quest.csv), meal m2 with half the carbs bolused
    row = next(
        r for r in study.rows if r["strategy"] == "half" and r["meal_id"] == "m2" and r["patient"] == "adult#002"
    )
    bolus = 30.0 / PATIENTS.cr[1]
    assert row["bolus_u"] == pytest.approx(bolus) and row["estimate"] == 30.0 and row["carb"] == 60.0
    bg = np.clip(simulate_meal(PATIENTS, np.array([1]), np.array([60.0]), np.array([bolus]), SIM), *SENSOR_RANGE)
    lbgi, hbgi = risk_indices(bg)
    assert row["tir"] == pytest.approx(float(time_in_range(bg)[0])) and row["hbgi"] == pytest.approx(float(hbgi[0]))
    assert row["lbgi"] == pytest.approx(float(lbgi[0]))
    # under-bolusing raises HBGI on every pair; the traces kept are the shared meal nearest the median (40/60 g)
    half = [r for r in study.rows if r["strategy"] == "half"]
    assert all(r["hbgi"] > r["hbgi_true"] for r in half) and study.summary["half"]["hbgi_minus_true"] > 0
    assert study.trace_meal == "m1" and study.trace_patient == "adult#002"
    assert set(study.traces) == {TRUE_CARBS, "exact", "half"} and study.traces["half"].shape == (241,)


def test_absurd_estimates_are_capped_and_clipped_to_the_sensor() -> None:
    """10 kg of carbs is a 30 U bolus at most; the hypoglycaemia it causes is scored within the CGM range."""
    estimates = {"absurd": {"m1": 10_000.0, "m2": -1.0}}
    long = SimConfig(duration_min=360, meal_time_min=30, substeps=2)  # the dip passes 39 mg/dL after ~4 h
    study = run_bolus_study(PATIENTS, CARBS, estimates, BolusStudyConfig(sim=long, meals_per_arm=None))
    summary = study.summary["absurd"]
    assert summary["capped_boluses"] == 2 and study.summary[TRUE_CARBS]["capped_boluses"] == 0
    capped = [r for r in study.rows if r["strategy"] == "absurd" and r["meal_id"] == "m1"]
    assert all(r["bolus_u"] == 30.0 < r["bolus_requested_u"] for r in capped)
    assert all(r["lbgi"] > r["lbgi_true"] + 1 for r in capped)
    assert any(r["readings_below_sensor"] > 0 for r in capped)
    assert summary["readings_below_sensor"] == sum(r["readings_below_sensor"] for r in capped) > 0
    unknown = [r for r in study.rows if r["strategy"] == "absurd" and r["meal_id"] == "m2"]
    assert all(r["bolus_u"] == 0.0 and r["estimate"] == -1.0 and r["hbgi"] > r["hbgi_true"] for r in unknown)
    assert study.traces[TRUE_CARBS].min() >= SENSOR_RANGE[0]


def test_arm_named_like_the_true_bolus_is_refused() -> None:
    with pytest.raises(ValueError, match="may not be named"):
        run_bolus_study(PATIENTS, CARBS, {TRUE_CARBS: dict(CARBS)}, BolusStudyConfig(sim=SIM))


def test_reference_gap_against_simglucose() -> None:
    study = run_bolus_study(
        PATIENTS,
        {"m1": 40.0},
        {"exact": {"m1": 40.0}},
        BolusStudyConfig(sim=SimConfig(duration_min=120, meal_time_min=10, substeps=2)),
    )
    assert reference_gap(study, SimConfig(duration_min=120, meal_time_min=10, substeps=2)) < 0.05
