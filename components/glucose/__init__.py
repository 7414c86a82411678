"""Type-1-diabetes glucose simulation (UVa/Padova model with simglucose's virtual patients) and the
glycaemic risk metrics used to judge a carbohydrate estimate by the bolus it leads to (the bolus study)."""

from components.glucose.bolus_study import (
    SENSOR_RANGE,
    TRUE_CARBS,
    BolusStudy,
    BolusStudyConfig,
    bolus_carbs,
    choose_meals,
    reference_gap,
    run_bolus_study,
)
from components.glucose.patients import ADULTS, PATIENTS, Patients, load_patients
from components.glucose.risk import RISK_CONVENTIONS, risk_indices, time_in_range
from components.glucose.simulator import SimConfig, meal_intake, simulate_meal

__all__ = [
    "ADULTS",
    "PATIENTS",
    "RISK_CONVENTIONS",
    "SENSOR_RANGE",
    "TRUE_CARBS",
    "BolusStudy",
    "BolusStudyConfig",
    "Patients",
    "SimConfig",
    "bolus_carbs",
    "choose_meals",
    "load_patients",
    "meal_intake",
    "reference_gap",
    "risk_indices",
    "run_bolus_study",
    "simulate_meal",
    "time_in_range",
]
