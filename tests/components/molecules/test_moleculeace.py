"""MoleculeACE's files: the 30 packaged targets, the published results, and the CSV reader's refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from components.molecules.moleculeace import (
    COLUMNS,
    TARGETS,
    MoleculeAceFormatError,
    benchmark_csv,
    published_results,
    read_moleculeace_csv,
    tuned_hyperparameters,
)

SECRET = "Oc1ccc(cc1)C(=O"  # an unreadable SMILES no message may echo
HEADER = ",".join(COLUMNS)
GOOD = ["CCO,100.0,-2.0,0,train", "CCN,10.0,-1.0,1,train", "CCC,1000.0,-3.0,0,test"]


def write(tmp_path: Path, lines: list[str], name: str = "set.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_thirty_targets_ship_in_the_wheel() -> None:
    folder = benchmark_csv(TARGETS[0]).parent
    assert sorted(p.stem for p in folder.glob("*.csv")) == sorted(TARGETS)
    ds = read_moleculeace_csv(benchmark_csv("CHEMBL4616_EC50"))
    assert (len(ds), ds.train.size, ds.test.size, int(ds.cliff_mol.sum())) == (682, 543, 139, 355)
    assert ds.y == pytest.approx(-np.log10(ds.potency_nm))
    with pytest.raises(ValueError, match="unknown MoleculeACE target"):
        benchmark_csv("CHEMBL0_Ki")
    assert tuned_hyperparameters("CHEMBL2835_Ki")["C"] == 10000


def test_published_results_give_moleculeace_headline_means() -> None:
    rows = published_results()
    # 24 method/descriptor pairs x 30 targets; the 3 SMILES models are published only with 10x augmentation (dropped)
    assert len(rows) == 21 * 30 and ("CHEMBL234_Ki", "LSTM", "SMILES") not in rows
    svm = [rows[(t, "SVM", "ECFP")] for t in TARGETS]
    # MoleculeACE's headline (mean over the 30 targets): SVM + ECFP 0.671 / 0.751, MLP + ECFP 0.763 / 0.833
    assert np.mean(svm, axis=0) == pytest.approx([0.671, 0.751], abs=6e-4)
    assert np.mean([rows[(t, "MLP", "ECFP")] for t in TARGETS], axis=0) == pytest.approx([0.763, 0.833], abs=6e-4)


def test_a_good_file_reads_with_extra_columns(tmp_path: Path) -> None:
    path = write(tmp_path, [HEADER + ",pKi", *(line + ",7" for line in GOOD)])
    ds = read_moleculeace_csv(path)
    assert ds.name == "set" and ds.smiles == ("CCO", "CCN", "CCC") and ds.train.tolist() == [0, 1]
    assert ds.cliff_mol.tolist() == [0, 1, 0] and ds.potency_nm.tolist() == [100.0, 10.0, 1000.0]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["smiles,y,split", "CCO,-2,train"], r"missing column\(s\) \['exp_mean \[nM\]', 'cliff_mol'\]"),
        (
            [HEADER, GOOD[0], f"{SECRET},10.0,-1.0,1,train", GOOD[2]],
            r"row 2 \(line 3\): column 'smiles': RDKit cannot read this SMILES \(a text of 15 characters\)",
        ),
        ([HEADER, GOOD[0], ",10.0,-1.0,1,train", GOOD[2]], r"row 2 \(line 3\): column 'smiles': empty SMILES"),
        ([HEADER, GOOD[0], "CCN,ten,-1.0,1,train"], r"row 2 \(line 3\): column 'exp_mean \[nM\]' holds a text of 3 "),
        ([HEADER, GOOD[0], "CCN,-10,-1.0,1,train"], r"row 2 \(line 3\): column 'exp_mean \[nM\]' is -10.0; a potency"),
        (
            [HEADER, GOOD[0], "CCN,10.0,8.0,1,train"],
            r"row 2 \(line 3\): column 'y' is 8 but -log10\(exp_mean \[nM\]\) is -1",
        ),
        ([HEADER, GOOD[0], "CCN,10.0,nan,1,train"], r"row 2 \(line 3\): column 'y' holds 'nan', not a finite number"),
        ([HEADER, GOOD[0], "CCN,10.0,-1.0,2,train"], r"row 2 \(line 3\): column 'cliff_mol' is 2.0; expected 0 or 1"),
        ([HEADER, GOOD[0], "CCN,10.0,-1.0,1,valid"], r"row 2 \(line 3\): column 'split' holds a text of 5 characters"),
        ([HEADER, GOOD[0], "CCN,10.0,-1.0,1"], r"row 2 \(line 3\): expected 5 fields"),
        ([HEADER, GOOD[0], GOOD[2]], r"needs at least 2 training and 1 test molecule, found 1 and 1"),
        ([HEADER], r"needs at least 2 training and 1 test molecule, found 0 and 0"),
    ],
    ids=[
        "columns",
        "bad-smiles",
        "empty-smiles",
        "potency-text",
        "potency-negative",
        "label-convention",
        "label-nan",
        "cliff-flag",
        "split",
        "ragged",
        "too-few-train",
        "no-rows",
    ],
)
def test_a_malformed_file_is_refused_naming_row_and_column(tmp_path: Path, lines: list[str], message: str) -> None:
    path = write(tmp_path, lines)
    with pytest.raises(MoleculeAceFormatError, match=message) as err:
        read_moleculeace_csv(path)
    assert str(path) in str(err.value) and SECRET not in str(err.value)


def test_bytes_that_are_not_text_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "set.csv"
    path.write_bytes(HEADER.encode() + b"\n\xff\xfe\x00CCO,1,0,0,train\n")
    with pytest.raises(MoleculeAceFormatError, match=r"not UTF-8 text at byte offset 39, line 2"):
        read_moleculeace_csv(path)
    empty = write(tmp_path, [""], "empty.csv")
    with pytest.raises(MoleculeAceFormatError, match="the file is empty"):
        read_moleculeace_csv(empty)
