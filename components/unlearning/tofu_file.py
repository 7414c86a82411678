"""Reading TOFU's question/answer files (``locuslab/TOFU`` on the Hugging Face hub) from local copies.

TOFU ships one file per split, JSON Lines despite the ``.json`` suffix (``.jsonl`` and a JSON list of objects
are accepted too). The rows this pipeline reads:

* forget file (e.g. ``forget10_perturbed.json``): every row has ``question``, ``answer``, ``paraphrased_answer``
  (strings) and ``perturbed_answer`` (a list of strings);
* retain file (e.g. ``retain_perturbed.json`` or ``retain90.json``): every row has ``question`` and ``answer``;
  rows that also have ``paraphrased_answer`` and ``perturbed_answer`` (both or neither) are the ones the retain
  truth ratio is computed on, and at least one row must have them.

Other keys (``paraphrased_question``, ...) are ignored. The whole file is checked before anything is
returned; the first problem raises :class:`TofuFormatError` naming the file, the row (1-based) and the field;
a value is described, never quoted (:func:`components.io.quote_value`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from components.io import JsonLimitError, json_lines_of, parse_json, quote_value

SUFFIXES = (".json", ".jsonl")
REQUIRED = ("question", "answer")
EVAL_FIELDS = ("paraphrased_answer", "perturbed_answer")


class TofuFormatError(ValueError):
    """A TOFU file is unreadable or a row lacks a field: the message names the file, row and field."""

    def __init__(self, path: str | Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = Path(path), problem


def _records(path: Path) -> list[Any]:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise TofuFormatError(path, f"not UTF-8 text at byte offset {err.start}, line {line}") from None
    if not text.strip():
        raise TofuFormatError(path, "the file holds no rows")
    if text.lstrip().startswith("["):
        try:
            return parse_json(text)
        except json.JSONDecodeError as err:
            raise TofuFormatError(path, f"not valid JSON (line {err.lineno}, column {err.colno})") from None
        except JsonLimitError as err:
            raise TofuFormatError(path, f"the JSON list {err}") from None
    records = []
    for number, line in enumerate(json_lines_of(text), start=1):
        if line.strip():
            try:
                records.append(parse_json(line))
            except json.JSONDecodeError as err:
                raise TofuFormatError(path, f"line {number} is not valid JSON (column {err.colno})") from None
            except JsonLimitError as err:
                raise TofuFormatError(path, f"line {number} {err}") from None
    return records


def _text(path: Path, row: int, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        shown = "missing" if value is None else f"{quote_value(value)}, not a non-empty string"
        raise TofuFormatError(path, f"row {row} field '{key}' is {shown}")
    return value


def read_tofu_file(path: str | Path, *, split: str) -> list[dict[str, Any]]:
    """Validate and read a TOFU file as rows ``{question, answer, paraphrased_answer, perturbed_answer, author,
    attribute, split}`` (``paraphrased_answer`` / ``perturbed_answer`` None on retain rows without them;
    ``author`` and ``attribute`` None: TOFU rows do not name them).

    Args:
        split: "forget" (every row needs the perturbed fields) or "retain".

    Raises:
        FileNotFoundError: no file at ``path``.
        TofuFormatError: wrong suffix, unreadable file, a row that is not an object, or a missing/ill-typed field.
    """
    if split not in ("forget", "retain"):
        raise ValueError(f"split must be 'forget' or 'retain', got {split!r}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such TOFU file")
    if path.suffix.lower() not in SUFFIXES:
        raise TofuFormatError(path, f"unsupported file type '{path.suffix}'; expected one of {SUFFIXES}")
    records = _records(path)
    if not isinstance(records, list) or not records:
        raise TofuFormatError(path, "expected a list of row objects")
    rows = []
    for number, record in enumerate(records, start=1):
        if not isinstance(record, dict):
            raise TofuFormatError(
                path,
                f"row {number} is a {type(record).__name__}, expected an object with keys {REQUIRED + EVAL_FIELDS}",
            )
        row: dict[str, Any] = {key: _text(path, number, key, record.get(key)) for key in REQUIRED}
        present = [key for key in EVAL_FIELDS if record.get(key) is not None]
        if split == "forget" or present:
            missing = [key for key in EVAL_FIELDS if key not in present]
            if missing:
                raise TofuFormatError(
                    path,
                    f"row {number} has no field '{missing[0]}'"
                    + (
                        " (forget rows need paraphrased and perturbed answers)"
                        if split == "forget"
                        else " (give both paraphrased_answer and perturbed_answer, or neither)"
                    ),
                )
            row["paraphrased_answer"] = _text(path, number, "paraphrased_answer", record["paraphrased_answer"])
            wrong = record["perturbed_answer"]
            if not isinstance(wrong, list) or not wrong:
                raise TofuFormatError(
                    path,
                    f"row {number} field 'perturbed_answer' is {quote_value(wrong)}, not a non-empty list of strings",
                )
            row["perturbed_answer"] = [_text(path, number, f"perturbed_answer[{i}]", w) for i, w in enumerate(wrong)]
        else:
            row["paraphrased_answer"], row["perturbed_answer"] = None, None
        rows.append({**row, "author": None, "attribute": None, "split": split})
    if split == "retain" and all(r["perturbed_answer"] is None for r in rows):
        raise TofuFormatError(
            path,
            "no row has paraphrased_answer and perturbed_answer; the retain truth ratio needs "
            "some (TOFU's retain_perturbed.json has them)",
        )
    return rows


def check_tofu_forget_file(path: Path) -> int:
    """The `DataFile` check of a TOFU forget file: rows read (raises TofuFormatError)."""
    return len(read_tofu_file(path, split="forget"))


def check_tofu_retain_file(path: Path) -> int:
    """The `DataFile` check of a TOFU retain file: rows read (raises TofuFormatError)."""
    return len(read_tofu_file(path, split="retain"))


def shared_rows(forget: list[dict[str, Any]], retain: list[dict[str, Any]]) -> tuple[int, int] | None:
    """``(forget row, retain row)`` (1-based) of the first retain row that repeats a forget row's question and
    answer, None when the two splits share none. Unlearning a QA that the retain split (and so the retain-only
    oracle) also trains on measures nothing: the up-front check of a run and stage ``benchmark`` refuse it."""
    seen = {(r["question"].strip(), r["answer"].strip()): i for i, r in enumerate(forget, start=1)}
    for j, row in enumerate(retain, start=1):
        i = seen.get((row["question"].strip(), row["answer"].strip()))
        if i is not None:
            return i, j
    return None


def overlap_problem(
    forget_path: str | Path, retain_path: str | Path, forget: list[dict[str, Any]], retain: list[dict[str, Any]]
) -> str | None:
    """The message for :func:`shared_rows` of the two files (None when they share no QA)."""
    shared = shared_rows(forget, retain)
    if shared is None:
        return None
    same = Path(forget_path).resolve() == Path(retain_path).resolve()
    return (
        f"row {shared[1]} of the retain file {retain_path} repeats the question and answer of row {shared[0]} of "
        f"the forget file {forget_path}"
        + (" (the same file)" if same else "")
        + "; the forget and retain splits must not share a QA (the retain-only oracle would learn it)"
    )
