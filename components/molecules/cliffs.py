"""Activity cliffs as MoleculeACE defines them (``MoleculeACE/benchmark/cliffs.py``), and the similarity graph.

Two molecules i != j are **similar** when at least one of three similarities reaches ``threshold`` (0.9):

* Tanimoto of their ECFP4 bits,
* Tanimoto of the ECFP4 bits of their generic skeletons (MoleculeACE's "scaffold" similarity, see
  :mod:`components.molecules.featurize`),
* the normalised Levenshtein similarity of their SMILES strings.

A similar pair is an **activity cliff** when the potencies differ by more than ``fold`` (10x), i.e.
``max(p_i, p_j) / min(p_i, p_j) > fold`` on the nM values (strictly greater, as ``find_cliffs`` does: a
pair at exactly 10x is not a cliff). A **cliff molecule** is one that belongs to at least one cliff pair.
MoleculeACE computed its ``cliff_mol`` column on the train and test molecules together; the training-only
graph of the LAC reconstruction is :func:`similarity_graph` on the training molecules alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from components.molecules.featurize import ECFP_BITS, ECFP_RADIUS, ecfp_bits, scaffold_bits, smiles_similarity, tanimoto

SIMILARITY_KINDS = ("ecfp", "scaffold", "smiles")
SIMILARITY_THRESHOLD = 0.9
POTENCY_FOLD = 10.0


def similarity_matrices(
    smiles: Sequence[str],
    mols: Sequence[Any],
    kinds: Sequence[str] = SIMILARITY_KINDS,
    radius: int = ECFP_RADIUS,
    n_bits: int = ECFP_BITS,
) -> dict[str, np.ndarray]:
    """``{kind: [N, N] similarity}`` for each requested kind (see the module docstring)."""
    unknown = sorted(set(kinds) - set(SIMILARITY_KINDS))
    if unknown or not kinds:
        raise ValueError(f"similarity kinds must be a non-empty subset of {SIMILARITY_KINDS}, got {list(kinds)}")
    if len(smiles) != len(mols):
        raise ValueError(f"{len(smiles)} SMILES but {len(mols)} molecules")
    make = {
        "ecfp": lambda: tanimoto(ecfp_bits(mols, radius, n_bits)),
        "scaffold": lambda: tanimoto(scaffold_bits(mols, radius, n_bits)),
        "smiles": lambda: smiles_similarity(smiles),
    }
    return {kind: make[kind]() for kind in kinds}


def similar_pairs(similarities: dict[str, np.ndarray], threshold: float = SIMILARITY_THRESHOLD) -> np.ndarray:
    """``[N, N]`` bool: any similarity >= ``threshold``; the diagonal is False (a molecule is not its own pair)."""
    if not similarities:
        raise ValueError("no similarity matrix given")
    out = np.zeros_like(next(iter(similarities.values())), dtype=bool)
    for sim in similarities.values():
        out |= sim >= threshold
    np.fill_diagonal(out, False)
    return out


def fold_change(potency: np.ndarray) -> np.ndarray:
    """``[N, N]`` max(p_i, p_j) / min(p_i, p_j) of positive potencies (nM)."""
    p = np.asarray(potency, dtype=np.float64)
    if p.ndim != 1 or not (np.isfinite(p).all() and (p > 0).all()):
        raise ValueError("potencies must be a 1-D array of finite values > 0 (nM)")
    return np.maximum(p[:, None], p[None, :]) / np.minimum(p[:, None], p[None, :])


def cliff_pairs(similar: np.ndarray, potency: np.ndarray, fold: float = POTENCY_FOLD) -> np.ndarray:
    """``[N, N]`` bool: similar pairs whose potencies differ more than ``fold``-fold."""
    return similar & (fold_change(potency) > fold)


def cliff_molecules(cliffs: np.ndarray) -> np.ndarray:
    """``[N]`` 0/1: the molecules in at least one cliff pair (MoleculeACE's ``cliff_mol``)."""
    return cliffs.any(axis=1).astype(np.int64)


@dataclass(frozen=True)
class SimilarityGraph:
    """Undirected similarity graph on N molecules: each edge once (``src < dst``), with its cliff flag and the
    similarity kinds that made it an edge."""

    n_nodes: int
    src: np.ndarray  # [E] int64
    dst: np.ndarray  # [E] int64
    cliff: np.ndarray  # [E] bool
    kinds: dict[str, np.ndarray]  # kind -> [E] bool (similarity of that kind >= threshold)

    @property
    def n_edges(self) -> int:
        return int(self.src.size)

    def degree(self, cliff_only: bool = False) -> np.ndarray:
        """``[N]`` number of edges (or of cliff edges) at each node."""
        keep = self.cliff if cliff_only else np.ones_like(self.cliff)
        return np.bincount(np.concatenate([self.src[keep], self.dst[keep]]), minlength=self.n_nodes)


def similarity_graph(
    similarities: dict[str, np.ndarray],
    potency: np.ndarray,
    threshold: float = SIMILARITY_THRESHOLD,
    fold: float = POTENCY_FOLD,
) -> SimilarityGraph:
    """The graph whose edges are the similar pairs (any of ``similarities`` >= ``threshold``; the matrices of
    :func:`similarity_matrices`, or a block of them), cliff edges (potency fold > ``fold``) flagged."""
    similar = similar_pairs(similarities, threshold)
    src, dst = np.nonzero(np.triu(similar, k=1))
    cliff = cliff_pairs(similar, potency, fold)[src, dst]
    return SimilarityGraph(
        n_nodes=similar.shape[0],
        src=src.astype(np.int64),
        dst=dst.astype(np.int64),
        cliff=cliff,
        kinds={k: m[src, dst] >= threshold for k, m in similarities.items()},
    )
