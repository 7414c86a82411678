"""Flow-matching core shared by NSOT, HRF, OC-Flow and Pyramid Flow.

Time convention: t = 0 is the source (noise) x0, t = 1 is the data x1; the model predicts the
velocity dx_t/dt (Pyramid Flow's SD3 convention is the reverse: map t -> 1 - t and flip the sign).
"""

from components.generative.couplings import COUPLINGS, Coupling, couple
from components.generative.flow_matching import VelocityModel, flow_matching_loss, pair_loss
from components.generative.interpolants import INTERPOLANTS, Interpolant, broadcast_time, interpolate
from components.generative.samplers import SAMPLERS, SampleResult, sample
from components.generative.time import TIME_SCHEDULES, sample_time, sinusoidal_time_embedding

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
    "pair_loss",
    "interpolate",
    "sample",
    "sample_time",
    "sinusoidal_time_embedding",
]
