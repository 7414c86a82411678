"""QM9 reader: known descriptor values, a random subset of a tiny CSV, and errors naming column and row."""

import json
import math

import numpy as np
import pytest

from components.data.qm9 import DESCRIPTOR_NAMES, QM9FormatError, check_qm9_csv, descriptor, read_qm9

HEADER = "Index,Stoichiometry,XYZ_Ang,Polarizability_bohr3,HOMO_LUMO_gap_au"


def _row(i: int, counts=(2, 0, 0, 0, 0), xyz=None, alpha=None, gap="0.5") -> str:
    xyz = xyz if xyz is not None else [[0.0, 0.0, 0.0], [0.0, 0.0, 0.74 + 0.01 * i]][: sum(counts)]
    alpha = alpha if alpha is not None else str(5.0 + i)
    return f'{i},"{json.dumps(list(counts))}","{json.dumps(xyz)}",{alpha},{gap}'


def _csv(tmp_path, rows: list[str]):
    path = tmp_path / "qm9.csv"
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return path


def test_descriptor_of_a_diatomic_and_a_square() -> None:
    d = descriptor([2, 0, 0, 0, 0], np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.74]]))
    assert len(d) == len(DESCRIPTOR_NAMES)
    np.testing.assert_allclose(d, [2, 0, 0, 0, 0, 0.37, 0.74, 0.74])
    square = descriptor([0, 4, 0, 0, 0], np.array([[0.0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]]))
    # centroid (0.5, 0.5): every atom at sqrt(0.5); 4 sides of 1 and 2 diagonals of sqrt(2)
    np.testing.assert_allclose(square[5:], [math.sqrt(0.5), (4 + 2 * math.sqrt(2)) / 6, math.sqrt(2)])


def test_read_draws_a_random_subset_and_keeps_rows_together(tmp_path) -> None:
    path = _csv(tmp_path, [_row(i) for i in range(30)])
    full = read_qm9([path])
    assert full["descriptors"].shape == (30, 8) and check_qm9_csv(path) == 30
    sub = read_qm9([path], n=10, seed=1)
    assert sub["descriptors"].shape == (10, 8)
    # each molecule keeps its own property: alpha = 5 + i and the bond length 0.74 + 0.01 i
    np.testing.assert_allclose(sub["descriptors"][:, 6], 0.74 + 0.01 * (sub["alpha"] - 5.0), atol=1e-9)
    assert len(set(sub["alpha"])) == 10
    assert not np.array_equal(read_qm9([path], n=10, seed=2)["alpha"], sub["alpha"])


@pytest.mark.parametrize(
    "bad, where",
    [
        (_row(3, alpha="big"), "column 'Polarizability_bohr3' row 4"),
        (_row(3, xyz=[[0.0, 0.0, 0.0]]), "column 'XYZ_Ang' row 4"),
        (_row(3, counts=(1, 2)), "column 'Stoichiometry' row 4"),
        (_row(3, gap="nan"), "column 'HOMO_LUMO_gap_au' row 4"),
    ],
)
def test_a_malformed_row_is_named_by_column_and_row(tmp_path, bad: str, where: str) -> None:
    rows = [_row(i) for i in range(25)]
    rows[3] = bad
    with pytest.raises(QM9FormatError, match=where):
        check_qm9_csv(_csv(tmp_path, rows))


def test_a_missing_column_or_too_few_molecules_is_refused(tmp_path) -> None:
    path = tmp_path / "short.csv"
    path.write_text("Stoichiometry,XYZ_Ang,Polarizability_bohr3\n")
    with pytest.raises(QM9FormatError, match="column 'HOMO_LUMO_gap_au' is missing"):
        check_qm9_csv(path)
    with pytest.raises(QM9FormatError, match="at least 20"):
        check_qm9_csv(_csv(tmp_path, [_row(i) for i in range(5)]))
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(QM9FormatError, match="empty"):
        check_qm9_csv(empty)


def test_hostile_cells_are_refused_naming_column_and_row(tmp_path) -> None:
    """A cell nested 100k deep once escaped as RecursionError; a molecule of 10**6 atoms would need a 10**12
    pairwise-distance matrix."""
    rows = [_row(i) for i in range(25)]
    deep = tmp_path / "deep.csv"
    deep.write_text("\n".join([HEADER, *rows, '99,"' + "[" * 100_000 + '",[],1,1']) + "\n")
    with pytest.raises(QM9FormatError, match=r"column 'Stoichiometry' row 26 holds .*not a JSON list"):
        check_qm9_csv(deep)
    with pytest.raises(QM9FormatError, match=r"column 'Stoichiometry' row 26 counts 1000000 atoms"):
        check_qm9_csv(_csv(tmp_path, [*rows, _row(26, counts=(10**6, 0, 0, 0, 0), xyz=[])]))
