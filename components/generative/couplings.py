"""Couplings of a batch of noise x0 with a batch of data x1 for flow-matching training.

Every coupling has the signature ``(x0, x1, generator) -> (x0', x1')`` and returns a re-pairing of
the same samples. Precomputed NSOT pairs come from :func:`components.ot.subsample_pairs`
(already paired; use "independent" after it) and the hybrid blend from
:func:`components.ot.hybrid_coupling`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from components.ot import batched_exact_assignment, exact_assignment, squared_distances

__all__ = ["Coupling", "COUPLINGS", "couple"]

Coupling = Callable[[Tensor, Tensor, torch.Generator | None], tuple[Tensor, Tensor]]


def independent_coupling(x0: Tensor, x1: Tensor, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """Keep the pairing as drawn: (x0, x1) independent, the plain flow-matching coupling."""
    return x0, x1


def minibatch_ot_coupling(x0: Tensor, x1: Tensor, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """Mini-batch OT (Tong et al. 2023; Pooladian et al. 2023): exact assignment over whole samples.

    ``perm = argmin_perm sum_b ||flatten(x0[b]) - flatten(x1[perm[b]])||^2``; returns ``(x0, x1[perm])``.

    Args:
        x0, x1: ``[B, ...]``.
    """
    perm = exact_assignment(squared_distances(x0.detach().flatten(1), x1.detach().flatten(1)))
    return x0, x1[perm]


def pointwise_ot_coupling(x0: Tensor, x1: Tensor, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """Equivariant (per-sample) OT for point sets: within each sample, permute the data points.

    For each b: ``perm_b = argmin_perm sum_i ||x0[b, i] - x1[b, perm[i]]||^2`` (Hungarian, O(N^3)).

    Args:
        x0, x1: ``[B, N, D]``.

    Returns:
        ``(x0, x1')`` with ``x1'[b, i] = x1[b, perm_b[i]]``.
    """
    perm = batched_exact_assignment(x0, x1)
    return x0, x1.gather(1, perm[..., None].expand_as(x1))


#: name -> coupling with signature ``(x0, x1, generator) -> (x0, x1)``.
COUPLINGS: dict[str, Coupling] = {
    "independent": independent_coupling,
    "minibatch_ot": minibatch_ot_coupling,
    "pointwise_ot": pointwise_ot_coupling,
}


def couple(name: str, x0: Tensor, x1: Tensor, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """Apply the coupling registered as ``name`` (a clear error for unknown names)."""
    try:
        fn = COUPLINGS[name]
    except KeyError:
        raise ValueError(f"unknown coupling {name!r}; expected one of {sorted(COUPLINGS)}") from None
    return fn(x0, x1, generator)
