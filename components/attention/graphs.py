"""Graphs over tokens in torch-geometric's conventions, and the normalised weighted adjacency the masks use.

* ``grid_edge_index(h, w)``: the 4-neighbour grid of an ``h x w`` patch layout (row-major node order),
  as an ``edge_index`` ``[2, E]`` (row 0 the source, row 1 the target, both directions present).
* ``knn_edge_index(points, k)``: the symmetrised k-nearest-neighbour graph of a point cloud (scikit-learn's
  KD-tree; no self loops).
* ``knn_neighbours(points, k)``: the [N, k] neighbour ids behind ``knn_edge_index`` (what a dataset stores).
* ``GraphBatch.from_neighbours(nbrs)``: B kNN graphs of N nodes each (one per point cloud of a batch), as their
  disjoint union (one ``Graph`` of B N nodes, each block weighted by its own max degree, which the GRF sampler
  walks) and as dense per-graph adjacencies [B, N, N] (which the exact mask is built from).
* ``Graph``: the CSR view the random-walk sampler needs (``indptr``, ``indices``, ``weights``, ``degree``) of
  the weighted adjacency ``W = A / max_degree`` (nonnegative, spectral radius <= 1, so every power series with
  summable coefficients converges), with ``sparse_w()`` / ``dense_w()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
import torch
from torch import Tensor

__all__ = ["Graph", "GraphBatch", "grid_edge_index", "knn_edge_index", "knn_neighbours", "random_grid_graph"]


def grid_edge_index(h: int, w: int) -> Tensor:
    """Edges of the ``h x w`` 4-neighbour grid, node ``r * w + c``; ``[2, E]`` int64, both directions."""
    if h < 1 or w < 1:
        raise ValueError(f"grid needs h, w >= 1, got {h} x {w}")
    idx = torch.arange(h * w).view(h, w)
    right = torch.stack([idx[:, :-1].reshape(-1), idx[:, 1:].reshape(-1)])
    down = torch.stack([idx[:-1, :].reshape(-1), idx[1:, :].reshape(-1)])
    one_way = torch.cat([right, down], dim=1)
    return torch.cat([one_way, one_way.flip(0)], dim=1)


def knn_neighbours(points: np.ndarray | Tensor, k: int) -> np.ndarray:
    """The ``k`` nearest neighbours of each point of ``points`` [N, D] (itself excluded): int64 [N, k]."""
    from sklearn.neighbors import NearestNeighbors

    x = np.asarray(points, dtype=np.float64)
    if x.ndim != 2 or len(x) <= k or k < 1:
        raise ValueError(f"knn needs [N, D] points with N > k >= 1, got {x.shape} and k = {k}")
    _, nbrs = NearestNeighbors(n_neighbors=k + 1).fit(x).kneighbors(x)
    return nbrs[:, 1:].astype(np.int64)


def _symmetric_pairs(neighbours: Tensor, offset: Tensor | int = 0) -> Tensor:
    """``[2, E]`` both directions of every (point, neighbour) pair of ``neighbours`` [..., N, k]."""
    n, k = neighbours.shape[-2:]
    src = neighbours + offset
    dst = (torch.arange(n).view(n, 1) + offset).expand_as(src)
    one_way = torch.stack([src.reshape(-1), dst.reshape(-1)])
    return torch.cat([one_way, one_way.flip(0)], dim=1)


def knn_edge_index(points: np.ndarray | Tensor, k: int) -> Tensor:
    """Symmetrised kNN graph of ``points`` [N, D]: ``j -> i`` and ``i -> j`` for every j among i's k nearest
    (excluding i itself); ``[2, E]`` int64 without duplicates."""
    pairs = _symmetric_pairs(torch.from_numpy(knn_neighbours(points, k)))
    return torch.unique(pairs, dim=1)


@dataclass(frozen=True)
class Graph:
    """An undirected graph with weighted adjacency ``W = A / max_degree`` in CSR form.

    Attributes:
        n: number of nodes.
        indptr: [n + 1] int64; the neighbours of ``v`` are ``indices[indptr[v]:indptr[v+1]]``.
        indices: [E] int64 neighbour ids, sorted within each node.
        weights: [E] float32 ``W[v, u]`` of each stored edge.
        degree: [n] int64 number of neighbours.
    """

    n: int
    indptr: Tensor
    indices: Tensor
    weights: Tensor
    degree: Tensor

    @classmethod
    def from_edge_index(cls, edge_index: Tensor, n: int) -> Graph:
        """From a symmetric ``edge_index`` [2, E] (duplicates and self loops dropped)."""
        ei = torch.as_tensor(edge_index).long()
        if ei.dim() != 2 or ei.shape[0] != 2:
            raise ValueError(f"edge_index must be [2, E], got {tuple(ei.shape)}")
        if ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= n):
            raise ValueError(f"edge_index holds node ids outside [0, {n})")
        ei = ei[:, ei[0] != ei[1]]
        key = torch.unique(ei[0] * n + ei[1])  # sorted by source, then target
        src, dst = key // n, key % n
        if not torch.equal(torch.unique(dst * n + src), key):
            raise ValueError("edge_index is not symmetric (an undirected graph needs both directions)")
        degree = torch.bincount(src, minlength=n)
        indptr = torch.zeros(n + 1, dtype=torch.long)
        indptr[1:] = torch.cumsum(degree, 0)
        max_deg = max(int(degree.max()) if n else 1, 1)
        weights = torch.full((len(dst),), 1.0 / max_deg)
        return cls(n, indptr, dst, weights, degree)

    @property
    def edge_index(self) -> Tensor:
        return torch.stack([torch.repeat_interleave(torch.arange(self.n), self.degree), self.indices])

    def sparse_w(self) -> Tensor:
        """``W`` as a coalesced sparse COO tensor [n, n]."""
        return torch.sparse_coo_tensor(
            self.edge_index, self.weights, (self.n, self.n), is_coalesced=True, check_invariants=False
        )

    def dense_w(self) -> Tensor:
        return self.sparse_w().to_dense()


def random_grid_graph(n: int, drop: float, generator: torch.Generator) -> Graph:
    """A ``side x side`` grid (``side = round(sqrt(n))``) with a fraction ``drop`` of its edges removed at random
    (both directions together): the random grid graphs of the scaling study."""
    side = max(2, int(round(n**0.5)))
    ei = grid_edge_index(side, side)
    half = ei[:, : ei.shape[1] // 2]
    keep = torch.rand(half.shape[1], generator=generator) >= drop
    half = half[:, keep]
    return Graph.from_edge_index(torch.cat([half, half.flip(0)], 1), side * side)


@dataclass(frozen=True)
class GraphBatch:
    """B graphs of ``n`` nodes each, e.g. the kNN graphs of a batch of point clouds.

    Attributes:
        union: their disjoint union (node ``b n + i`` is node ``i`` of graph ``b``), each block's edges weighted
            by that graph's own ``1 / max_degree``, so ``union``'s ``W`` is block-diagonal with the blocks of the
            graphs built one by one.
        size: B.
        n: nodes per graph.
        walks: a per-batch store for what its users sample once and share (e.g. the GRF walks every masked layer
            of one forward applies with its own modulation).
    """

    union: Graph
    size: int
    n: int
    walks: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_neighbours(cls, neighbours: Tensor) -> GraphBatch:
        """From kNN ids ``[B, N, k]`` (row ``i`` of cloud ``b``: the ids of its neighbours in ``0..N-1``)."""
        nb = torch.as_tensor(neighbours).long()
        if nb.dim() != 3:
            raise ValueError(f"neighbours must be [B, N, k], got {tuple(nb.shape)}")
        b, n, _ = nb.shape
        if nb.numel() and (int(nb.min()) < 0 or int(nb.max()) >= n):
            raise ValueError(f"neighbours hold ids outside [0, {n})")
        union = Graph.from_edge_index(_symmetric_pairs(nb, (torch.arange(b) * n).view(b, 1, 1)), b * n)
        block_max = union.degree.view(b, n).amax(1).clamp_min(1).to(union.weights.dtype)
        source = torch.repeat_interleave(torch.arange(b * n), union.degree)
        return cls(replace(union, weights=1.0 / block_max[source // n]), b, n)

    @cached_property
    def dense_w(self) -> Tensor:
        """The B blocks of ``W`` as a dense ``[B, n, n]`` tensor."""
        src, dst = self.union.edge_index
        w = torch.zeros(self.size, self.n, self.n)
        w[src // self.n, src % self.n, dst % self.n] = self.union.weights
        return w
