"""Molecule graphs through torch-geometric: ``from_smiles`` graphs, their batching, and an atom encoder.

``torch_geometric.utils.from_smiles`` gives each atom 9 categorical features (atomic number, chirality,
degree, formal charge, number of Hs, radicals, hybridisation, aromaticity, ring membership; indices into
``torch_geometric.utils.smiles.x_map``) and each bond direction an edge. :class:`AtomEncoder` embeds them
as the sum of one learned embedding per feature (OGB's scheme). :func:`graph_batch` batches graphs with
``Batch.from_data_list`` and hands the batch on as plain tensors, so the training loop can move it to a
device like any other batch.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn


def molecule_graphs(smiles: Sequence[str]) -> list:
    """One ``torch_geometric.data.Data`` per SMILES (``x [atoms, 9]`` long, ``edge_index [2, 2 * bonds]``).

    The SMILES must be valid (check them with :func:`components.molecules.featurize.parse_smiles` first)."""
    from rdkit import RDLogger
    from torch_geometric.utils import from_smiles

    RDLogger.DisableLog("rdApp.*")
    try:
        return [from_smiles(s) for s in smiles]
    finally:
        RDLogger.EnableLog("rdApp.*")


def atom_feature_sizes() -> list[int]:
    """Number of categories of each of ``from_smiles``' 9 atom features."""
    from torch_geometric.utils.smiles import x_map

    return [len(values) for values in x_map.values()]


def graph_batch(graphs: Sequence, index: Tensor) -> dict[str, Tensor]:
    """The graphs at ``index`` (repeats allowed) as one disjoint union: ``{"atoms" [n, 9], "edge_index" [2, e],
    "graph" [n]}`` with ``graph[a]`` the position in ``index`` of atom ``a``'s molecule."""
    from torch_geometric.data import Batch

    batch = Batch.from_data_list([graphs[i] for i in index.tolist()])
    return {"atoms": batch.x, "edge_index": batch.edge_index, "graph": batch.batch}


class AtomEncoder(nn.Module):
    """``h_a = sum_k E_k[x_a,k]``: one embedding table per categorical atom feature, summed: ``[n, 9] -> [n, d]``."""

    def __init__(self, dim: int, sizes: Sequence[int] | None = None) -> None:
        super().__init__()
        self.tables = nn.ModuleList(nn.Embedding(n, dim) for n in (sizes or atom_feature_sizes()))

    def forward(self, atoms: Tensor) -> Tensor:
        if atoms.ndim != 2 or atoms.shape[1] != len(self.tables):
            raise ValueError(f"expected atom features [n, {len(self.tables)}], got {tuple(atoms.shape)}")
        return sum(table(atoms[:, k]) for k, table in enumerate(self.tables))
