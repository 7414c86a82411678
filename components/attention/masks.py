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

from components.attention.graphs import Graph, GraphBatch

__all__ = ["GrfFeatures", "exact_mask", "exact_masks", "modulation_alpha", "sample_grf"]


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
        else:  # in place: no second N x N matrix
            mask.diagonal().add_(a)
    return mask


def exact_masks(graphs: GraphBatch, f: Tensor) -> Tensor:
    """The masks of a batch of small graphs, ``[B, n, n]``: Horner's rule on the dense blocks of ``W``
    (O(B K n^3)), differentiable in ``f``; block ``b`` equals ``exact_mask`` of graph ``b`` alone."""
    alpha = modulation_alpha(f)
    w, eye = graphs.dense_w.to(f.dtype), torch.eye(graphs.n, dtype=f.dtype)
    mask = (alpha[-1] * eye).expand(graphs.size, -1, -1)
    for a in alpha.flip(0)[1:]:
        mask = w @ mask + a * eye
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
        return torch.sparse_coo_tensor(
            torch.stack([self.rows, self.cols]),
            self.values(f),
            (self.n, self.n),
            is_coalesced=True,
            check_invariants=False,
        )

    def dense(self, f: Tensor) -> Tensor:
        """``Phi`` as a dense [N, N] tensor (differentiable in ``f`` through a scatter of the values)."""
        flat = torch.zeros(self.n * self.n, dtype=f.dtype).index_add(0, self.rows * self.n + self.cols, self.values(f))
        return flat.view(self.n, self.n)

    def blocks(self, f: Tensor, size: int) -> Tensor:
        """For the features of a disjoint union of ``size`` graphs of ``n / size`` nodes each (walks never leave
        their graph), the ``size`` diagonal blocks of ``Phi``: dense [size, n / size, n / size]."""
        m = self.n // size
        if m * size != self.n or bool((self.rows // m != self.cols // m).any()):
            raise ValueError(f"features of {self.n} nodes are not {size} disjoint blocks")
        index = self.rows * m + self.cols % m  # = block * m * m + (row % m) * m + col % m
        return torch.zeros(self.n * m, dtype=f.dtype).index_add(0, index, self.values(f)).view(size, m, m)


def sample_grf(
    graph: Graph, n_walks: int, p_halt: float, k_max: int, generator: torch.Generator | None = None, block: int = 4096
) -> GrfFeatures:
    """Run ``n_walks`` halting random walks of at most ``k_max`` steps from every node, all at once.

    The walks of ``block`` start nodes advance together; blocks follow in node order, so the pairs come out
    sorted without a global sort and the working memory is that of one block.
    Cost: O(N n_walks k_max) time, O(block n_walks k_max + N n_walks k_max) memory (the result holds at most
    ``N (1 + n_walks k_max)`` pairs).
    """
    if not 0.0 < p_halt < 1.0:
        raise ValueError(f"p_halt must be in (0, 1), got {p_halt}")
    if n_walks < 1 or k_max < 0:
        raise ValueError(f"need n_walks >= 1 and k_max >= 0, got {n_walks}, {k_max}")
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    parts = [
        _walk_block(graph, torch.arange(lo, min(lo + block, graph.n)), n_walks, p_halt, k_max, generator)
        for lo in range(0, graph.n, block)
    ]
    key = torch.cat([k for k, _ in parts])
    loads = torch.cat([v for _, v in parts])
    return GrfFeatures(key // graph.n, key % graph.n, loads, graph.n)


def _walk_block(
    graph: Graph, nodes: Tensor, n_walks: int, p_halt: float, k_max: int, generator: torch.Generator | None
) -> tuple[Tensor, Tensor]:
    """(sorted keys ``i * N + u``, loads [U, K + 1] / n_walks) of the walks from ``nodes``."""
    n = graph.n
    start = nodes.repeat_interleave(n_walks)
    cur, load = start.clone(), torch.ones(start.shape[0])
    alive = torch.ones(start.shape[0], dtype=torch.bool)
    deg = graph.degree.to(load.dtype)
    keys, steps, vals = (
        [nodes * n + nodes],
        [torch.zeros(nodes.shape[0], dtype=torch.long)],
        [torch.full((nodes.shape[0],), float(n_walks))],
    )
    for k in range(1, k_max + 1):
        if graph.indices.numel() == 0:
            break
        alive &= torch.rand(start.shape[0], generator=generator) >= p_halt
        d = deg[cur]
        alive &= d > 0
        pick = (torch.rand(start.shape[0], generator=generator) * d).long().clamp_max((d - 1).clamp_min(0).long())
        edge = (graph.indptr[cur] + pick).clamp_max(graph.indices.numel() - 1)
        load = load * graph.weights[edge] * d / (1.0 - p_halt)
        cur = torch.where(alive, graph.indices[edge], cur)
        keys.append(start[alive] * n + cur[alive])
        steps.append(torch.full((keys[-1].shape[0],), k, dtype=torch.long)), vals.append(load[alive])
        if not bool(alive.any()):
            break
    key, inverse = torch.unique(torch.cat(keys), return_inverse=True)
    loads = torch.zeros(key.shape[0] * (k_max + 1)).index_add_(
        0, inverse * (k_max + 1) + torch.cat(steps), torch.cat(vals) / n_walks
    )
    return key, loads.view(-1, k_max + 1)
