"""Optimal transport: exact assignment, log-domain Sinkhorn, and NSOT superset pairing."""

from components.ot.assignment import batched_exact_assignment, exact_assignment, pair_cost, squared_distances
from components.ot.sinkhorn import SinkhornResult, entropic_assignment, round_plan_to_permutation, sinkhorn_log
from components.ot.superset import (
    ASSIGNMENT_SOLVERS,
    hybrid_coupling,
    precompute_superset_ot,
    subsample_pairs,
    superset_pairs,
)

__all__ = [
    "ASSIGNMENT_SOLVERS",
    "SinkhornResult",
    "batched_exact_assignment",
    "entropic_assignment",
    "exact_assignment",
    "hybrid_coupling",
    "pair_cost",
    "precompute_superset_ot",
    "round_plan_to_permutation",
    "sinkhorn_log",
    "squared_distances",
    "subsample_pairs",
    "superset_pairs",
]
