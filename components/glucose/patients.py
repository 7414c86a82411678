"""Virtual type-1-diabetic patients of the UVa/Padova simulator, read from simglucose's parameter files.

simglucose ships the 30 virtual patients of the UVa/Padova T1D simulator (10 adolescents, 10 adults,
10 children) as ``params/vpatient_params.csv`` (model constants and the steady state ``x0_1 .. x0_13``)
and their therapy settings as ``params/Quest.csv`` (carbohydrate ratio CR in g/U, correction factor
CF in mg/dL/U). The files are read directly from the installed package folder; simglucose's own
``__init__`` (which registers a gym environment) is not imported.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# model constants the ODE reads (names as in vpatient_params.csv)
ODE_PARAMS = (
    "BW",
    "kabs",
    "kmax",
    "kmin",
    "b",
    "d",
    "Vg",
    "Vi",
    "Ib",
    "Vmx",
    "Km0",
    "k1",
    "k2",
    "p2u",
    "m1",
    "m2",
    "m4",
    "m30",
    "ki",
    "kp1",
    "kp2",
    "kp3",
    "f",
    "ke1",
    "ke2",
    "Fsnc",
    "Vm0",
    "kd",
    "ksc",
    "ka1",
    "ka2",
    "u2ss",
)
N_STATES = 13
ADULTS = tuple(f"adult#{i:03d}" for i in range(1, 11))
# the 30 virtual patients of simglucose's vpatient_params.csv (parameter validation reads this, not the file)
PATIENTS = tuple(f"{group}#{i:03d}" for group in ("adolescent", "adult", "child") for i in range(1, 11))


def simglucose_folder() -> Path:
    """The installed simglucose package folder (found without running its ``__init__``)."""
    spec = importlib.util.find_spec("simglucose")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "simglucose is not installed; it ships the virtual patients' parameters "
            "(pip install --no-deps simglucose==0.2.11)"
        )
    return Path(spec.submodule_search_locations[0])


@dataclass(frozen=True)
class Patients:
    """A cohort of virtual patients, one entry per patient.

    Attributes:
        names: patient names, e.g. ``("adult#001", ...)``.
        params: ODE constant name -> array (n_patients,), units as in the UVa/Padova model
            (BW kg, rates 1/min, volumes dL/kg, u2ss pmol/kg/min).
        x0: steady-state initial states, (n_patients, 13).
        cr: carbohydrate ratio, g of carbohydrate per U of insulin, (n_patients,).
        cf: correction factor, mg/dL per U, (n_patients,).
    """

    names: tuple[str, ...]
    params: dict[str, np.ndarray]
    x0: np.ndarray
    cr: np.ndarray
    cf: np.ndarray

    def __len__(self) -> int:
        return len(self.names)

    @property
    def basal_u_per_min(self) -> np.ndarray:
        """Basal insulin rate that holds the steady state, u2ss * BW / 6000 (U/min), (n_patients,)."""
        return self.params["u2ss"] * self.params["BW"] / 6000.0

    def index(self, name: str) -> int:
        if name not in self.names:
            raise KeyError(f"unknown patient {name!r}; known: {list(self.names)}")
        return self.names.index(name)


def load_patients(names: tuple[str, ...] | list[str] = ADULTS, folder: Path | None = None) -> Patients:
    """Read ``names`` from simglucose's ``vpatient_params.csv`` and ``Quest.csv``.

    Raises:
        KeyError: a name is not one of the 30 virtual patients (the message lists them).
    """
    import pandas as pd  # here only, so that ADULTS (read by parameter validation) comes without pandas

    folder = folder or simglucose_folder() / "params"
    table = pd.read_csv(folder / "vpatient_params.csv")
    quest = pd.read_csv(folder / "Quest.csv")
    known = list(table["Name"])
    missing = [n for n in names if n not in known or n not in set(quest["Name"])]
    if missing or not names:
        raise KeyError(f"unknown virtual patient(s) {missing or '(none given)'}; simglucose has {known}")
    rows = table.set_index("Name").loc[list(names)]
    therapy = quest.set_index("Name").loc[list(names)]
    state_cols = [c for c in table.columns if c.startswith("x0_")]
    if len(state_cols) != N_STATES:
        raise ValueError(f"{folder / 'vpatient_params.csv'}: expected {N_STATES} x0_ columns, got {state_cols}")
    return Patients(
        names=tuple(names),
        params={k: rows[k].to_numpy(dtype=np.float64) for k in ODE_PARAMS},
        x0=rows[state_cols].to_numpy(dtype=np.float64),
        cr=therapy["CR"].to_numpy(dtype=np.float64),
        cf=therapy["CF"].to_numpy(dtype=np.float64),
    )
