"""Flow-matching core shared by NSOT, HRF, OC-Flow and Pyramid Flow.

Time convention: t = 0 is the source (noise) x0, t = 1 is the data x1; the model predicts the
velocity dx_t/dt (Pyramid Flow's SD3 convention is the reverse: map t -> 1 - t and flip the sign).

The names below load from their modules on first use (``from components.generative import couple`` works
as usual), so importing a torch-free module of this package, such as
:mod:`components.generative.pyramid_schedule`, does not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# the same names as import statements: for type checkers, and for the stage code deps of dvc.yaml
# (paperflows.codedeps reads the imports of a package's __init__.py from its source)
if TYPE_CHECKING:
    from components.generative.couplings import COUPLINGS, Coupling, couple
    from components.generative.flow_matching import VelocityModel, flow_matching_loss, pair_loss
    from components.generative.interpolants import INTERPOLANTS, Interpolant, broadcast_time, interpolate
    from components.generative.samplers import SAMPLERS, SampleResult, sample
    from components.generative.time import TIME_SCHEDULES, sample_time, sinusoidal_time_embedding

# name -> module of this package that defines it
_API = {
    "COUPLINGS": "couplings",
    "Coupling": "couplings",
    "couple": "couplings",
    "VelocityModel": "flow_matching",
    "flow_matching_loss": "flow_matching",
    "pair_loss": "flow_matching",
    "INTERPOLANTS": "interpolants",
    "Interpolant": "interpolants",
    "broadcast_time": "interpolants",
    "interpolate": "interpolants",
    "SAMPLERS": "samplers",
    "SampleResult": "samplers",
    "sample": "samplers",
    "TIME_SCHEDULES": "time",
    "sample_time": "time",
    "sinusoidal_time_embedding": "time",
}

__all__ = [
    "COUPLINGS",
    "INTERPOLANTS",
    "SAMPLERS",
    "TIME_SCHEDULES",
    "Coupling",
    "Interpolant",
    "SampleResult",
    "VelocityModel",
    "broadcast_time",
    "couple",
    "flow_matching_loss",
    "interpolate",
    "pair_loss",
    "sample",
    "sample_time",
    "sinusoidal_time_embedding",
]


def __getattr__(name: str) -> Any:
    if name in _API:
        value = getattr(importlib.import_module(f"{__name__}.{_API[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
