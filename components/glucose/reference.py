"""simglucose's own patient loop, run for one scenario: the reference the batched simulator is checked on.

simglucose's package ``__init__`` registers a gym environment (``from gym.envs.registration import
register``); gym itself is not needed by the patient model and is not installed here. If gym cannot be
imported, a minimal stand-in module with a no-op ``register`` is put into ``sys.modules`` before
simglucose is imported (only then, and only those three module names).
"""

from __future__ import annotations

import importlib.util
import sys
import types
import warnings

import numpy as np

from components.glucose.simulator import SimConfig


def _ensure_gym_registration() -> None:
    if "gym" in sys.modules or importlib.util.find_spec("gym") is not None:
        return
    gym = types.ModuleType("gym")
    envs = types.ModuleType("gym.envs")
    registration = types.ModuleType("gym.envs.registration")
    registration.register = lambda *args, **kwargs: None  # type: ignore[attr-defined]
    gym.envs, envs.registration = envs, registration  # type: ignore[attr-defined]
    sys.modules.update({"gym": gym, "gym.envs": envs, "gym.envs.registration": registration})


def simglucose_trace(patient: str, carbs_g: float, bolus_u: float, cfg: SimConfig | None = None) -> np.ndarray:
    """BG (duration_min + 1,) mg/dL from simglucose's ``T1DPatient`` for the scenario of
    :func:`components.glucose.simulator.simulate_meal`: basal ``u2ss BW / 6000`` U/min throughout, the meal
    announced at ``meal_time_min`` and the bolus given as a 1-minute infusion in that minute.

    About 4 s per 6-hour simulation (scipy's dopri5 is called once per minute).
    """
    cfg = cfg or SimConfig()
    _ensure_gym_registration()
    with warnings.catch_warnings():  # simglucose imports the deprecated pkg_resources
        warnings.simplefilter("ignore", UserWarning)
        from simglucose.patient.t1dpatient import Action, T1DPatient

    body = T1DPatient.withName(patient)
    basal = body._params.u2ss * body._params.BW / 6000.0
    bg = [body.observation.Gsub]
    for minute in range(cfg.duration_min):
        at_meal = minute == cfg.meal_time_min
        body.step(Action(CHO=carbs_g if at_meal else 0.0, insulin=basal + (bolus_u if at_meal else 0.0)))
        bg.append(body.observation.Gsub)
    return np.asarray(bg, dtype=np.float64)
