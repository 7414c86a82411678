"""ASIF: relative representations of each modality against a set of anchor pairs (no training).

With anchors (A_i, B_i), i = 1..N, every vector is first centred by its view's anchor mean and unit-normalised.
An image a becomes r(a) in R^N with r_i = cos(a, A_i); a text b becomes r(b) with r_i = cos(b, B_i). Each
relative vector is sparsified to its ``k`` largest entries (the others set to 0; negatives clipped to 0),
raised to the power ``p`` and unit-normalised; the similarity of a and b is r(a) . r(b).
Images and texts are thus compared through how similar they are to the same anchor pairs. numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _unit(z: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(z, axis=1, keepdims=True)
    return z / np.where(norms > 0, norms, 1.0)


@dataclass(frozen=True)
class Asif:
    """Anchors [N, d1] and [N, d2] (stored centred and unit-normalised) with their means; ``k``, ``p``."""

    anchors_a: np.ndarray
    anchors_b: np.ndarray
    mean_a: np.ndarray
    mean_b: np.ndarray
    k: int
    p: float

    def _relative(self, x: np.ndarray, anchors: np.ndarray, mean: np.ndarray) -> np.ndarray:
        r = _unit(np.asarray(x, dtype=np.float64) - mean) @ anchors.T  # [n, N] cosines
        k = min(self.k, r.shape[1])
        if k < r.shape[1]:
            cut = np.partition(r, -k, axis=1)[:, -k][:, None]  # the k-th largest per row
            r = np.where(r >= cut, r, 0.0)
        return _unit(np.clip(r, 0.0, None) ** self.p)

    def embed_a(self, a: np.ndarray) -> np.ndarray:
        """Relative representation [n, N] of view-A rows."""
        return self._relative(a, self.anchors_a, self.mean_a)

    def embed_b(self, b: np.ndarray) -> np.ndarray:
        """Relative representation [n, N] of view-B rows."""
        return self._relative(b, self.anchors_b, self.mean_b)


def fit_asif(a: np.ndarray, b: np.ndarray, *, k: int = 800, p: float = 8.0) -> Asif:
    """ASIF with the pairs (a[i], b[i]) as anchors; ``k`` >= 1 kept entries, power ``p`` > 0."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or len(a) != len(b) or len(a) < 1:
        raise ValueError(f"ASIF needs row-aligned [N, d1] and [N, d2] anchors, got {a.shape} and {b.shape}")
    if k < 1 or p <= 0:
        raise ValueError(f"ASIF needs k >= 1 and p > 0, got k={k}, p={p}")
    mean_a, mean_b = a.mean(0), b.mean(0)
    return Asif(anchors_a=_unit(a - mean_a), anchors_b=_unit(b - mean_b), mean_a=mean_a, mean_b=mean_b, k=k, p=p)
