"""Reading the real NutriBench data (``dongx1997/NutriBench`` on the Hugging Face hub) from a local file.

Accepted formats: CSV (``.csv``), Parquet (``.parquet``) and JSON Lines (``.jsonl``; also ``.json`` holding
one object per line or one list of objects), with the dataset card's columns:

* ``meal_description`` (string, required, non-empty)
* ``carb`` (number, g, required, finite and >= 0)
* ``fat``, ``protein`` (g), ``energy`` (kcal): optional numbers >= 0, empty cells allowed
* ``country``, ``serving_type`` (natural | metric), ``meal_id``: optional strings; ``meal_id`` values
  must be unique (a repeat is reported with the repeated ids and their rows)

NutriBench v1 files (header ``meal_description,carb,protein,fat,energy``) have no ``serving_type``
column; the split is in the file name instead (``wweia_meal_natural.csv``, ``wweia_meal_metric.csv``),
so a row without a serving type takes the one the file name states (:func:`serving_type_from_name`),
or ``unspecified`` when the name states neither. Text must be UTF-8 (a byte-order mark is accepted); a
file that is not is refused with the byte offset and line of the first undecodable byte.

The whole file is checked before anything is returned; the first problem raises
:class:`NutribenchFormatError` naming the file, the column and the row (1-based data row); a refused number
is quoted, never the file's text (:func:`components.io.quote_value`). A file needs at least two meals: one
to evaluate on, the others to fit the baselines.
Rows come back in the curated table's columns (see :mod:`components.nutrition.curation`), with
``source`` = the file name, ``n_items`` null and ``items`` "[]" (the real data has no item breakdown).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from components.io import JsonLimitError, json_lines_of, parse_json, quote_value

REQUIRED = ("meal_description", "carb")
OPTIONAL_NUMBERS = ("protein", "fat", "energy")
OPTIONAL_STRINGS = ("country", "serving_type", "meal_id")
SUFFIXES = (".csv", ".parquet", ".jsonl", ".json")


class NutribenchFormatError(ValueError):
    """The NutriBench file is unreadable or a column is missing or malformed: ``problem`` says where."""

    def __init__(self, path: str | Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = Path(path), problem


def _not_utf8(data: bytes) -> str | None:
    """Where ``data`` stops being UTF-8: ``"byte offset N, line L"`` (offset 0-based, line 1-based), or None."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        return f"byte offset {err.start}, line {line}"
    return None


def _parquet_records(path: Path) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as err:
        raise NutribenchFormatError(path, f"not a readable Parquet file ({err})") from None
    try:
        return table.to_pylist()
    except UnicodeDecodeError:
        pass
    for name in table.column_names:  # a string column holding bytes that are not UTF-8: find the cell
        column = table.column(name)
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            continue
        for number, cell in enumerate(column.cast(pa.large_binary()).to_pylist(), start=1):
            if cell is not None and _not_utf8(cell) is not None:
                raise NutribenchFormatError(
                    path, f"column '{name}' row {number} is not UTF-8 text; write the file's strings as UTF-8"
                )
    raise NutribenchFormatError(path, "a string column is not UTF-8 text")


def _read_records(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        import pandas as pd

        if path.stat().st_size == 0:
            return []
        try:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        except (pd.errors.EmptyDataError, pd.errors.ParserError) as err:
            raise NutribenchFormatError(path, f"not a readable CSV file ({str(err).strip()})") from None
        except UnicodeDecodeError as err:
            where = _not_utf8(path.read_bytes())
            problem = f"not UTF-8 text at {where}; save it as UTF-8" if where else str(err)
            raise NutribenchFormatError(path, f"not a readable CSV file ({problem})") from None
        return frame.to_dict("records")
    if suffix == ".parquet":
        return _parquet_records(path)
    data = path.read_bytes()
    where = _not_utf8(data)
    if where is not None:
        raise NutribenchFormatError(path, f"not UTF-8 text at {where}; save it as UTF-8")
    text = data.decode("utf-8-sig")  # a leading byte-order mark is dropped
    if not text.strip():
        return []
    if suffix == ".json" and text.lstrip().startswith("["):
        try:
            records = parse_json(text)
        except json.JSONDecodeError as err:
            raise NutribenchFormatError(path, f"not valid JSON ({err})") from None
        except JsonLimitError as err:
            raise NutribenchFormatError(path, f"the JSON list {err}") from None
    else:
        records = []
        for number, line in enumerate(json_lines_of(text), start=1):
            if not line.strip():
                continue
            try:
                records.append(parse_json(line))
            except json.JSONDecodeError as err:
                raise NutribenchFormatError(path, f"line {number} is not valid JSON ({err})") from None
            except JsonLimitError as err:
                raise NutribenchFormatError(path, f"line {number} {err}") from None
    for number, record in enumerate(records, start=1):
        if not isinstance(record, dict):
            raise NutribenchFormatError(
                path,
                f"record {number} is a {type(record).__name__}, expected an object "
                "with keys meal_description, carb, ...",
            )
    return records


def _missing(value: Any) -> bool:
    return (
        value is None
        or (isinstance(value, str) and not value.strip())
        or (isinstance(value, float) and math.isnan(value))
    )


def _as_number(path: Path, column: str, row: int, value: Any, required: bool) -> float | None:
    if _missing(value):
        if required:
            raise NutribenchFormatError(
                path, f"column '{column}' is empty in row {row}; expected a number of grams >= 0"
            )
        return None
    if isinstance(value, bool):
        raise NutribenchFormatError(path, f"column '{column}' row {row} holds {quote_value(value)}, not a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise NutribenchFormatError(
            path, f"column '{column}' row {row} holds {quote_value(value)}, not a number"
        ) from None
    if not math.isfinite(number) or number < 0:
        raise NutribenchFormatError(
            path, f"column '{column}' row {row} holds {quote_value(value)}; expected a finite number >= 0"
        )
    return number


def serving_type_from_name(path: str | Path) -> str:
    """The serving type a file name states: ``natural`` for ``wweia_meal_natural.csv``, ``metric`` for
    ``..._metric.parquet``, else ``unspecified`` (also when the name says both)."""
    said = set(re.findall(r"(?<![a-z])(natural|metric)(?![a-z])", Path(path).stem.lower()))
    return said.pop() if len(said) == 1 else "unspecified"


def _check_unique_ids(path: Path, ids: list[str], shown: int = 5) -> None:
    rows_of: dict[str, list[int]] = {}
    for number, meal_id in enumerate(ids, start=1):
        rows_of.setdefault(meal_id, []).append(number)
    repeated = [(meal_id, rows) for meal_id, rows in rows_of.items() if len(rows) > 1]
    if not repeated:
        return
    repeated.sort(key=lambda pair: pair[1][1])
    first_id, first_rows = repeated[0]
    listed = "; ".join(
        f"{quote_value(meal_id)} in rows {', '.join(map(str, rows))}" for meal_id, rows in repeated[:shown]
    )
    more = f"; and {len(repeated) - shown} more" if len(repeated) > shown else ""
    raise NutribenchFormatError(
        path,
        f"column 'meal_id' row {first_rows[1]} repeats the id of row {first_rows[0]}; "
        f"{len(repeated)} id(s) repeat: {listed}{more}",
    )


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
        raise NutribenchFormatError(path, f"unsupported file type '{path.suffix}'; expected one of {SUFFIXES}")
    records = _read_records(path)
    if not records:
        raise NutribenchFormatError(path, f"the file holds no meals (expected columns {REQUIRED})")
    columns = set().union(*(r.keys() for r in records))
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise NutribenchFormatError(
            path, f"missing required column(s) {missing} among the {len(columns)} column(s) of its header"
        )
    default_serving = serving_type_from_name(path)
    rows = []
    for number, record in enumerate(records, start=1):
        description = record.get("meal_description")
        if not isinstance(description, str) or not description.strip():
            raise NutribenchFormatError(
                path,
                f"column 'meal_description' row {number} holds {quote_value(description)}; expected a non-empty string",
            )
        values = {"carb": _as_number(path, "carb", number, record.get("carb"), required=True)}
        for column in OPTIONAL_NUMBERS:
            values[column] = _as_number(path, column, number, record.get(column), required=False)
        serving = record.get("serving_type")
        serving = default_serving if _missing(serving) else str(serving).strip().lower()
        if serving not in ("natural", "metric", "unspecified"):
            raise NutribenchFormatError(
                path, f"column 'serving_type' row {number} holds {quote_value(serving)}; expected 'natural' or 'metric'"
            )
        meal_id = record.get("meal_id")
        country = record.get("country")
        rows.append(
            {
                "meal_id": f"row-{number:06d}" if _missing(meal_id) else str(meal_id),
                "meal_description": description.strip(),
                **values,
                "country": "unspecified" if _missing(country) else str(country),
                "source": path.name,
                "serving_type": serving,
                "n_items": None,
                "items": "[]",
            }
        )
    _check_unique_ids(path, [row["meal_id"] for row in rows])
    if len(rows) < 2:
        raise NutribenchFormatError(
            path,
            f"the file holds {len(rows)} meal; at least 2 meals are needed (one to "
            "evaluate on, the others to fit the baselines)",
        )
    n_eval = max(1, round(eval_share * len(rows)))
    eval_rows = set(np.random.default_rng(seed).permutation(len(rows))[:n_eval].tolist())
    for i, row in enumerate(rows):
        row["split"] = "eval" if i in eval_rows else "train"
    return rows


def check_nutribench_file(path: str | Path) -> int:
    """Validate a NutriBench file as :func:`read_nutribench_file` reads it; returns the number of meals.

    Raises ``ValueError`` (or ``FileNotFoundError``) whose message names the column, the row and the
    offending value only (not the path: the caller names the file).
    """
    try:
        return len(read_nutribench_file(path))
    except NutribenchFormatError as err:
        raise ValueError(err.problem) from None
