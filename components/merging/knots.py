"""KnOTS (Stoica et al., ICLR 2025, arXiv 2410.19735): merge LoRA updates in a jointly aligned basis.

Per adapted linear layer with n task updates dW_t = s * B_t A_t (B_t: [O, r_t], A_t: [r_t, I],
s = the LoRA scale alpha/r, passed as ``scale``; the KnOTS code omits it, harmless there because
alpha = r):

    M = [dW_1 | ... | dW_n]  (O x nI)  =  U S V^T      (thin SVD in float64, S_m <= tol dropped)
    V^T = [V_1^T | ... | V_n^T],   R_t = S V_t^T  (k x I),   so dW_t = U R_t exactly.

The R_t of all layers are flattened into one vector per task, merged with a task-vector merger from
``MERGERS`` (TA / TIES / DARE-TIES, with a *global* top-K across layers), unflattened to R_merged and
mapped back: dW_merged = U R_merged; the model is then W0 + dW_merged.

Because every task shares U and the map R -> U R is linear, KnOTS-TA equals TA exactly; only
non-linear mergers (TIES, DARE) can change results.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from components.merging.task_vectors import MergeConfig, get_merger, sign_conflict_rate

SINGULAR_VALUE_TOL = 1e-5  # absolute threshold of the KnOTS code
ALIGN_METHODS = ("auto", "factored", "full")

Factors = Sequence[Tensor]  # one task's (B [O, r], A [r, I]) pair


def _unpack_factors(factors: Sequence[Factors], where: str = "") -> list[tuple[Tensor, Tensor]]:
    if len(factors) == 0:
        raise ValueError(f"{where}need at least one task's (B, A) factors")
    pairs = []
    for t, pair in enumerate(factors):
        if len(pair) != 2:
            raise ValueError(
                f"{where}task {t}: expected a (B, A) pair, got {len(pair)} items; fold the LoRA scale "
                "into the `scale` argument (see components.models.lora.group_factors_by_layer)"
            )
        b, a = pair
        if b.dim() != 2 or a.dim() != 2 or b.shape[1] != a.shape[0]:
            raise ValueError(f"{where}task {t}: B {tuple(b.shape)} and A {tuple(a.shape)} are not [O, r] and [r, I]")
        pairs.append((b, a))
    out_dim, in_dim = pairs[0][0].shape[0], pairs[0][1].shape[1]
    for t, (b, a) in enumerate(pairs):
        if b.shape[0] != out_dim or a.shape[1] != in_dim:
            raise ValueError(f"{where}task {t}: update is {b.shape[0]}x{a.shape[1]}, task 0's is {out_dim}x{in_dim}")
    return pairs


def _split_rows(s: Tensor, vh: Tensor, n: int, in_dim: int) -> Tensor:
    """R_t = S V_t^T for the n column blocks of V^T [k, n*I] -> [n, k, I]."""
    return (s[:, None] * vh).reshape(vh.shape[0], n, in_dim).permute(1, 0, 2).contiguous()


def _align_full(pairs: list[tuple[Tensor, Tensor]], tol: float) -> tuple[Tensor, Tensor]:
    m = torch.cat([b @ a for b, a in pairs], dim=1)
    u, s, vh = torch.linalg.svd(m, full_matrices=False)
    keep = s > tol
    return u[:, keep], _split_rows(s[keep], vh[keep], len(pairs), pairs[0][1].shape[1])


def _align_factored(pairs: list[tuple[Tensor, Tensor]], tol: float) -> tuple[Tensor, Tensor]:
    # M = Bcat · blockdiag(A_t) with Bcat = Q_b R_b and A_t^T = Q_t R_t, so
    # M = Q_b [R_b blockdiag(R_t^T)] blockdiag(Q_t)^T.
    # The SVD of the small core (<= nr x nr) gives M's SVD without forming the O x nI matrix.
    q_b, r_b = torch.linalg.qr(torch.cat([b for b, _ in pairs], dim=1), mode="reduced")
    qr_a = [torch.linalg.qr(a.T, mode="reduced") for _, a in pairs]
    core = r_b @ torch.block_diag(*[r_t.T for _, r_t in qr_a])
    u_core, s, vh_core = torch.linalg.svd(core, full_matrices=False)
    keep = s > tol
    u_core, s, vh_core = u_core[:, keep], s[keep], vh_core[keep]
    blocks, start = [], 0
    for q_t, _ in qr_a:
        width = q_t.shape[1]
        blocks.append(s[:, None] * (vh_core[:, start : start + width] @ q_t.T))
        start += width
    return q_b @ u_core, torch.stack(blocks)


def choose_align_method(factors: Sequence[Factors]) -> str:
    """ "factored" when the summed LoRA rank is below min(O, nI) (the O x nI matrix is never formed),
    else "full" (the factors are no smaller than the matrix)."""
    pairs = _unpack_factors(factors)
    total_rank = sum(b.shape[1] for b, _ in pairs)
    out_dim, in_dim = pairs[0][0].shape[0], pairs[0][1].shape[1]
    return "factored" if total_rank < min(out_dim, len(pairs) * in_dim) else "full"


def knots_align(
    factors: Sequence[Factors], method: str = "auto", tol: float = SINGULAR_VALUE_TOL
) -> tuple[Tensor, Tensor]:
    """Jointly align one layer's n task updates dW_t = B_t A_t into a shared basis.

    factors: n pairs (B_t [O, r_t], A_t [r_t, I]). Returns, in float64,
      U [O, k] with orthonormal columns and R [n, k, I] with dW_t = U @ R[t],
    where U S V^T is the thin SVD of M = [dW_1 | ... | dW_n] with singular values <= ``tol`` dropped
    (k = their count) and R_t = S V_t^T.
    method="auto" (default) picks "factored" where it is cheaper (:func:`choose_align_method`).
    method="full" forms M (O x nI) and takes its SVD. method="factored" (cheaper when
    sum_t r_t << min(O, nI)) takes QRs of Bcat = [B_1 ... B_n] (O x nr) and of each A_t^T (I x r_t),
    then the SVD of the nr x nr core R_b blockdiag(R_At^T); both give the same U R_t and S (singular
    vectors only up to sign/rotation within repeated singular values).
    """
    if method not in ALIGN_METHODS:
        raise ValueError(f"knots_align method must be one of {ALIGN_METHODS}, got {method!r}")
    if method == "auto":
        method = choose_align_method(factors)
    pairs = [(b.detach().to(torch.float64), a.detach().to(torch.float64)) for b, a in _unpack_factors(factors)]
    return (_align_factored if method == "factored" else _align_full)(pairs, tol)


@dataclass(frozen=True)
class _LayerSlot:
    name: str
    start: int
    stop: int
    shape: tuple[int, int]  # shape of this layer's per-task block (k x I, or O x I)
    basis: Tensor | None  # U [O, k] in the aligned space; None in the original space
    dtype: torch.dtype  # dtype of the returned dW


@dataclass(frozen=True, eq=False)
class TaskVectorSpace:
    """n task vectors over all layers (float64 [n, D]) and the map from a merged vector back to dW.

    Build it once with ``knots_space`` (aligned) or ``original_space`` and merge it many times, e.g. over
    a lambda / top-K grid: the SVDs are the expensive part.
    """

    vectors: Tensor
    slots: tuple[_LayerSlot, ...]

    @property
    def layer_names(self) -> list[str]:
        return [slot.name for slot in self.slots]

    def to_deltas(self, merged: Tensor) -> dict[str, Tensor]:
        """merged [D] -> {layer: dW [O, I]}: U R_merged in the aligned space, the block itself otherwise."""
        if merged.shape != self.vectors.shape[1:]:
            raise ValueError(f"merged vector has shape {tuple(merged.shape)}, expected {tuple(self.vectors.shape[1:])}")
        merged = merged.to(torch.float64)
        deltas = {}
        for slot in self.slots:
            block = merged[slot.start : slot.stop].reshape(slot.shape)
            dw = block if slot.basis is None else slot.basis @ block
            deltas[slot.name] = dw.to(slot.dtype)
        return deltas

    def merge(self, method: str, cfg: MergeConfig, generator: torch.Generator | None = None) -> dict[str, Tensor]:
        """Merge the task vectors with ``MERGERS[method]`` and map back: {layer: dW_merged [O, I]}."""
        return self.to_deltas(get_merger(method)(self.vectors, cfg, generator))


def _build_space(blocks: Mapping[str, tuple[Tensor, Tensor | None, torch.dtype]]) -> TaskVectorSpace:
    """blocks: name -> (per-task blocks [n, a, b], basis or None, output dtype)."""
    if not blocks:
        raise ValueError("no layers to merge")
    n_tasks = {name: stacked.shape[0] for name, (stacked, _, _) in blocks.items()}
    if len(set(n_tasks.values())) != 1:
        raise ValueError(f"every layer needs the same number of tasks, got {n_tasks}")
    flat, slots, start = [], [], 0
    for name, (stacked, basis, dtype) in blocks.items():
        size = stacked[0].numel()
        flat.append(stacked.reshape(stacked.shape[0], size))
        slots.append(_LayerSlot(name, start, start + size, tuple(stacked.shape[1:]), basis, dtype))
        start += size
    return TaskVectorSpace(torch.cat(flat, dim=1), tuple(slots))


def _out_dtype(pairs: list[tuple[Tensor, Tensor]]) -> torch.dtype:
    return torch.promote_types(pairs[0][0].dtype, pairs[0][1].dtype)


def knots_space(
    layer_factors: Mapping[str, Sequence[Factors]],
    scale: float = 1.0,
    align_method: str = "auto",
    tol: float = SINGULAR_VALUE_TOL,
) -> TaskVectorSpace:
    """Aligned task vectors: per layer (U, R) = knots_align([(scale B_t, A_t)]), R_t flattened over layers.

    layer_factors: {layer: [(B_t [O, r], A_t [r, I]) for each task t]}, same task order in every layer.
    scale: LoRA scale alpha/r multiplied into every dW_t (the KnOTS code uses 1).
    """
    blocks = {}
    for name, factors in layer_factors.items():
        pairs = _unpack_factors(factors, where=f"layer {name!r}: ")
        basis, aligned = knots_align([(scale * b, a) for b, a in pairs], align_method, tol)
        blocks[name] = (aligned, basis, _out_dtype(pairs))
    return _build_space(blocks)


def original_space(layer_factors: Mapping[str, Sequence[Factors]], scale: float = 1.0) -> TaskVectorSpace:
    """Baseline task vectors in the original weight space: dW_t = scale B_t A_t flattened over layers."""
    blocks = {}
    for name, factors in layer_factors.items():
        pairs = _unpack_factors(factors, where=f"layer {name!r}: ")
        stacked = torch.stack([scale * (b.detach().to(torch.float64) @ a.detach().to(torch.float64)) for b, a in pairs])
        blocks[name] = (stacked, None, _out_dtype(pairs))
    return _build_space(blocks)


def knots_merge(
    layer_factors: Mapping[str, Sequence[Factors]],
    method: str,
    cfg: MergeConfig,
    *,
    scale: float = 1.0,
    generator: torch.Generator | None = None,
    align_method: str = "auto",
) -> dict[str, Tensor]:
    """KnOTS-<method>: align every layer, merge the flattened R_t globally, return {layer: U R_merged}.

    layer_factors: {layer: [(B_t [O, r], A_t [r, I])] * n}; method: a ``MERGERS`` key; scale: alpha/r.
    Returns dW_merged [O, I] per layer, in the factors' dtype.
    """
    return knots_space(layer_factors, scale, align_method).merge(method, cfg, generator)


def baseline_merge(
    layer_factors: Mapping[str, Sequence[Factors]],
    method: str,
    cfg: MergeConfig,
    *,
    scale: float = 1.0,
    generator: torch.Generator | None = None,
) -> dict[str, Tensor]:
    """<method> in the original space: merge flattened dW_t = scale B_t A_t, return {layer: dW_merged}."""
    return original_space(layer_factors, scale).merge(method, cfg, generator)


def _top_singular_vectors(mat: Tensor, rank: int, side: str) -> Tensor:
    u, _, vh = torch.linalg.svd(mat.detach().to(torch.float64), full_matrices=False)
    return u[:, :rank] if side == "left" else vh[:rank].T


def subspace_alignment(mats: Sequence[Tensor], rank: int, side: str = "left") -> float:
    """Mean pairwise overlap of the tasks' top-``rank`` singular subspaces, in [0, 1].

    mats: n >= 2 matrices of one shape [a, b]. With P_t the top-``rank`` left (side="left") or right
    (side="right") singular vectors of mats[t]:  score = mean_{s<t} ||P_s^T P_t||_F^2 / rank.
    1 means identical subspaces, about rank/a (left) for random ones.
    Note: the score is invariant to a shared orthonormal change of basis, so the KnOTS R_t = U^T dW_t
    give the same value as the dW_t; to see what alignment changes for TIES, compare
    ``sign_conflict_rate`` of ``original_space(...).vectors`` and ``knots_space(...).vectors``.
    """
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    if len(mats) < 2:
        raise ValueError("subspace_alignment needs at least two matrices")
    shape = tuple(mats[0].shape)
    if any(tuple(m.shape) != shape or m.dim() != 2 for m in mats):
        raise ValueError(f"all matrices must be 2-D with one shape, got {[tuple(m.shape) for m in mats]}")
    if not 1 <= rank <= min(shape):
        raise ValueError(f"rank must be in [1, {min(shape)}] for {shape} matrices, got {rank}")
    bases = [_top_singular_vectors(m, rank, side) for m in mats]
    scores = [
        float((bases[s].T @ bases[t]).square().sum()) / rank
        for s in range(len(bases))
        for t in range(s + 1, len(bases))
    ]
    return sum(scores) / len(scores)


def alignment_diagnostics(
    original: TaskVectorSpace,
    aligned: TaskVectorSpace,
    layer_factors: Mapping[str, Sequence[Factors]],
    scale: float = 1.0,
    top_k: float = 20.0,
) -> dict[str, float]:
    """What alignment changes, measured on real LoRAs (``original``/``aligned`` built from ``layer_factors``):

    * ``knots_ta_minus_ta_max_abs``: max |dW(KnOTS-TA) - dW(TA)| at lambda = 0.7 (0 up to rounding: TA is
      linear and dW_t = U R_t), beside ``delta_max_abs``, the largest |dW(TA)|;
    * ``sign_conflict_original`` / ``sign_conflict_knots``: ``sign_conflict_rate`` at ``top_k`` % per space;
    * ``subspace_alignment``: the layer mean of :func:`subspace_alignment` at the LoRA rank (basis-invariant).
    """
    cfg = MergeConfig(lam=0.7, merge="sum")
    ta, kta = original.merge("ta", cfg), aligned.merge("ta", cfg)
    return {
        "knots_ta_minus_ta_max_abs": max(float((ta[k] - kta[k]).abs().max()) for k in ta),
        "delta_max_abs": max(float(ta[k].abs().max()) for k in ta),
        "sign_conflict_original": sign_conflict_rate(original.vectors, top_k),
        "sign_conflict_knots": sign_conflict_rate(aligned.vectors, top_k),
        "subspace_alignment": sum(
            subspace_alignment([scale * b @ a for b, a in pairs], rank=pairs[0][1].shape[0])
            for pairs in layer_factors.values()
        )
        / len(layer_factors),
    }
