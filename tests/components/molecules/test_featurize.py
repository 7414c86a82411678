"""The RDKit featuriser: parsing errors name the molecule, ECFP bits, Tanimoto and SMILES similarity by hand."""

from __future__ import annotations

import numpy as np
import pytest

from components.molecules.featurize import (
    InvalidSmilesError,
    ecfp_bits,
    generic_skeletons,
    parse_smiles,
    scaffold_bits,
    smiles_similarity,
    tanimoto,
)

SECRET = "C1CC(=O"  # an unclosed ring and branch: RDKit refuses it


def test_parse_smiles_names_the_bad_molecule_without_quoting_it() -> None:
    assert [m.GetNumAtoms() for m in parse_smiles(["CCO", "c1ccccc1"])] == [3, 6]
    with pytest.raises(InvalidSmilesError) as err:
        parse_smiles(["CCO", SECRET, "CC"])
    assert err.value.index == 1 and "7 characters" in str(err.value) and SECRET not in str(err.value)
    for bad, problem in (("", "empty"), ("   ", "empty"), (None, "empty")):
        with pytest.raises(InvalidSmilesError, match=problem):
            parse_smiles(["C", bad])


def test_ecfp_bits_count_the_distinct_atom_environments() -> None:
    # methane: one environment (radius 0; no neighbours to grow); ethane: the CH3 atom, then CH3 bonded to CH3;
    # ethanol: 3 atoms at radius 0, 3 at radius 1, 1 at radius 2 (the whole molecule around the middle C) ...
    bits = ecfp_bits(parse_smiles(["C", "CC", "CCO"]), radius=2, n_bits=2048)
    assert bits.dtype == np.uint8 and bits.shape == (3, 2048)
    assert bits.sum(1).tolist() == [1, 2, 6]  # ethanol: 3 + 3, its radius-2 environment repeats a radius-1 one
    assert ecfp_bits(parse_smiles(["CCO"]), radius=0, n_bits=2048).sum() == 3


def test_ecfp_matches_the_rdkit_call_moleculeace_makes() -> None:
    from rdkit import RDLogger
    from rdkit.Chem import AllChem

    smiles = ["CC(=O)Oc1ccccc1C(=O)O", "CN1CCC[C@H]1c1cccnc1", "O=C(O)c1ccccc1", "C[C@H](N)C(=O)O"]
    mols = parse_smiles(smiles)
    RDLogger.DisableLog("rdApp.*")  # the older call prints a deprecation warning per molecule
    try:
        legacy = np.array([list(AllChem.GetMorganFingerprintAsBitVect(m, 2, nBits=1024)) for m in mols])
    finally:
        RDLogger.EnableLog("rdApp.*")
    assert (ecfp_bits(mols) == legacy).all()


def test_tanimoto_by_hand_and_against_rdkit() -> None:
    a = np.array([[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]])
    b = np.array([[1, 0, 1, 0], [0, 0, 0, 0]])
    got = tanimoto(a, b)
    # |a0 & b0| = 1, |a0 | b0| = 3; empty vs empty = 0 (RDKit's value); a2 vs b0: 2 / 4
    assert got == pytest.approx(np.array([[1 / 3, 0.0], [0.0, 0.0], [0.5, 0.0]]))
    assert np.diag(tanimoto(a[[0, 2]])) == pytest.approx([1.0, 1.0])

    from rdkit import DataStructs
    from rdkit.Chem import rdFingerprintGenerator

    mols = parse_smiles(["CCOc1ccccc1", "CCNc1ccccc1", "CC(=O)Oc1ccccc1C(=O)O", "c1ccncc1"])
    gen = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=1024)
    fps = [gen.GetFingerprint(m) for m in mols]
    expected = np.array([DataStructs.BulkTanimotoSimilarity(f, fps) for f in fps])
    assert tanimoto(ecfp_bits(mols)) == pytest.approx(expected, abs=1e-12)
    with pytest.raises(ValueError, match="same width"):
        tanimoto(a, np.zeros((1, 3)))


def test_smiles_similarity_is_one_minus_normalised_levenshtein() -> None:
    got = smiles_similarity(["CCO", "CCCC"], ["CCN", "CC", "CCO"])
    # CCO -> CCN: 1 edit of 3; CCO -> CC: 1 of 3; CCCC -> CCN: 2 of 4; CCCC -> CC: 2 of 4; CCCC -> CCO: 2 of 4
    assert got == pytest.approx(np.array([[2 / 3, 2 / 3, 1.0], [0.5, 0.5, 0.5]]))


def test_scaffold_similarity_reads_the_generic_skeleton_as_moleculeace_does() -> None:
    from rdkit import Chem

    toluene, ethylpyridine, ethylbenzene = parse_smiles(["Cc1ccccc1", "CCc1ccncc1", "CCc1ccccc1"])
    skeletons = [Chem.MolToSmiles(s) for s in generic_skeletons([toluene, ethylpyridine, ethylbenzene])]
    # every atom carbon and every bond single, the side chain kept (MoleculeACE applies MakeScaffoldGeneric to
    # the molecule, not to its Murcko scaffold)
    assert skeletons == ["CC1CCCCC1", "CCC1CCCCC1", "CCC1CCCCC1"]
    sim = tanimoto(scaffold_bits([toluene, ethylpyridine, ethylbenzene]))
    assert sim[1, 2] == 1.0 and sim[0, 1] < 1.0  # the ring nitrogen is gone, the ethyl group is not
