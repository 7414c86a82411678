"""The shape of :class:`components.models.fourier_velocity.FourierVelocityNet` and its exact parameter
count, without torch (parameter models build and match these while validating).

:func:`match_width` solves for the hidden width that brings a configuration closest to a target count, so
that hierarchies of different depths are compared at a matched parameter count (a deeper hierarchy reads
more inputs; the official code instead lets the width grow with the depth).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

__all__ = ["DataFeatures", "FourierVelocityConfig", "match_width"]

DataFeatures = Literal["fourier", "raw"]


def _embedding_parameters(n_inputs: int, dim: int, out_dim: int) -> int:
    # components.models.layers.FourierInputEmbedding.n_parameters, restated here without torch
    return (dim + 1) * dim + (n_inputs * dim + 1) * out_dim


@dataclass(frozen=True)
class FourierVelocityConfig:
    """Shape of :class:`components.models.fourier_velocity.FourierVelocityNet`.

    Attributes:
        data_dim: numbers in one state (1, 2, or 784 for a flattened 28x28 image).
        levels: (state, time) pairs read: 1 for RF, D for depth-D HRF.
        hidden: width of the last hidden layer; the first is twice as wide (the official ``2 D h, D h``).
        n_layers: hidden layers (>= 2): ``2 hidden`` then ``n_layers - 1`` of ``hidden``.
        emb_dim: Fourier features per input number (even, >= 4); each branch outputs ``levels * emb_dim``.
        data_features: ``"fourier"``: the states' numbers are Fourier-embedded like the times (official
            low-dimensional networks); ``"raw"``: the flattened states enter the MLP as they are (images).
    """

    data_dim: int
    levels: int = 1
    hidden: int = 64
    n_layers: int = 2
    emb_dim: int = 64
    data_features: DataFeatures = "fourier"

    def __post_init__(self) -> None:
        for name, low in (("data_dim", 1), ("levels", 1), ("hidden", 1), ("n_layers", 2), ("emb_dim", 4)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"FourierVelocityConfig.{name} must be an int >= {low}, got {value!r}")
        if self.emb_dim % 2:
            raise ValueError(f"FourierVelocityConfig.emb_dim must be even, got {self.emb_dim}")
        if self.data_features not in ("fourier", "raw"):
            raise ValueError(
                f"FourierVelocityConfig.data_features must be 'fourier' or 'raw', got {self.data_features!r}"
            )

    @property
    def widths(self) -> list[int]:
        """Input width of the MLP, its hidden widths, and the output width."""
        data_out = self.levels * (self.emb_dim if self.data_features == "fourier" else self.data_dim)
        return [
            self.levels * self.emb_dim + data_out,
            2 * self.hidden,
            *[self.hidden] * (self.n_layers - 1),
            self.data_dim,
        ]

    @property
    def n_parameters(self) -> int:
        """Exact parameter count (weights and biases) of the network this config builds."""
        d, e = self.levels, self.emb_dim
        count = _embedding_parameters(d, e, d * e)
        if self.data_features == "fourier":
            count += _embedding_parameters(d * self.data_dim, e, d * e)
        w = self.widths
        return count + sum((a + 1) * b for a, b in zip(w[:-1], w[1:]))


def match_width(cfg: FourierVelocityConfig, target: int) -> FourierVelocityConfig:
    """``cfg`` with the hidden width whose parameter count is closest to ``target`` (ties: narrower).
    The count increases with the width, so a bisection finds the crossing."""
    if target < 1:
        raise ValueError(f"target parameter count must be >= 1, got {target}")
    lo, hi = 1, 2
    while replace(cfg, hidden=hi).n_parameters < target:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if replace(cfg, hidden=mid).n_parameters < target else (lo, mid)
    return min((replace(cfg, hidden=h) for h in (lo, hi)), key=lambda c: (abs(c.n_parameters - target), c.hidden))
