"""The batched UVa/Padova integrator: agreement with simglucose's own patient, invariants, and the
clinical sanity checks the risk study rests on."""

from __future__ import annotations

import numpy as np
import pytest

from components.glucose import ADULTS, SimConfig, load_patients, meal_intake, risk_indices, simulate_meal, time_in_range
from components.glucose.reference import simglucose_trace

PATIENTS = load_patients()
CFG = SimConfig(substeps=2)


def _run(carbs: float, bolus_factor: float, names: tuple[str, ...] = ADULTS, cfg: SimConfig = CFG) -> np.ndarray:
    idx = np.array([PATIENTS.index(n) for n in names])
    carbs_arr = np.full(idx.size, carbs)
    return simulate_meal(PATIENTS, idx, carbs_arr, bolus_factor * carbs_arr / PATIENTS.cr[idx], cfg)


def test_patients_come_from_simglucose_files() -> None:
    assert PATIENTS.names == ADULTS
    assert PATIENTS.x0.shape == (10, 13)
    # Quest.csv: adult#001 CR 10, CF 8.77...; adult#005 CR 5
    assert PATIENTS.cr[0] == 10 and PATIENTS.cr[4] == 5
    assert PATIENTS.cf[0] == pytest.approx(8.77310657487)
    # vpatient_params.csv: adult#001 BW 102.32 kg, u2ss 1.238624
    assert PATIENTS.basal_u_per_min[0] == pytest.approx(1.238624 * 102.32 / 6000)
    with pytest.raises(KeyError, match="unknown virtual patient"):
        load_patients(["adult#011"])


@pytest.mark.parametrize(("name", "carbs", "factor"), [("adult#001", 50.0, 1.0), ("adult#007", 30.0, 2.0)])
def test_agrees_with_simglucose_t1dpatient(name: str, carbs: float, factor: float) -> None:
    """Same scenario through simglucose's T1DPatient (scipy dopri5): max |dBG| < 0.01 mg/dL at 2 RK4 substeps
    (measured: ~1e-5 for adult#001, ~1e-3 for adult#007 with its fast gut absorption)."""
    i = PATIENTS.index(name)
    bolus = factor * carbs / PATIENTS.cr[i]
    ref = simglucose_trace(name, carbs, bolus, CFG)
    ours = simulate_meal(PATIENTS, np.array([i]), np.array([carbs]), np.array([bolus]), CFG)[0]
    assert ours.shape == ref.shape == (CFG.duration_min + 1,)
    assert np.max(np.abs(ours - ref)) < 1e-2
    assert ref.max() - ref.min() > 20  # the meal really moved glucose


def test_no_meal_no_bolus_stays_at_steady_state() -> None:
    bg = _run(0.0, 0.0)
    gb = PATIENTS.x0[:, 12] / PATIENTS.params["Vg"]
    assert np.max(np.abs(bg - gb[:, None])) < 1e-6


def test_batch_composition_does_not_change_a_simulation() -> None:
    alone = simulate_meal(PATIENTS, np.array([3]), np.array([60.0]), np.array([4.0]), CFG)
    mixed = simulate_meal(PATIENTS, np.array([0, 3, 9]), np.array([10.0, 60.0, 150.0]), np.array([0.0, 4.0, 20.0]), CFG)
    np.testing.assert_allclose(mixed[1], alone[0], rtol=0, atol=1e-12)


def test_meal_intake_follows_the_eat_rate() -> None:
    cfg = SimConfig(duration_min=100, meal_time_min=10)
    eaten = meal_intake(np.array([12.0, 0.0]), cfg)
    assert eaten[0].sum() == pytest.approx(12.0) and eaten[1].sum() == 0
    assert list(eaten[0, 10:13]) == [5.0, 5.0, 2.0] and eaten[0, :10].sum() == 0


def test_true_carb_bolus_keeps_adults_in_range() -> None:
    bg = _run(40.0, 1.0)
    tir = time_in_range(bg)
    assert bg.min() > 70.0  # no hypoglycaemia in any adult
    assert tir.min() >= 0.75 and tir.mean() >= 0.95
    assert time_in_range(_run(40.0, 0.0)).mean() < tir.mean()  # skipping the bolus is worse


def test_under_bolus_raises_hbgi_and_over_bolus_raises_lbgi() -> None:
    lbgi, hbgi = {}, {}
    for factor in (0.5, 1.0, 2.0):
        lbgi[factor], hbgi[factor] = risk_indices(_run(60.0, factor))
    assert np.all(hbgi[0.5] > hbgi[1.0]) and hbgi[0.5].mean() > 1.5 * hbgi[1.0].mean()
    assert np.all(lbgi[2.0] >= lbgi[1.0]) and lbgi[2.0].mean() > lbgi[1.0].mean() + 0.5


def test_rejects_bad_inputs() -> None:
    with pytest.raises(ValueError, match="1-D of one length"):
        simulate_meal(PATIENTS, np.array([0, 1]), np.array([1.0]), np.array([1.0]))
    with pytest.raises(ValueError, match=">= 0"):
        simulate_meal(PATIENTS, np.array([0]), np.array([-5.0]), np.array([1.0]))
    with pytest.raises(ValueError, match="out of range"):
        simulate_meal(PATIENTS, np.array([10]), np.array([5.0]), np.array([1.0]))
    with pytest.raises(ValueError, match="meal_time_min"):
        SimConfig(duration_min=60, meal_time_min=60)
