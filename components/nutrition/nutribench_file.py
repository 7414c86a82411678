"""Reading the real NutriBench data (``dongx1997/NutriBench`` on the Hugging Face hub) from a local file.

Accepted formats: CSV (``.csv``), Parquet (``.parquet``) and JSON Lines (``.jsonl``; also ``.json`` holding
one object per line or one list of objects), with the dataset card's columns:

* ``meal_description`` (string, required, non-empty)
* ``carb`` (number, g, required, finite and >= 0)
* ``fat``, ``protein`` (g), ``energy`` (kcal): optional numbers >= 0, empty cells allowed
* ``country``, ``serving_type`` (natural | metric), ``meal_id``: optional strings

The whole file is checked before anything is returned; the first problem raises
:class:`NutribenchFormatError` naming the file, the column, and the row (1-based data row) and value.
Rows come back in the curated table's columns (see :mod:`components.nutrition.curation`), with
``source`` = the file name, ``n_items`` null and ``items`` "[]" (the real data has no item breakdown).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

REQUIRED = ("meal_description", "carb")
OPTIONAL_NUMBERS = ("protein", "fat", "energy")
OPTIONAL_STRINGS = ("country", "serving_type", "meal_id")
SUFFIXES = (".csv", ".parquet", ".jsonl", ".json")


class NutribenchFormatError(ValueError):
    """The NutriBench file is unreadable or a column is missing or malformed."""


def _read_records(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        import pandas as pd

        if path.stat().st_size == 0:
            return []
        try:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as err:
            raise NutribenchFormatError(f"{path}: not a readable CSV file ({err})") from None
        return frame.to_dict("records")
    if suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            return pq.read_table(path).to_pylist()
        except (pa.ArrowException, OSError) as err:
            raise NutribenchFormatError(f"{path}: not a readable Parquet file ({err})") from None
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        return []
    if suffix == ".json" and text.lstrip().startswith("["):
        try:
            records = json.loads(text)
        except json.JSONDecodeError as err:
            raise NutribenchFormatError(f"{path}: not valid JSON ({err})") from None
    else:
        records = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise NutribenchFormatError(f"{path}: line {number} is not valid JSON ({err})") from None
    for number, record in enumerate(records, start=1):
        if not isinstance(record, dict):
            raise NutribenchFormatError(f"{path}: record {number} is a {type(record).__name__}, expected an object "
                                        "with keys meal_description, carb, ...")
    return records


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or (
        isinstance(value, float) and math.isnan(value))


def _as_number(path: Path, column: str, row: int, value: Any, required: bool) -> float | None:
    if _missing(value):
        if required:
            raise NutribenchFormatError(f"{path}: column '{column}' is empty in row {row}; expected a number of "
                                        "grams >= 0")
        return None
    if isinstance(value, bool):
        raise NutribenchFormatError(f"{path}: column '{column}' row {row} holds {value!r}, not a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise NutribenchFormatError(f"{path}: column '{column}' row {row} holds {value!r}, not a number") from None
    if not math.isfinite(number) or number < 0:
        raise NutribenchFormatError(f"{path}: column '{column}' row {row} holds {value!r}; expected a finite "
                                    "number >= 0")
    return number


def read_nutribench_file(path: str | Path, eval_share: float = 0.25, seed: int = 0) -> list[dict[str, Any]]:
    """Validate and read a NutriBench file; rows get a seeded train/eval ``split`` like curated meals.

    Raises:
        FileNotFoundError: no file at ``path``.
        NutribenchFormatError: unsupported suffix, unreadable or empty file, a missing required column,
            or a bad value (the message names the file, the column and the row).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such NutriBench file")
    if path.suffix.lower() not in SUFFIXES:
        raise NutribenchFormatError(f"{path}: unsupported file type '{path.suffix}'; expected one of {SUFFIXES}")
    records = _read_records(path)
    if not records:
        raise NutribenchFormatError(f"{path}: the file holds no meals (expected columns {REQUIRED})")
    columns = set().union(*(r.keys() for r in records))
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise NutribenchFormatError(f"{path}: missing required column(s) {missing}; found {sorted(columns)}")
    rows = []
    for number, record in enumerate(records, start=1):
        description = record.get("meal_description")
        if not isinstance(description, str) or not description.strip():
            raise NutribenchFormatError(f"{path}: column 'meal_description' row {number} holds {description!r}; "
                                        "expected a non-empty string")
        values = {"carb": _as_number(path, "carb", number, record.get("carb"), required=True)}
        for column in OPTIONAL_NUMBERS:
            values[column] = _as_number(path, column, number, record.get(column), required=False)
        serving = record.get("serving_type")
        serving = "unspecified" if _missing(serving) else str(serving).strip().lower()
        if serving not in ("natural", "metric", "unspecified"):
            raise NutribenchFormatError(f"{path}: column 'serving_type' row {number} holds {serving!r}; expected "
                                        "'natural' or 'metric'")
        meal_id = record.get("meal_id")
        country = record.get("country")
        rows.append({
            "meal_id": f"row-{number:06d}" if _missing(meal_id) else str(meal_id),
            "meal_description": description.strip(),
            **values,
            "country": "unspecified" if _missing(country) else str(country),
            "source": path.name,
            "serving_type": serving,
            "n_items": None,
            "items": "[]",
        })
    ids = [r["meal_id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise NutribenchFormatError(f"{path}: column 'meal_id' has repeated values")
    n_eval = max(1, round(eval_share * len(rows))) if len(rows) > 1 else 0
    eval_rows = set(np.random.default_rng(seed).permutation(len(rows))[:n_eval].tolist())
    for i, row in enumerate(rows):
        row["split"] = "eval" if i in eval_rows else "train"
    return rows
