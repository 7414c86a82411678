"""Attention variants with one signature, ``attend(q, k, v, mask, features) -> out`` (q, k, v, out: [B, H, N, d]).

* ``softmax``: ``softmax(q k^T / sqrt(d)) v`` (no mask).
* ``linear``: ``out_i = phi(q_i)^T S / phi(q_i)^T z`` with ``S = sum_j phi(k_j) v_j^T``, ``z = sum_j phi(k_j)``:
  O(N m d).
* ``exact_mask``: ``out_i = sum_j M_ij phi(q_i)^T phi(k_j) v_j / sum_j M_ij phi(q_i)^T phi(k_j)`` with a dense
  mask ``M`` [N, N]: O(N^2 m d) time, O(N^2) memory.
* ``grf_mask``: the same with ``M ~= Phi_q Phi_k^T`` (two independent sets of graph random features, sparse
  [N, N] with O(N) non-zeros): ``out = phi(Q) . (Phi_q (Phi_k^T (phi(K) (x) [V, 1])))``, two sparse products
  of O(nnz m d) each, never forming an N x N matrix. Dense features (graphs of a few dozen nodes) go through
  the estimated mask instead.

Feature maps ``phi``: ``ReluFeatures`` (``relu(x / d^(1/4)) + eps``) and ``PerformerFeatures`` (positive random
features ``exp(w^T x - |x|^2 / 2) / sqrt(m)``, ``x = input / d^(1/4)``, with a stabilising shift that cancels
in the ratio: per query row for queries, one global constant for keys).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "ATTENTIONS",
    "GrfMask",
    "PerformerFeatures",
    "ReluFeatures",
    "exact_masked_linear_attention",
    "grf_masked_linear_attention",
    "linear_attention",
    "softmax_attention",
]


@dataclass(frozen=True)
class ReluFeatures:
    eps: float = 1e-6

    def query(self, x: Tensor) -> Tensor:
        return F.relu(x / x.shape[-1] ** 0.25) + self.eps

    def key(self, x: Tensor) -> Tensor:
        return self.query(x)


@dataclass(frozen=True)
class PerformerFeatures:
    """Positive random features; ``projection`` [d, m] of i.i.d. standard normals."""

    projection: Tensor

    def _map(self, x: Tensor, dims: tuple[int, ...] | None) -> Tensor:
        x = x / x.shape[-1] ** 0.25
        logits = x @ self.projection.to(x.dtype) - 0.5 * (x * x).sum(-1, keepdim=True)
        shift = logits.amax(dim=-1, keepdim=True) if dims is None else logits.amax(dim=dims, keepdim=True)
        return torch.exp(logits - shift.detach()) / math.sqrt(self.projection.shape[1]) + 1e-6

    def query(self, x: Tensor) -> Tensor:
        return self._map(x, None)

    def key(self, x: Tensor) -> Tensor:
        return self._map(x, tuple(range(-x.dim() + 1, 0)) if x.dim() > 1 else None)


Features = ReluFeatures | PerformerFeatures


@dataclass(frozen=True)
class GrfMask:
    """``M ~= phi_q @ phi_k^T``: two [N, N] feature matrices from independent walks, sparse (O(N) storage and
    time: the paper's algorithm), or dense for small graphs, [N, N] or one [n, n] block per sample [B, n, n]:
    these are applied through the estimate ``phi_q phi_k^T`` itself (O(n^3) to form, cheaper than the factorised
    products at a few dozen nodes; the same output)."""

    phi_q: Tensor
    phi_k: Tensor


def softmax_attention(q: Tensor, k: Tensor, v: Tensor, mask: object = None, features: Features | None = None) -> Tensor:
    return F.scaled_dot_product_attention(q, k, v)


def linear_attention(q: Tensor, k: Tensor, v: Tensor, mask: object = None, features: Features | None = None) -> Tensor:
    fm = features or ReluFeatures()
    fq, fk = fm.query(q), fm.key(k)
    s = torch.einsum("bhnm,bhnd->bhmd", fk, v)
    num = torch.einsum("bhnm,bhmd->bhnd", fq, s)
    den = torch.einsum("bhnm,bhm->bhn", fq, fk.sum(2))
    return num / den.unsqueeze(-1)


def exact_masked_linear_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, features: Features | None = None
) -> Tensor:
    if not isinstance(mask, Tensor) or mask.is_sparse:
        raise TypeError("exact_mask attention needs a dense [N, N] mask tensor")
    fm = features or ReluFeatures()
    scores = torch.einsum("bhim,bhjm->bhij", fm.query(q), fm.key(k)) * mask.to(q.dtype)
    return (scores @ v) / scores.sum(-1, keepdim=True)


def _mm(a: Tensor, x: Tensor) -> Tensor:
    return torch.sparse.mm(a, x) if a.is_sparse else a @ x


def grf_masked_linear_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: GrfMask | None = None, features: Features | None = None, chunk: int = 4
) -> Tensor:
    """The two sparse products run over ``chunk`` feature dimensions at a time (the sum over the feature
    dimension is accumulated), so no intermediate is larger than [N, B H chunk (d + 1)]."""
    if not isinstance(mask, GrfMask):
        raise TypeError("grf_mask attention needs a GrfMask")
    fm = features or ReluFeatures()
    if not mask.phi_q.is_sparse:  # small graphs: the estimate M = Phi_q Phi_k^T, [N, N] or [B, 1, n, n]
        estimate = mask.phi_q @ mask.phi_k.transpose(-1, -2)
        return exact_masked_linear_attention(q, k, v, estimate if estimate.dim() == 2 else estimate.unsqueeze(1), fm)
    b, h, n, d = v.shape
    fq, fk = fm.query(q), fm.key(k)
    m = fk.shape[-1]
    v1 = torch.cat([v, torch.ones_like(v[..., :1])], dim=-1)  # [B, H, N, d + 1]
    phi_k_t = mask.phi_k.t()
    out = None
    for lo in range(0, m, chunk):
        hi = min(lo + chunk, m)
        kv = fk[..., lo:hi].unsqueeze(-1) * v1.unsqueeze(-2)  # [B, H, N, c, d + 1]
        flat = kv.permute(2, 0, 1, 3, 4).reshape(n, -1)  # [N, B H c (d + 1)]
        s = _mm(phi_k_t, flat)  # S_u = sum_j Phi_k[j, u] kv_j
        r = _mm(mask.phi_q, s).view(n, b, h, hi - lo, d + 1).permute(1, 2, 0, 3, 4)
        part = torch.einsum("bhnm,bhnme->bhne", fq[..., lo:hi], r)
        out = part if out is None else out + part
    return out[..., :d] / out[..., d:]


Attend = Callable[..., Tensor]
ATTENTIONS: dict[str, Attend] = {
    "softmax": softmax_attention,
    "linear": linear_attention,
    "exact_mask": exact_masked_linear_attention,
    "grf_mask": grf_masked_linear_attention,
}
