"""MoleculeACE's cliff definition and metrics: hand-computed cases, the benchmark's own cliff flags recomputed,
and the ECFP + SVM chain reproducing MoleculeACE's published numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from components.molecules.cliffs import (
    cliff_molecules,
    cliff_pairs,
    fold_change,
    similar_pairs,
    similarity_graph,
    similarity_matrices,
)
from components.molecules.featurize import ecfp_bits, parse_smiles
from components.molecules.metrics import loss_ratio, rmse, rmse_cliff
from components.molecules.moleculeace import (
    benchmark_csv,
    published_results,
    read_moleculeace_csv,
    tuned_hyperparameters,
)


def test_cliff_pairs_by_hand() -> None:
    # molecules 0-1 similar by ECFP, 1-2 by SMILES only, 3 alone; potencies 1, 10, 1000.01, 5 nM
    sims = {
        "ecfp": np.array([[1, 0.95, 0.2, 0.1], [0.95, 1, 0.3, 0.1], [0.2, 0.3, 1, 0.1], [0.1, 0.1, 0.1, 1]]),
        "smiles": np.array([[1, 0.5, 0.5, 0.5], [0.5, 1, 0.9, 0.5], [0.5, 0.9, 1, 0.5], [0.5, 0.5, 0.5, 1]]),
    }
    similar = similar_pairs(sims, 0.9)
    assert similar.tolist() == [
        [False, True, False, False],
        [True, False, True, False],
        [False, True, False, False],
        [False, False, False, False],
    ]
    potency = np.array([1.0, 10.0, 1000.01, 5.0])
    assert fold_change(potency)[0, 1] == 10.0 and fold_change(potency)[2, 1] == pytest.approx(100.001)
    cliffs = cliff_pairs(similar, potency, fold=10.0)
    # 0-1 differ exactly 10-fold: not a cliff (strictly more than 10x, as MoleculeACE's find_cliffs)
    assert np.argwhere(cliffs).tolist() == [[1, 2], [2, 1]]
    assert cliff_molecules(cliffs).tolist() == [0, 1, 1, 0]
    graph = similarity_graph(sims, potency, 0.9, 10.0)
    assert (graph.src.tolist(), graph.dst.tolist(), graph.cliff.tolist()) == ([0, 1], [1, 2], [False, True])
    assert graph.kinds["ecfp"].tolist() == [True, False] and graph.kinds["smiles"].tolist() == [False, True]
    assert graph.degree().tolist() == [1, 2, 1, 0] and graph.degree(cliff_only=True).tolist() == [0, 1, 1, 0]
    with pytest.raises(ValueError, match="finite values > 0"):
        fold_change(np.array([1.0, 0.0]))


def test_moleculeace_cliff_flags_are_recomputed_exactly() -> None:
    """Our similarity + fold definition over train + test gives the benchmark CSV's cliff_mol column."""
    ds = read_moleculeace_csv(benchmark_csv("CHEMBL2047_EC50"))
    mols = parse_smiles(ds.smiles)
    flags = cliff_molecules(cliff_pairs(similar_pairs(similarity_matrices(ds.smiles, mols)), ds.potency_nm))
    assert len(ds) == 631 and flags.sum() == 245
    assert (flags == ds.cliff_mol).all()
    with pytest.raises(ValueError, match="subset"):
        similarity_matrices(ds.smiles[:2], mols[:2], kinds=("maccs",))


def test_rmse_and_rmse_cliff_by_hand() -> None:
    y, pred, flags = [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 5.0, 3.0], [0, 0, 1, 1]
    assert rmse(y, pred) == pytest.approx(math.sqrt((4 + 1) / 4))
    assert rmse_cliff(pred, y, flags) == pytest.approx(math.sqrt((4 + 1) / 2))
    assert math.isnan(rmse_cliff(pred, y, [0, 0, 0, 0]))  # no cliff molecule: NaN, as MoleculeACE
    with pytest.raises(ValueError, match="0/1 flags"):
        rmse_cliff(pred, y, [0, 2, 0, 0])
    assert loss_ratio([1.0, 3.0, 8.0, 4.0], [0, 0, 1, 1]) == pytest.approx(6.0 / 2.0)
    assert math.isnan(loss_ratio([1.0, 2.0], [1, 1])) and math.isnan(loss_ratio([0.0, 2.0], [0, 1]))


def test_ecfp_svm_reproduces_moleculeace_published_row() -> None:
    """The whole chain on real data: CSV -> ECFP4 (1024 bits) -> sklearn SVR with the tuned settings ->
    RMSE, RMSE_cliff equal MoleculeACE's published numbers for CHEMBL2047_EC50."""
    from sklearn.svm import SVR

    ds = read_moleculeace_csv(benchmark_csv("CHEMBL2047_EC50"))
    x = ecfp_bits(parse_smiles(ds.smiles)).astype(np.float64)
    config = tuned_hyperparameters("CHEMBL2047_EC50")
    assert config == {"C": 10, "epsilon": 0.1, "gamma": 0.01, "kernel": "rbf"}
    pred = SVR(**config).fit(x[ds.train], ds.y[ds.train]).predict(x[ds.test])
    published = published_results()[("CHEMBL2047_EC50", "SVM", "ECFP")]
    assert published == (0.613573775, 0.687410644)
    assert rmse(ds.y[ds.test], pred) == pytest.approx(published[0], abs=1e-6)
    assert rmse_cliff(pred, ds.y[ds.test], ds.cliff_mol[ds.test]) == pytest.approx(published[1], abs=1e-6)
