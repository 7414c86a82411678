"""Batched UVa/Padova T1D simulation of one meal with a carb-counting bolus.

The ODE is the 13-state UVa/Padova model as simglucose's ``T1DPatient.model`` writes it (states in
simglucose's order, units mg/kg for glucose masses, pmol/kg for insulin masses):

    x0, x1, x2  stomach solid, stomach liquid, gut glucose                     (mg)
    x3, x4      plasma and tissue glucose                                     (mg/kg)
    x5          plasma insulin                                                (pmol/kg)
    x6          insulin action on glucose utilisation, x7, x8 on production
    x9          liver insulin                                                 (pmol/kg)
    x10, x11    subcutaneous insulin compartments                             (pmol/kg)
    x12         subcutaneous glucose; the reported BG is x12 / Vg              (mg/dL)

    dx0  = -kmax x0 + d(t)
    dx1  =  kmax x0 - kgut(qsto, Dbar) x1,  qsto = x0 + x1
    kgut = kmin + (kmax - kmin)/2 [tanh(a (qsto - b Dbar)) - tanh(c (qsto - d Dbar)) + 2],
           a = 5 / (2 Dbar (1 - b)), c = 5 / (2 Dbar d)   (kgut = kmax while Dbar = 0)
    dx2  =  kgut x1 - kabs x2;   Ra = f kabs x2 / BW
    dx3  =  max(kp1 - kp2 x3 - kp3 x8, 0) + Ra - Fsnc - ke1 max(x3 - ke2, 0) - k1 x3 + k2 x4
    dx4  = -(Vm0 + Vmx x6) x4 / (Km0 + x4) + k1 x3 - k2 x4
    dx5  = -(m2 + m4) x5 + m1 x9 + ka1 x10 + ka2 x11
    dx6  = -p2u x6 + p2u (x5 / Vi - Ib);   dx7 = -ki (x7 - x5 / Vi);   dx8 = -ki (x8 - x7)
    dx9  = -(m1 + m30) x9 + m2 x5
    dx10 =  u(t) - (ka1 + kd) x10;         dx11 = kd x10 - ka2 x11;    dx12 = -ksc x12 + ksc x3

with the non-negativity guards of simglucose (a state that is negative gets a zero derivative).
Inputs follow simglucose's 1-minute loop: the meal is eaten at 5 g/min from the meal time on
(``d`` in mg/min), ``Dbar`` is the stomach content when eating started plus everything eaten so far,
and the insulin input is basal ``u2ss BW / 6000`` U/min plus, during the meal minute, the whole bolus
(U) as a 1-minute infusion, converted to pmol/kg/min by ``* 6000 / BW``. Inputs are held constant over
each minute; each minute is integrated with ``substeps`` classic Runge-Kutta (RK4) steps, all
simulations of a batch at once (numpy, float64). simglucose integrates the same minute with an
adaptive Dormand-Prince solver; the agreement is tested against its ``T1DPatient``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from components.glucose.patients import Patients


@dataclass(frozen=True)
class SimConfig:
    """One-meal scenario: simulate ``duration_min`` minutes, meal (and bolus) at ``meal_time_min``."""

    duration_min: int = 360
    meal_time_min: int = 60
    substeps: int = 4  # RK4 steps per 1-minute sample
    eat_rate_g_per_min: float = 5.0  # simglucose's T1DPatient.EAT_RATE

    def __post_init__(self) -> None:
        if self.duration_min < 1 or not 0 <= self.meal_time_min < self.duration_min:
            raise ValueError(f"need 0 <= meal_time_min < duration_min, got {self.meal_time_min}, {self.duration_min}")
        if self.substeps < 1 or self.eat_rate_g_per_min <= 0:
            raise ValueError("substeps must be >= 1 and eat_rate_g_per_min > 0")


def _derivative(
    x: np.ndarray, p: dict[str, np.ndarray], d_mg: np.ndarray, insulin: np.ndarray, dbar: np.ndarray
) -> np.ndarray:
    """dx/dt for a batch: x (B, 13); d_mg meal intake (B,) mg/min; insulin (B,) pmol/kg/min; dbar (B,) mg."""
    dx = np.empty_like(x)
    qsto = x[:, 0] + x[:, 1]
    safe = np.where(dbar > 0, dbar, 1.0)
    aa = 5.0 / (2.0 * safe * (1.0 - p["b"]))
    cc = 5.0 / (2.0 * safe * p["d"])
    kgut = p["kmin"] + (p["kmax"] - p["kmin"]) / 2.0 * (
        np.tanh(aa * (qsto - p["b"] * safe)) - np.tanh(cc * (qsto - p["d"] * safe)) + 2.0
    )
    kgut = np.where(dbar > 0, kgut, p["kmax"])

    dx[:, 0] = -p["kmax"] * x[:, 0] + d_mg
    dx[:, 1] = p["kmax"] * x[:, 0] - x[:, 1] * kgut
    dx[:, 2] = kgut * x[:, 1] - p["kabs"] * x[:, 2]
    rate_appearance = p["f"] * p["kabs"] * x[:, 2] / p["BW"]
    production = p["kp1"] - p["kp2"] * x[:, 3] - p["kp3"] * x[:, 8]
    excretion = np.where(x[:, 3] > p["ke2"], p["ke1"] * (x[:, 3] - p["ke2"]), 0.0)
    dx[:, 3] = (
        np.maximum(production, 0.0) + rate_appearance - p["Fsnc"] - excretion - p["k1"] * x[:, 3] + p["k2"] * x[:, 4]
    )
    dx[:, 3] *= x[:, 3] >= 0
    utilisation = (p["Vm0"] + p["Vmx"] * x[:, 6]) * x[:, 4] / (p["Km0"] + x[:, 4])
    dx[:, 4] = -utilisation + p["k1"] * x[:, 3] - p["k2"] * x[:, 4]
    dx[:, 4] *= x[:, 4] >= 0
    dx[:, 5] = -(p["m2"] + p["m4"]) * x[:, 5] + p["m1"] * x[:, 9] + p["ka1"] * x[:, 10] + p["ka2"] * x[:, 11]
    dx[:, 5] *= x[:, 5] >= 0
    plasma_insulin = x[:, 5] / p["Vi"]
    dx[:, 6] = -p["p2u"] * x[:, 6] + p["p2u"] * (plasma_insulin - p["Ib"])
    dx[:, 7] = -p["ki"] * (x[:, 7] - plasma_insulin)
    dx[:, 8] = -p["ki"] * (x[:, 8] - x[:, 7])
    dx[:, 9] = -(p["m1"] + p["m30"]) * x[:, 9] + p["m2"] * x[:, 5]
    dx[:, 9] *= x[:, 9] >= 0
    dx[:, 10] = insulin - (p["ka1"] + p["kd"]) * x[:, 10]
    dx[:, 10] *= x[:, 10] >= 0
    dx[:, 11] = p["kd"] * x[:, 10] - p["ka2"] * x[:, 11]
    dx[:, 11] *= x[:, 11] >= 0
    dx[:, 12] = -p["ksc"] * x[:, 12] + p["ksc"] * x[:, 3]
    dx[:, 12] *= x[:, 12] >= 0
    return dx


def meal_intake(carbs_g: np.ndarray, cfg: SimConfig) -> np.ndarray:  # (B,) g -> (B, duration_min) g
    """Grams eaten in each minute, (B, duration_min): ``eat_rate`` g/min from the meal time until done."""
    carbs_g = np.asarray(carbs_g, dtype=np.float64)
    minutes = np.arange(cfg.duration_min) - cfg.meal_time_min
    left = carbs_g[:, None] - cfg.eat_rate_g_per_min * minutes[None, :]
    return np.where(minutes[None, :] >= 0, np.clip(left, 0.0, cfg.eat_rate_g_per_min), 0.0)


def simulate_meal(
    patients: Patients, patient_idx: np.ndarray, carbs_g: np.ndarray, bolus_u: np.ndarray, cfg: SimConfig | None = None
) -> np.ndarray:
    """Blood glucose of B one-meal simulations, sampled every minute.

    Args:
        patients: the cohort; ``patient_idx`` (B,) int picks a patient per simulation.
        carbs_g: carbohydrates actually eaten at the meal, (B,) g, >= 0.
        bolus_u: meal bolus given at the meal time, (B,) U, >= 0 (e.g. estimated carbs / CR).
        cfg: scenario and integration settings (default ``SimConfig()``).

    Returns:
        BG (B, duration_min + 1) in mg/dL (subcutaneous glucose x12 / Vg, as simglucose reports),
        at t = 0, 1, ..., duration_min minutes.
    """
    cfg = cfg or SimConfig()
    idx = np.asarray(patient_idx, dtype=np.int64)
    carbs_g = np.asarray(carbs_g, dtype=np.float64)
    bolus_u = np.asarray(bolus_u, dtype=np.float64)
    if not (idx.shape == carbs_g.shape == bolus_u.shape) or idx.ndim != 1:
        raise ValueError(
            f"patient_idx, carbs_g and bolus_u must be 1-D of one length, got {idx.shape}, "
            f"{carbs_g.shape}, {bolus_u.shape}"
        )
    if idx.size and (idx.min() < 0 or idx.max() >= len(patients)):
        raise ValueError(f"patient_idx out of range 0..{len(patients) - 1}")
    if np.any(carbs_g < 0) or np.any(bolus_u < 0) or not np.all(np.isfinite(carbs_g + bolus_u)):
        raise ValueError("carbs_g and bolus_u must be finite and >= 0")
    p = {k: v[idx] for k, v in patients.params.items()}
    x = patients.x0[idx].copy()
    basal = p["u2ss"] * p["BW"] / 6000.0  # U/min
    eaten = meal_intake(carbs_g, cfg)  # g per minute
    to_pmol = 6000.0 / p["BW"]  # U/min -> pmol/kg/min
    last_qsto = x[:, 0] + x[:, 1]
    food_taken = np.zeros_like(carbs_g)
    prev_eat = np.zeros_like(carbs_g)
    h = 1.0 / cfg.substeps
    bg = np.empty((idx.size, cfg.duration_min + 1))
    bg[:, 0] = x[:, 12] / p["Vg"]
    for minute in range(cfg.duration_min):
        eat = eaten[:, minute]
        starts = (eat > 0) & (prev_eat <= 0)  # simglucose resets Dbar when eating starts
        last_qsto = np.where(starts, x[:, 0] + x[:, 1], last_qsto)
        food_taken = np.where(starts, 0.0, food_taken) + np.where(eat > 0, eat, 0.0)
        prev_eat = eat
        dbar = last_qsto + 1000.0 * food_taken
        d_mg = 1000.0 * eat
        units = basal + (bolus_u if minute == cfg.meal_time_min else 0.0)
        insulin = units * to_pmol
        for _ in range(cfg.substeps):
            k1 = _derivative(x, p, d_mg, insulin, dbar)
            k2 = _derivative(x + 0.5 * h * k1, p, d_mg, insulin, dbar)
            k3 = _derivative(x + 0.5 * h * k2, p, d_mg, insulin, dbar)
            k4 = _derivative(x + h * k3, p, d_mg, insulin, dbar)
            x = x + h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        bg[:, minute + 1] = x[:, 12] / p["Vg"]
    return bg
