"""Topological masks ``M_alpha(G) = sum_k alpha_k W^k`` and their graph-random-feature (GRF) estimates.

Modulation. The mask is learned through ``f = (f_0 .. f_K)``; ``alpha = f * f`` (discrete self-convolution,
length ``2K + 1``), so ``M_alpha = (sum_k f_k W^k)^2`` for a symmetric ``W`` (nonnegative when ``f >= 0`` and
``W >= 0``).

GRFs. For every node ``i`` run ``n`` random walks: a walk starts at ``i`` with load 1 and adds ``f_0`` to
``phi_i[i]``; at each step it halts with probability ``p_h``, else moves to a uniform neighbour ``u`` of its node
``v``, multiplies its load by ``W[v, u] deg(v) / (1 - p_h)`` and adds ``f_k * load`` to ``phi_i[u]`` (``k`` its
step count; walks stop at ``k = K``). Dividing by ``n``, ``E[phi_i] = sum_k f_k W^k[i, :]``, and for independent
walks ``E[phi_i^T phi'_j] = M_alpha[i, j]``. The walks of all ``N n`` starts are advanced together (one tensor
operation per step, ``K`` steps), and the features are kept as per-step loads ``L[(i, u), k]`` so that the values
``L f`` stay differentiable in ``f`` while the walks are sampled once.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from components.attention.graphs import Graph

__all__ = ["GrfFeatures", "exact_mask", "modulation_alpha", "sample_grf"]


def modulation_alpha(f: Tensor) -> Tensor:
    """``alpha = f * f``: [K + 1] -> [2K + 1], ``alpha_k = sum_{a + b = k} f_a f_b``."""
    k = f.shape[-1]
    outer = f[:, None] * f[None, :]
    idx = (torch.arange(k)[:, None] + torch.arange(k)[None, :]).reshape(-1)
    return torch.zeros(2 * k - 1, dtype=f.dtype).index_add(0, idx, outer.reshape(-1))


def exact_mask(graph: Graph, f: Tensor) -> Tensor:
    """The dense mask ``sum_k alpha_k W^k`` [N, N] (Horner's rule with the sparse ``W``: O(K E N) time, O(N^2)
    memory), differentiable in ``f``."""
    alpha = modulation_alpha(f)
    w = graph.sparse_w().to(f.dtype)
    mask = torch.diag_embed(alpha[-1].expand(graph.n))
    for a in alpha.flip(0)[1:]:
        mask = torch.sparse.mm(w, mask)
        if torch.is_grad_enabled() and a.requires_grad:
            mask = mask + torch.diag_embed(a.expand(graph.n))
        else:                                   # in place: no second N x N matrix
            mask.diagonal().add_(a)
    return mask


@dataclass(frozen=True)
class GrfFeatures:
    """Sampled graph random features of all nodes, before modulation.

    Attributes:
        rows, cols: [U] int64 the (start node, visited node) pairs with a non-zero feature, sorted row-major.
        loads: [U, K + 1] the summed walk loads per step count, already divided by the number of walks.
        n: number of nodes.
    """

    rows: Tensor
    cols: Tensor
    loads: Tensor
    n: int

    @property
    def nnz(self) -> int:
        return int(self.rows.numel())

    def values(self, f: Tensor) -> Tensor:
        """``phi_i[u] = sum_k f_k L[(i, u), k]`` for every stored pair: [U]."""
        return self.loads.to(f.dtype) @ f

    def matrix(self, f: Tensor) -> Tensor:
        """``Phi`` as a coalesced sparse COO tensor [N, N] (row i = node i's feature vector)."""
        return torch.sparse_coo_tensor(torch.stack([self.rows, self.cols]), self.values(f), (self.n, self.n),
                                       is_coalesced=True, check_invariants=False)

    def dense(self, f: Tensor) -> Tensor:
        return self.matrix(f).to_dense()


def sample_grf(graph: Graph, n_walks: int, p_halt: float, k_max: int,
               generator: torch.Generator | None = None) -> GrfFeatures:
    """Run ``n_walks`` halting random walks of at most ``k_max`` steps from every node, all at once.

    Cost: O(N n_walks k_max) time and memory; the result holds at most ``N (1 + n_walks k_max)`` pairs.
    """
    if not 0.0 < p_halt < 1.0:
        raise ValueError(f"p_halt must be in (0, 1), got {p_halt}")
    if n_walks < 1 or k_max < 0:
        raise ValueError(f"need n_walks >= 1 and k_max >= 0, got {n_walks}, {k_max}")
    n = graph.n
    start = torch.arange(n).repeat_interleave(n_walks)
    cur, load = start.clone(), torch.ones(start.shape[0])
    alive = torch.ones(start.shape[0], dtype=torch.bool)
    deg = graph.degree.to(load.dtype)
    rows, cols, steps, vals = [torch.arange(n)], [torch.arange(n)], [torch.zeros(n, dtype=torch.long)], \
        [torch.full((n,), float(n_walks))]
    for k in range(1, k_max + 1):
        alive &= torch.rand(start.shape[0], generator=generator) >= p_halt
        d = deg[cur]
        alive &= d > 0
        pick = (torch.rand(start.shape[0], generator=generator) * d).long().clamp_max((d - 1).clamp_min(0).long())
        edge = (graph.indptr[cur] + pick).clamp_max(max(graph.indices.numel() - 1, 0))
        if graph.indices.numel() == 0:
            break
        load = load * graph.weights[edge] * d / (1.0 - p_halt)
        cur = torch.where(alive, graph.indices[edge], cur)
        rows.append(start[alive]), cols.append(cur[alive])
        steps.append(torch.full((int(alive.sum()),), k, dtype=torch.long)), vals.append(load[alive])
        if not bool(alive.any()):
            break
    r, c, s, v = torch.cat(rows), torch.cat(cols), torch.cat(steps), torch.cat(vals)
    key, inverse = torch.unique(r * n + c, return_inverse=True)
    loads = torch.zeros(key.shape[0] * (k_max + 1)).index_add_(0, inverse * (k_max + 1) + s, v / n_walks)
    return GrfFeatures(key // n, key % n, loads.view(-1, k_max + 1), n)
