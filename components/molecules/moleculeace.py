"""MoleculeACE's data: its 30 ChEMBL targets, its CSV format, its tuned hyperparameters, its published results.

The CSV format (one file per target, shipped inside the ``moleculeace`` wheel under
``MoleculeACE/Data/benchmark_data/<target>.csv``; any user file in the same columns is read the same way):

* ``smiles``: a SMILES string RDKit reads (non-empty);
* ``exp_mean [nM]``: the potency (Ki or EC50) in nM, finite and > 0;
* ``y``: the label, ``-log10(exp_mean [nM])`` (so pKi = y + 9); checked against ``exp_mean [nM]`` within
  :data:`LABEL_TOLERANCE` so that a file in another convention (pKi, or +log10 nM) is refused, not learned;
* ``cliff_mol``: 0 or 1;
* ``split``: ``train`` or ``test``.

Extra columns (newer MoleculeACE releases add pKi / pEC50) are allowed and ignored. The reader checks the
whole file before returning and refuses the first problem with :class:`MoleculeAceFormatError`, naming the
file, the 1-based data row, its line and the column; a refused value is quoted only when it is a number,
never the file's text (:func:`components.io.quote_value`). The reader needs only the standard library and
RDKit (no pandas, no torch), so it also serves as the ``DataFile`` check run before any work.

The package is installed with ``--no-deps`` and never imported (its ``__init__`` pulls torch_geometric and
tensorflow): files are found with :func:`components.io.package_path`.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from components.io import package_path, quote_value

TARGETS = (
    "CHEMBL1862_Ki",
    "CHEMBL1871_Ki",
    "CHEMBL2034_Ki",
    "CHEMBL2047_EC50",
    "CHEMBL204_Ki",
    "CHEMBL2147_Ki",
    "CHEMBL214_Ki",
    "CHEMBL218_EC50",
    "CHEMBL219_Ki",
    "CHEMBL228_Ki",
    "CHEMBL231_Ki",
    "CHEMBL233_Ki",
    "CHEMBL234_Ki",
    "CHEMBL235_EC50",
    "CHEMBL236_Ki",
    "CHEMBL237_EC50",
    "CHEMBL237_Ki",
    "CHEMBL238_Ki",
    "CHEMBL239_EC50",
    "CHEMBL244_Ki",
    "CHEMBL262_Ki",
    "CHEMBL264_Ki",
    "CHEMBL2835_Ki",
    "CHEMBL287_Ki",
    "CHEMBL2971_Ki",
    "CHEMBL3979_EC50",
    "CHEMBL4005_Ki",
    "CHEMBL4203_Ki",
    "CHEMBL4616_EC50",
    "CHEMBL4792_Ki",
)
COLUMNS = ("smiles", "exp_mean [nM]", "y", "cliff_mol", "split")
SPLITS = ("train", "test")
LABEL_TOLERANCE = 0.01  # |y + log10(exp_mean [nM])| allowed (values written rounded to 2 decimals pass)
RESULTS_CSV = Path(__file__).parent / "data" / "MoleculeACE_results.csv"
_PACKAGE = {"distribution": "moleculeace==3.0.0", "needed_for": "the MoleculeACE benchmark"}


class MoleculeAceFormatError(ValueError):
    """The CSV is unreadable or a row is malformed: ``problem`` says where (row, line, column)."""

    def __init__(self, path: str | Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = Path(path), problem


@dataclass(frozen=True)
class MoleculeSet:
    """One MoleculeACE dataset, rows in file order."""

    name: str
    smiles: tuple[str, ...]
    potency_nm: np.ndarray  # [N] float64, exp_mean [nM]
    y: np.ndarray  # [N] float64, -log10(nM)
    cliff_mol: np.ndarray  # [N] int64, 0/1 as given
    split: np.ndarray  # [N] str, train/test

    @property
    def train(self) -> np.ndarray:
        """Row indices of the training molecules."""
        return np.flatnonzero(self.split == "train")

    @property
    def test(self) -> np.ndarray:
        """Row indices of the test molecules."""
        return np.flatnonzero(self.split == "test")

    def __len__(self) -> int:
        return len(self.smiles)


def benchmark_csv(target: str) -> Path:
    """The packaged CSV of one of the 30 targets."""
    if target not in TARGETS:
        raise ValueError(f"unknown MoleculeACE target {target!r}; known: {', '.join(TARGETS)}")
    return package_path("MoleculeACE", f"Data/benchmark_data/{target}.csv", **_PACKAGE)


def tuned_hyperparameters(target: str, model: str = "SVM", descriptor: str = "ECFP") -> dict[str, Any]:
    """MoleculeACE's tuned hyperparameters of ``model`` + ``descriptor`` on ``target`` (the wheel's
    ``Data/configures/benchmark/<target>/<model>_<descriptor>.yml``), e.g. ``{C: 10, epsilon: 0.1, gamma: 0.01,
    kernel: rbf}`` for SVM + ECFP."""
    import yaml

    if target not in TARGETS:
        raise ValueError(f"unknown MoleculeACE target {target!r}")
    path = package_path("MoleculeACE", f"Data/configures/benchmark/{target}/{model}_{descriptor}.yml", **_PACKAGE)
    found = yaml.safe_load(path.read_text())
    if not isinstance(found, dict):
        raise ValueError(f"{path}: expected a mapping of hyperparameters")
    return found


def published_results(path: Path = RESULTS_CSV) -> dict[tuple[str, str, str], tuple[float, float]]:
    """``{(dataset, algorithm, descriptor): (rmse, cliff_rmse)}`` of MoleculeACE's results table, the rows without
    SMILES augmentation: 21 method/descriptor pairs x 30 targets (its three SMILES models, published only with
    10x augmentation, are left out)."""
    out = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["augmentation"] == "0":
                out[(row["dataset"], row["algorithm"], row["descriptor"])] = (
                    float(row["rmse"]),
                    float(row["cliff_rmse"]),
                )
    return out


# --------------------------------------------------------------------------------------------------
# the CSV reader (and the check that runs before any work)
# --------------------------------------------------------------------------------------------------
def _text(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise MoleculeAceFormatError(
            path, f"not UTF-8 text at byte offset {err.start}, line {line}; save it as UTF-8 CSV"
        ) from None


def _number(path: Path, where: str, column: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise MoleculeAceFormatError(
            path, f"{where}: column '{column}' holds {quote_value(value)}, not a number"
        ) from None
    if not math.isfinite(number):
        raise MoleculeAceFormatError(
            path, f"{where}: column '{column}' holds {quote_value(value)}, not a finite number"
        )
    return number


def read_moleculeace_csv(path: str | Path, name: str | None = None) -> MoleculeSet:
    """Read and check a CSV in MoleculeACE's columns (module docstring); ``name`` defaults to the file stem."""
    from components.molecules.featurize import InvalidSmilesError, parse_smiles

    path = Path(path)
    text = _text(path)
    if not text.strip():
        raise MoleculeAceFormatError(path, f"the file is empty; expected a header with columns {list(COLUMNS)}")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = reader.fieldnames or []
    except csv.Error as err:  # e.g. a field beyond the csv module's size limit in the first line
        raise MoleculeAceFormatError(path, f"not a readable CSV file (line {reader.line_num}: {err})") from None
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise MoleculeAceFormatError(path, f"missing column(s) {missing}; MoleculeACE's columns are {list(COLUMNS)}")
    smiles, potency, y, cliff, split, lines = [], [], [], [], [], []
    try:
        for number, row in enumerate(reader, start=1):
            where = f"row {number} (line {reader.line_num})"
            if None in row or any(row[c] is None for c in COLUMNS):
                raise MoleculeAceFormatError(path, f"{where}: expected {len(header)} fields, got a different number")
            smiles.append(row["smiles"].strip())
            nm = _number(path, where, "exp_mean [nM]", row["exp_mean [nM]"])
            if nm <= 0:
                raise MoleculeAceFormatError(
                    path, f"{where}: column 'exp_mean [nM]' is {quote_value(nm)}; a potency in nM must be > 0"
                )
            label = _number(path, where, "y", row["y"])
            if abs(label + math.log10(nm)) > LABEL_TOLERANCE:
                raise MoleculeAceFormatError(
                    path,
                    f"{where}: column 'y' is {label:.4g} but -log10(exp_mean [nM]) "
                    f"is {-math.log10(nm):.4g}; MoleculeACE's label is -log10 of the nM "
                    "value (pKi = y + 9)",
                )
            flag = _number(path, where, "cliff_mol", row["cliff_mol"])
            if flag not in (0.0, 1.0):
                raise MoleculeAceFormatError(
                    path, f"{where}: column 'cliff_mol' is {quote_value(flag)}; expected 0 or 1"
                )
            part = row["split"].strip().lower()
            if part not in SPLITS:
                raise MoleculeAceFormatError(
                    path, f"{where}: column 'split' holds {quote_value(row['split'])}; expected one of {list(SPLITS)}"
                )
            potency.append(nm), y.append(label), cliff.append(int(flag)), split.append(part)
            lines.append(reader.line_num)
    except csv.Error as err:
        raise MoleculeAceFormatError(path, f"not a readable CSV file (line {reader.line_num}: {err})") from None
    try:
        parse_smiles(smiles)
    except InvalidSmilesError as err:
        raise MoleculeAceFormatError(
            path, f"row {err.index + 1} (line {lines[err.index]}): column 'smiles': {err.problem}"
        ) from None
    counts = {s: split.count(s) for s in SPLITS}
    if counts["train"] < 2 or counts["test"] < 1:
        raise MoleculeAceFormatError(
            path,
            f"needs at least 2 training and 1 test molecule, found "
            f"{counts['train']} and {counts['test']} (column 'split')",
        )
    return MoleculeSet(
        name=name or path.stem,
        smiles=tuple(smiles),
        potency_nm=np.asarray(potency),
        y=np.asarray(y),
        cliff_mol=np.asarray(cliff, dtype=np.int64),
        split=np.asarray(split),
    )


def check_moleculeace_csv(path: Path) -> None:
    """The ``DataFile`` check of ``data.csv_path``: read the whole file as :func:`read_moleculeace_csv` does."""
    read_moleculeace_csv(path)
