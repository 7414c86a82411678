"""QM9 molecules from CSV files in qm9pack's columns, and a fixed-length descriptor of each molecule.

qm9pack ships QM9 (130,831 molecules) as three CSV parts. Of its columns this reader needs

    Stoichiometry         atom counts of [H, C, N, O, F], e.g. "[4,1,0,0,0]" for methane
    XYZ_Ang               coordinates in angstrom, "[[x, y, z], ...]", one triple per atom
    Polarizability_bohr3  isotropic polarizability alpha (Bohr^3)
    HOMO_LUMO_gap_au      HOMO-LUMO gap (Hartree)

The descriptor of a molecule (:data:`DESCRIPTOR_NAMES`) is its five element counts and three geometric
statistics of its atom positions: the radius of gyration (rms distance to the centroid), the mean and the
largest interatomic distance. Everything here is the standard library and numpy (no pandas, no torch),
so that :func:`check_qm9_csv` can run before any work starts. Error messages name the column and the
row (1-based, counting data rows) and quote a value only through :func:`components.io.quote_value`.
"""

from __future__ import annotations

import csv
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from components.io import package_path, parse_json, quote_value

__all__ = [
    "DESCRIPTOR_NAMES",
    "ELEMENTS",
    "PROPERTY_COLUMNS",
    "QM9FormatError",
    "check_qm9_csv",
    "descriptor",
    "qm9pack_files",
    "read_qm9",
]

ELEMENTS = ("H", "C", "N", "O", "F")
#: property name -> its qm9pack column.
PROPERTY_COLUMNS = {"alpha": "Polarizability_bohr3", "gap": "HOMO_LUMO_gap_au"}
REQUIRED = ("Stoichiometry", "XYZ_Ang", *PROPERTY_COLUMNS.values())
DESCRIPTOR_NAMES = tuple(f"n_{e}" for e in ELEMENTS) + ("radius_of_gyration", "mean_pair_distance", "max_pair_distance")
MIN_MOLECULES = 20
MAX_ATOMS = 500


class QM9FormatError(ValueError):
    """A QM9 CSV that is not in qm9pack's format; the message names the column and the row."""


def qm9pack_files() -> list[Path]:
    """The three CSV parts packaged by qm9pack (located without importing the package)."""
    parts = tuple(f"qm9_part{i}.csv" for i in (1, 2, 3))
    root = package_path("qm9pack", "data", distribution="qm9pack", needed_for="QM9", required=parts)
    return [root / name for name in parts]


def descriptor(counts: Sequence[int], xyz: np.ndarray) -> np.ndarray:
    """The 8 numbers of :data:`DESCRIPTOR_NAMES` for one molecule (``xyz [n_atoms, 3]`` in angstrom)."""
    xyz = np.asarray(xyz, dtype=np.float64)
    centred = xyz - xyz.mean(0)
    gyration = math.sqrt(float((centred**2).sum(1).mean()))
    if len(xyz) > 1:
        d = np.sqrt(((xyz[:, None, :] - xyz[None, :, :]) ** 2).sum(-1))[np.triu_indices(len(xyz), 1)]
        mean_d, max_d = float(d.mean()), float(d.max())
    else:
        mean_d = max_d = 0.0
    return np.array([*map(float, counts), gyration, mean_d, max_d])


def _rows(path: Path) -> tuple[dict[str, int], list[list[str]]]:
    csv.field_size_limit(sys.maxsize)
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                raise QM9FormatError(f"the file is empty; expected a CSV header with the columns {', '.join(REQUIRED)}")
            missing = [c for c in REQUIRED if c not in header]
            if missing:
                raise QM9FormatError(
                    f"column '{missing[0]}' is missing; a QM9 CSV needs the columns "
                    f"{', '.join(REQUIRED)} (qm9pack's names)"
                )
            index = {c: header.index(c) for c in REQUIRED}
            return index, [row for row in reader if row]
    except UnicodeDecodeError:
        raise QM9FormatError("the file is not UTF-8 text; expected a CSV in qm9pack's columns") from None
    except csv.Error as err:
        raise QM9FormatError(f"the file is not a readable CSV ({err})") from None


def _parse(row: list[str], index: dict[str, int], number: int) -> tuple[np.ndarray, dict[str, float]]:
    def cell(column: str) -> str:
        i = index[column]
        if i >= len(row):
            raise QM9FormatError(f"row {number} has no value in column '{column}'")
        return row[i]

    def json_list(column: str) -> list:
        text = cell(column)
        try:
            value = parse_json(text)  # nesting and integer size bounded: a hostile cell cannot recurse
        except ValueError:
            value = None
        if not isinstance(value, list):
            raise QM9FormatError(f"column '{column}' row {number} holds {quote_value(text)}, not a JSON list")
        return value

    counts = json_list("Stoichiometry")
    if len(counts) != len(ELEMENTS) or not all(isinstance(c, int) and c >= 0 for c in counts) or sum(counts) < 1:
        raise QM9FormatError(
            f"column 'Stoichiometry' row {number} must list {len(ELEMENTS)} non-negative atom "
            f"counts of {', '.join(ELEMENTS)} (at least one atom)"
        )
    if sum(counts) > MAX_ATOMS:  # the descriptor's pairwise distances grow with the square of the atoms
        raise QM9FormatError(
            f"column 'Stoichiometry' row {number} counts {sum(counts)} atoms; QM9 molecules have "
            f"at most 29 (at most {MAX_ATOMS} are read)"
        )
    xyz = json_list("XYZ_Ang")
    if len(xyz) != sum(counts) or not all(
        isinstance(a, list) and len(a) == 3 and all(isinstance(v, (int, float)) and math.isfinite(v) for v in a)
        for a in xyz
    ):
        raise QM9FormatError(
            f"column 'XYZ_Ang' row {number} must hold {sum(counts)} finite [x, y, z] triples, "
            "one per atom of its Stoichiometry"
        )
    props = {}
    for name, column in PROPERTY_COLUMNS.items():
        text = cell(column)
        try:
            props[name] = float(text)
        except ValueError:
            raise QM9FormatError(f"column '{column}' row {number} holds {quote_value(text)}, not a number") from None
        if not math.isfinite(props[name]):
            raise QM9FormatError(f"column '{column}' row {number} holds {quote_value(text)}; expected a finite number")
    return descriptor(counts, np.array(xyz)), props


def read_qm9(paths: Sequence[str | Path], n: int | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """Molecules of the CSV ``paths``: ``n`` rows drawn at random without replacement (all when ``n`` is None
    or at least the total).

    Returns:
        ``{"descriptors": [m, 8], "alpha": [m], "gap": [m]}`` (float64), in the order drawn.
    Raises:
        QM9FormatError naming the column and the row (``FileNotFoundError`` for a missing file).
    """
    parsed: list[tuple[dict[str, int], list[str], int, Path]] = []
    for path in map(Path, paths):
        index, rows = _rows(path)
        parsed += [(index, row, i + 1, path) for i, row in enumerate(rows)]
    if len(parsed) < MIN_MOLECULES:
        raise QM9FormatError(f"{len(parsed)} molecules; at least {MIN_MOLECULES} are needed")
    order = np.random.default_rng(seed).permutation(len(parsed))
    chosen = order if n is None or n >= len(parsed) else order[:n]
    desc, props = [], {name: [] for name in PROPERTY_COLUMNS}
    for k in chosen:
        index, row, number, path = parsed[k]
        try:
            d, p = _parse(row, index, number)
        except QM9FormatError as err:
            raise QM9FormatError(f"{path.name}: {err}" if len(paths) > 1 else str(err)) from None
        desc.append(d)
        for name in PROPERTY_COLUMNS:
            props[name].append(p[name])
    return {"descriptors": np.stack(desc), **{k: np.array(v) for k, v in props.items()}}


def check_qm9_csv(path: str | Path) -> int:
    """Validate a QM9 CSV as :func:`read_qm9` reads it (every row); returns the number of molecules.

    Raises ``ValueError`` whose message names the column and the row (not the path: the caller names it).
    """
    return len(read_qm9([path])["alpha"])
