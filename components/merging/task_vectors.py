"""Task-vector merging: Task Arithmetic, TIES and DARE-TIES on flattened task vectors.

All mergers share one signature and live in the registry ``MERGERS``::

    merge(task_vectors: Tensor[n_tasks, D], cfg: MergeConfig, generator=None) -> Tensor[D]

Notation: tau_t in R^D is the task vector of task t (all layers flattened into one vector, so the
top-K trim below is *global* across layers, as in the KnOTS code), lambda = ``cfg.lam``.

* Task Arithmetic (``"ta"``):  tau = lambda * sum_t tau_t.
* TIES (``"ties"``, Yadav et al. 2023, ``sign_resolve_mode=sum_of_values`` as in KnOTS):
    1. trim:   keep, per task, the entries whose magnitude is among the top-K% of that task vector
               (K = ``cfg.top_k``, a percentage in (0, 100]); the rest become 0;
    2. elect:  gamma_d = sign(sum_t trimmed_t[d]); where that sum is exactly 0 the coordinate takes
               the majority sign sign(sum_d gamma_d), and +1 if that is 0 too;
    3. select: keep trimmed_t[d] only where sign(trimmed_t[d]) == gamma_d;
    4. disjoint merge: ``merge="mean"`` averages the kept entries over the tasks that keep a non-zero
               value at d (0 where none does); ``merge="sum"`` sums them;
    5. scale:  tau = lambda * merged.
* DARE-TIES (``"dare_ties"``, Yu et al. 2024): per task, drop each entry with probability p
  (``cfg.dare_p``) and rescale the survivors by 1/(1-p), so E[dropped_t] = tau_t; then TIES.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

MERGE_MODES = ("sum", "mean")


@dataclass(frozen=True)
class MergeConfig:
    """Hyperparameters shared by every merger in ``MERGERS``.

    lam:    lambda, the single scaling coefficient applied to the merged vector (shared by all tasks).
    top_k:  percentage of entries kept per task by the TIES trim, in (0, 100]; 100 keeps all.
            (The KnOTS code also accepts fractions <= 1; here it is always a percentage.)
    dare_p: DARE drop probability in [0, 1); only ``"dare_ties"`` reads it.
    merge:  disjoint aggregation of TIES/DARE-TIES, ``"mean"`` (over non-zero entries) or ``"sum"``.
            Task Arithmetic always sums and ignores ``top_k``, ``dare_p`` and ``merge``.
    """

    lam: float = 1.0
    top_k: float = 100.0
    dare_p: float = 0.0
    merge: str = "mean"

    def __post_init__(self) -> None:
        if not 0.0 < self.top_k <= 100.0:
            raise ValueError(f"MergeConfig.top_k is a percentage in (0, 100], got {self.top_k}")
        if not 0.0 <= self.dare_p < 1.0:
            raise ValueError(f"MergeConfig.dare_p must be in [0, 1), got {self.dare_p}")
        if self.merge not in MERGE_MODES:
            raise ValueError(f"MergeConfig.merge must be one of {MERGE_MODES}, got {self.merge!r}")


# Defaults from the KnOTS paper/code for ViT-B/32 r16 (brief section a); the pipeline grid-searches
# lambda (and top_k) on validation anyway. DARE's p is not given in the brief, so it has no entry.
PAPER_DEFAULTS: dict[str, MergeConfig] = {
    "ta": MergeConfig(lam=0.1, merge="sum"),
    "ties": MergeConfig(lam=0.3, top_k=30.0, merge="mean"),
    "knots_ties": MergeConfig(lam=0.6, top_k=20.0, merge="mean"),
}


def _check_task_vectors(task_vectors: Tensor) -> None:
    if task_vectors.dim() != 2:
        raise ValueError(f"task_vectors must be [n_tasks, D], got shape {tuple(task_vectors.shape)}")
    if not task_vectors.is_floating_point():
        raise ValueError(f"task_vectors must be floating point, got {task_vectors.dtype}")


def trim_top_k(task_vectors: Tensor, top_k: float) -> Tensor:
    """TIES step 1. Keep, per row, the entries with |x| >= the n_keep-th largest |x| of that row.

    task_vectors: [n, D]; n_keep = max(1, floor(D * top_k / 100)). Entries tied with the threshold
    are all kept. (The KnOTS code thresholds at the (n_keep+1)-th largest value, an off-by-one we do
    not copy.) Returns a new [n, D] tensor with the other entries set to 0.
    """
    _check_task_vectors(task_vectors)
    if top_k >= 100.0:
        return task_vectors.clone()
    d = task_vectors.shape[1]
    n_keep = max(1, math.floor(d * top_k / 100.0 + 1e-9))
    magnitude = task_vectors.abs()
    threshold = magnitude.topk(n_keep, dim=1).values[:, -1:]
    return task_vectors * (magnitude >= threshold)


def elect_sign(trimmed: Tensor) -> Tensor:
    """TIES step 2 (sum_of_values). gamma = sign(sum_t trimmed_t), zeros resolved to the majority.

    trimmed: [n, D] -> gamma: [D] with values in {-1, +1}. A coordinate whose sum is exactly 0 gets
    sign(sum_d gamma_d) (the majority over coordinates), or +1 when that is 0 as well.
    """
    sign = torch.sign(trimmed.sum(dim=0))
    majority = torch.sign(sign.sum())
    if majority == 0:
        majority = torch.ones((), dtype=sign.dtype, device=sign.device)
    return torch.where(sign == 0, majority, sign)


def disjoint_merge(trimmed: Tensor, sign: Tensor, merge: str) -> Tensor:
    """TIES steps 3-4. Keep entries agreeing with ``sign`` and aggregate them over tasks.

    trimmed: [n, D], sign: [D] in {-1, +1}. merge="mean": sum_t kept_t[d] / max(1, #{t: kept_t[d] != 0});
    merge="sum": sum_t kept_t[d]. Returns [D].
    """
    if merge not in MERGE_MODES:
        raise ValueError(f"merge must be one of {MERGE_MODES}, got {merge!r}")
    agrees = torch.where(sign.unsqueeze(0) > 0, trimmed > 0, trimmed < 0)
    kept = trimmed * agrees
    total = kept.sum(dim=0)
    if merge == "sum":
        return total
    count = (kept != 0).sum(dim=0).clamp(min=1)
    return total / count


def dare_drop(task_vectors: Tensor, p: float, generator: torch.Generator | None) -> Tensor:
    """DARE. Drop each entry independently with probability p, rescale survivors by 1/(1-p).

    task_vectors: [n, D] -> [n, D], unbiased: E[out] = task_vectors. p = 0 returns a copy and draws
    nothing; p > 0 needs an explicit ``generator`` so that results are reproducible.
    """
    _check_task_vectors(task_vectors)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"DARE drop probability must be in [0, 1), got {p}")
    if p == 0.0:
        return task_vectors.clone()
    if generator is None:
        raise ValueError("dare_drop with p > 0 needs an explicit torch.Generator (seeded)")
    u = torch.rand(task_vectors.shape, generator=generator, dtype=task_vectors.dtype, device=task_vectors.device)
    return task_vectors * (u >= p) / (1.0 - p)


def task_arithmetic(task_vectors: Tensor, cfg: MergeConfig, generator: torch.Generator | None = None) -> Tensor:
    """Task Arithmetic: lambda * sum_t tau_t. [n, D] -> [D]. Ignores top_k, dare_p and merge."""
    _check_task_vectors(task_vectors)
    return cfg.lam * task_vectors.sum(dim=0)


def ties(task_vectors: Tensor, cfg: MergeConfig, generator: torch.Generator | None = None) -> Tensor:
    """TIES: lambda * disjoint_merge(trim_top_k(tau), elect_sign(...)). [n, D] -> [D]."""
    trimmed = trim_top_k(task_vectors, cfg.top_k)
    return cfg.lam * disjoint_merge(trimmed, elect_sign(trimmed), cfg.merge)


def dare_ties(task_vectors: Tensor, cfg: MergeConfig, generator: torch.Generator | None = None) -> Tensor:
    """DARE-TIES: TIES applied to dare_drop(tau, cfg.dare_p). [n, D] -> [D]; equals TIES at p = 0."""
    return ties(dare_drop(task_vectors, cfg.dare_p, generator), cfg)


Merger = Callable[[Tensor, MergeConfig, torch.Generator | None], Tensor]

MERGERS: dict[str, Merger] = {"ta": task_arithmetic, "ties": ties, "dare_ties": dare_ties}


def get_merger(method: str) -> Merger:
    """Look up ``method`` in ``MERGERS`` with an error that lists the known names."""
    try:
        return MERGERS[method]
    except KeyError:
        raise ValueError(f"unknown merge method {method!r}; known: {sorted(MERGERS)}") from None


def sign_conflict_rate(task_vectors: Tensor, top_k: float = 100.0) -> float:
    """Interference score in the coordinates where merging happens.

    After ``trim_top_k``, among coordinates kept (non-zero) by at least two tasks, the fraction where
    the kept values do not all share one sign. In [0, 1]; 0 when no coordinate is shared. Unlike a
    subspace score, this depends on the basis, so it differs between the original and KnOTS spaces.
    """
    trimmed = trim_top_k(task_vectors, top_k)
    positive = (trimmed > 0).sum(dim=0)
    negative = (trimmed < 0).sum(dim=0)
    shared = (positive + negative) >= 2
    n_shared = int(shared.sum())
    if n_shared == 0:
        return 0.0
    conflict = shared & (positive > 0) & (negative > 0)
    return float(conflict.sum()) / n_shared
