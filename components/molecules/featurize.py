"""Molecules from SMILES with RDKit: parsing that names the bad row, ECFP bits, scaffold bits, similarities.

Conventions are MoleculeACE's (``MoleculeACE/benchmark/featurization.py`` and ``cliffs.py``):

* ECFP4 = Morgan fingerprint of radius 2 folded to ``n_bits`` bits (MoleculeACE uses 1024), no chirality,
  no feature invariants; RDKit's ``MorganGenerator`` gives the same bits as the older
  ``GetMorganFingerprintAsBitVect`` MoleculeACE calls.
* scaffold bits = the ECFP4 of the molecule's generic skeleton: RDKit's ``MakeScaffoldGeneric`` applied to
  the whole molecule (every atom carbon, every bond single), falling back to the Murcko scaffold where RDKit
  cannot make it. MoleculeACE calls this its scaffold similarity; since it applies ``MakeScaffoldGeneric``
  to the molecule and not to its Murcko scaffold, side chains stay (toluene gives methylcyclohexane). We
  keep that behaviour: it is what the benchmark's ``cliff_mol`` flags were computed with.
* Tanimoto(a, b) = |a AND b| / |a OR b| on bit vectors, 0 when both are empty (RDKit's value).
* SMILES similarity = 1 - Levenshtein(s, t) / max(len(s), len(t)) on the SMILES strings.

Nothing here imports torch; the graphs for GNNs are in :mod:`components.molecules.graphs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

ECFP_RADIUS = 2  # ECFP4: radius 2, diameter 4
ECFP_BITS = 1024  # MoleculeACE's fingerprint length


class InvalidSmilesError(ValueError):
    """A SMILES that RDKit cannot read (or that holds no atom); ``index`` is its 0-based position."""

    def __init__(self, index: int, problem: str) -> None:
        super().__init__(f"molecule {index}: {problem}")
        self.index, self.problem = index, problem


def parse_smiles(smiles: Sequence[str]) -> list[Any]:
    """RDKit molecules of ``smiles``, in order. Raises :class:`InvalidSmilesError` for the first entry that is
    not a string, does not parse or sanitise, or has no atom (RDKit reads ``""`` as an empty molecule); the
    message gives its length, never its text. RDKit's own error log is silenced meanwhile."""
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    try:
        mols = []
        for i, text in enumerate(smiles):
            if not isinstance(text, str) or not text.strip():
                raise InvalidSmilesError(i, "empty SMILES")
            mol = Chem.MolFromSmiles(text)
            if mol is None:
                raise InvalidSmilesError(i, f"RDKit cannot read this SMILES (a text of {len(text)} characters)")
            if mol.GetNumAtoms() == 0:
                raise InvalidSmilesError(i, "the SMILES holds no atom")
            mols.append(mol)
        return mols
    finally:
        RDLogger.EnableLog("rdApp.*")


def _bits(mols: Sequence[Any], radius: int, n_bits: int) -> np.ndarray:
    from rdkit.Chem import rdFingerprintGenerator

    if radius < 0 or n_bits < 1:
        raise ValueError(f"radius must be >= 0 and n_bits >= 1, got {radius}, {n_bits}")
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=n_bits)
    out = np.zeros((len(mols), n_bits), dtype=np.uint8)
    for i, mol in enumerate(mols):
        out[i] = generator.GetFingerprintAsNumPy(mol)
    return out


def ecfp_bits(mols: Sequence[Any], radius: int = ECFP_RADIUS, n_bits: int = ECFP_BITS) -> np.ndarray:
    """``[N, n_bits]`` uint8 Morgan bits (ECFP4 at the defaults) of RDKit molecules."""
    return _bits(mols, radius, n_bits)


def generic_skeletons(mols: Sequence[Any]) -> list[Any]:
    """Each molecule made generic (all atoms carbon, all bonds single, side chains kept; the Murcko scaffold
    where RDKit cannot), as MoleculeACE's scaffold similarity reads it (module docstring)."""
    from rdkit.Chem.Scaffolds.MurckoScaffold import GetScaffoldForMol, MakeScaffoldGeneric

    out = []
    for mol in mols:
        try:
            out.append(MakeScaffoldGeneric(mol))
        except Exception:  # noqa: BLE001 - RDKit raises plain RuntimeErrors on odd valences
            out.append(GetScaffoldForMol(mol))
    return out


def scaffold_bits(mols: Sequence[Any], radius: int = ECFP_RADIUS, n_bits: int = ECFP_BITS) -> np.ndarray:
    """``[N, n_bits]`` Morgan bits of each molecule's generic skeleton (MoleculeACE's scaffold similarity)."""
    return _bits(generic_skeletons(mols), radius, n_bits)


def tanimoto(a: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """``[Na, Nb]`` Tanimoto similarities of the 0/1 rows of ``a`` and ``b`` (``b = a`` when omitted).

    ``T = <a, b> / (|a| + |b| - <a, b>)``; two empty rows give 0 (RDKit's convention). Computed with one
    matrix product in float64, so exact for any fingerprint length below 2**53."""
    x = np.asarray(a, dtype=np.float64)
    y = x if b is None else np.asarray(b, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"tanimoto needs two [N, bits] arrays of the same width, got {x.shape} and {y.shape}")
    both = x @ y.T
    union = x.sum(1)[:, None] + y.sum(1)[None, :] - both
    return np.divide(both, union, out=np.zeros_like(both), where=union > 0)


def smiles_similarity(a: Sequence[str], b: Sequence[str] | None = None) -> np.ndarray:
    """``[Na, Nb]`` normalised Levenshtein similarities ``1 - d(s, t) / max(|s|, |t|)`` of SMILES strings."""
    from rapidfuzz.distance import Levenshtein
    from rapidfuzz.process import cdist

    other = a if b is None else b
    return cdist(list(a), list(other), scorer=Levenshtein.normalized_similarity, dtype=np.float64, workers=1)
