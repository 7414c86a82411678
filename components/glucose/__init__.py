"""Type-1-diabetes glucose simulation (UVa/Padova model with simglucose's virtual patients) and the
glycaemic risk metrics used to judge a carbohydrate estimate by the bolus it leads to."""

from components.glucose.patients import ADULTS, Patients, load_patients
from components.glucose.risk import RISK_CONVENTIONS, risk_indices, time_in_range
from components.glucose.simulator import SimConfig, meal_intake, simulate_meal

__all__ = [
           "ADULTS",
           "RISK_CONVENTIONS",
           "Patients",
           "SimConfig",
           "load_patients",
           "meal_intake",
           "risk_indices",
           "simulate_meal",
           "time_in_range",
]
