"""The bolus study: what a carbohydrate estimate does to a type-1-diabetic's glucose (NutriBench §5).

Arms are named estimators plus :data:`TRUE_CARBS`, the bolus on the true carbs. For every arm, chosen meal
and virtual patient, one simulation (:func:`components.glucose.simulator.simulate_meal`): basal insulin
throughout, the true carbs eaten at the meal time, and a meal bolus of

    bolus = min(max(estimate, 0) / CR, max_bolus_u)        (U; an "unknown" -1 answer means no bolus)

capped at the largest bolus a pump delivers. Readings are reported as a CGM reports them, clipped to the
sensor's range :data:`SENSOR_RANGE` (the model's glucose can leave it, and even go below zero after a
massive over-bolus); the counts of readings beyond either bound are kept. Each simulation gets its time in
range, LBGI and HBGI (:mod:`components.glucose.risk`) and is paired with the true-carb simulation of the
same meal and patient (``*_true`` columns).

Meal choice (:func:`choose_meals`): each arm is simulated on up to ``meals_per_arm`` of the meals it
answered: first the meals every arm answered (in the first arm's order), so arms are compared on shared
meals, then its own other meals in its order. The true-carb arm covers every meal any arm got.

The traces of one case are kept for a figure: the shared meal whose carbs are closest to the median of the
shared meals, for ``trace_patient``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from components.glucose.patients import Patients
from components.glucose.risk import risk_indices, time_in_range
from components.glucose.simulator import SimConfig, simulate_meal

# the measuring range of simglucose's CGM sensors (params/sensor_params.csv: Dexcom min 39, max 600 mg/dL)
SENSOR_RANGE = (39.0, 600.0)
TRUE_CARBS = "true carbs"


@dataclass(frozen=True)
class BolusStudyConfig:
    """The scenario and the outcome definitions of the study."""

    sim: SimConfig = field(default_factory=SimConfig)
    meals_per_arm: int | None = 100  # None: every answered meal
    max_bolus_u: float = 30.0  # simglucose's pump table: 30 U (Insulet), 75 U (Cozmo)
    tir_low: float = 70.0
    tir_high: float = 180.0
    risk_convention: str = "kovatchev"
    trace_patient: str | None = None  # None: the first patient
    chunk: int = 20_000  # simulations per batch (bounds the memory of the BG traces)

    def __post_init__(self) -> None:
        if self.meals_per_arm is not None and self.meals_per_arm < 1:
            raise ValueError(f"meals_per_arm must be >= 1 or None, got {self.meals_per_arm}")
        if self.max_bolus_u <= 0 or not 0 < self.tir_low < self.tir_high or self.chunk < 1:
            raise ValueError("need max_bolus_u > 0, 0 < tir_low < tir_high and chunk >= 1")


@dataclass
class BolusStudy:
    """Rows (one per arm, meal, patient), a per-arm summary, and the kept traces (arm -> BG (T + 1,))."""

    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    traces: dict[str, np.ndarray]
    trace_meal: str
    trace_patient: str


def bolus_carbs(estimate: float) -> float:
    """Carbs a patient boluses for: an unknown (-1) or negative estimate means no meal bolus."""
    return max(float(estimate), 0.0)


def choose_meals(answered: Mapping[str, Sequence[str]], limit: int | None) -> dict[str, list[str]]:
    """The meals each arm is simulated on (see the module docstring), arm -> meal ids in order.

    Raises:
        ValueError: no arm, or no meal answered by every arm.
    """
    arms = list(answered)
    if not arms:
        raise ValueError("choose_meals: no arm")
    members = {a: set(answered[a]) for a in arms}
    shared = [m for m in dict.fromkeys(answered[arms[0]]) if all(m in members[a] for a in arms)]
    if not shared:
        raise ValueError("no meal was answered by every arm")
    in_shared = set(shared)
    return {a: (shared + [m for m in dict.fromkeys(answered[a]) if m not in in_shared])[:limit] for a in arms}


def run_bolus_study(
    patients: Patients,
    carbs: Mapping[str, float],
    estimates: Mapping[str, Mapping[str, float]],
    cfg: BolusStudyConfig | None = None,
) -> BolusStudy:
    """Simulate every (arm, meal, patient) of the study.

    Args:
        patients: the virtual cohort (CR per patient).
        carbs: meal id -> the carbohydrates actually eaten (g).
        estimates: arm -> {meal id -> estimated carbs (g), -1 = unknown}, each in the arm's answer order;
            arm names must differ from :data:`TRUE_CARBS`.
        cfg: the scenario (default ``BolusStudyConfig()``).

    Returns:
        rows ``{strategy, meal_id, patient, carb, estimate, bolus_u, bolus_requested_u, tir, lbgi, hbgi,
        tir_true, lbgi_true, hbgi_true, readings_below_sensor, readings_above_sensor}`` (true-carb arm first),
        the summary ``{meals, patients, simulations, <arm>: {meals, tir, lbgi, hbgi, tir_minus_true,
        lbgi_minus_true, hbgi_minus_true, capped_boluses, readings_below_sensor, readings_above_sensor}}``
        and the traces of the kept case.
    """
    cfg = cfg or BolusStudyConfig()
    if TRUE_CARBS in estimates:
        raise ValueError(f"an arm may not be named {TRUE_CARBS!r}")
    chosen = choose_meals({a: list(e) for a, e in estimates.items()}, cfg.meals_per_arm)
    arms = list(chosen)
    union = list(dict.fromkeys(m for a in arms for m in chosen[a]))
    common = [m for m in union if all(m in chosen[a] for a in arms)]
    n_p = len(patients)
    grid = [(TRUE_CARBS, m, k) for m in union for k in range(n_p)]
    grid += [(a, m, k) for a in arms for m in chosen[a] for k in range(n_p)]
    truth = np.array([carbs[m] for _, m, _ in grid], dtype=np.float64)
    raw = np.array([carbs[m] if a == TRUE_CARBS else estimates[a][m] for a, m, _ in grid], dtype=np.float64)
    patient_idx = np.array([k for _, _, k in grid], dtype=np.int64)
    requested = np.maximum(raw, 0.0) / patients.cr[patient_idx]
    bolus = np.minimum(requested, cfg.max_bolus_u)

    trace_k = patients.index(cfg.trace_patient) if cfg.trace_patient is not None else 0
    median = np.median([carbs[m] for m in common])
    trace_meal = common[int(np.argmin([abs(carbs[m] - median) for m in common]))]
    n = len(grid)
    tir, lbgi, hbgi = np.empty(n), np.empty(n), np.empty(n)
    below, above = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    traces: dict[str, np.ndarray] = {}
    for lo in range(0, n, cfg.chunk):
        sl = slice(lo, lo + cfg.chunk)
        bg = simulate_meal(patients, patient_idx[sl], truth[sl], bolus[sl], cfg.sim)
        below[sl], above[sl] = (bg < SENSOR_RANGE[0]).sum(axis=1), (bg > SENSOR_RANGE[1]).sum(axis=1)
        bg = np.clip(bg, *SENSOR_RANGE)
        tir[sl] = time_in_range(bg, cfg.tir_low, cfg.tir_high)
        lbgi[sl], hbgi[sl] = risk_indices(bg, cfg.risk_convention)
        for j, (a, m, k) in enumerate(grid[sl]):
            if m == trace_meal and k == trace_k:
                traces[a] = bg[j]

    true_of = {(m, k): i for i, (a, m, k) in enumerate(grid) if a == TRUE_CARBS}
    paired = np.array([true_of[(m, k)] for _, m, k in grid])
    rows = [
        {
            "strategy": a,
            "meal_id": m,
            "patient": patients.names[k],
            "carb": float(truth[i]),
            "estimate": float(raw[i]),
            "bolus_u": float(bolus[i]),
            "bolus_requested_u": float(requested[i]),
            "tir": float(tir[i]),
            "lbgi": float(lbgi[i]),
            "hbgi": float(hbgi[i]),
            "tir_true": float(tir[paired[i]]),
            "lbgi_true": float(lbgi[paired[i]]),
            "hbgi_true": float(hbgi[paired[i]]),
            "readings_below_sensor": int(below[i]),
            "readings_above_sensor": int(above[i]),
        }
        for i, (a, m, k) in enumerate(grid)
    ]
    summary: dict[str, Any] = {"meals": len(union), "patients": n_p, "simulations": n}
    names = np.array([a for a, _, _ in grid])
    for a in [TRUE_CARBS, *arms]:
        sel = names == a
        summary[a] = {
            "meals": int(sel.sum() // n_p),
            "tir": float(tir[sel].mean()),
            "lbgi": float(lbgi[sel].mean()),
            "hbgi": float(hbgi[sel].mean()),
            "tir_minus_true": float((tir[sel] - tir[paired[sel]]).mean()),
            "lbgi_minus_true": float((lbgi[sel] - lbgi[paired[sel]]).mean()),
            "hbgi_minus_true": float((hbgi[sel] - hbgi[paired[sel]]).mean()),
            "capped_boluses": int((requested[sel] > cfg.max_bolus_u).sum()),
            "readings_below_sensor": int(below[sel].sum()),
            "readings_above_sensor": int(above[sel].sum()),
        }
    return BolusStudy(rows, summary, traces, trace_meal, patients.names[trace_k])


def reference_gap(study: BolusStudy, sim: SimConfig) -> float:
    """Largest |BG difference| (mg/dL) between the kept true-carb trace and simglucose's own ``T1DPatient``
    run on the same case (same carbs, same bolus): the check of the batched integrator on this study."""
    from components.glucose.reference import simglucose_trace

    row = next(
        r
        for r in study.rows
        if r["strategy"] == TRUE_CARBS and r["meal_id"] == study.trace_meal and r["patient"] == study.trace_patient
    )
    ref = simglucose_trace(study.trace_patient, row["carb"], row["bolus_u"], sim)
    return float(np.max(np.abs(ref - study.traces[TRUE_CARBS])))
