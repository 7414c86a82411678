"""A JSON Lines file of sampled solutions, one object per line: the verifiers' real-data format.

Fields: ``question`` (non-empty string), ``solution`` (non-empty string; lines separated by newlines, the
final answer as ``answer: ...`` or ``\\boxed{...}``), ``answer`` (the reference answer: a string or a number),
``correct`` (true / false, or 1 / 0: whether the solution's final answer is right). Rows of one question share
its exact ``question`` text. Blank lines are skipped; the file must be UTF-8 and hold at least two questions.
The first problem raises :class:`SolutionsFormatError` naming the file, the line (1-based) and the field; a
refused value is described by :func:`components.io.quote_value`, never quoted from the file.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.io import quote_value

FIELDS = ("question", "solution", "answer", "correct")
SUFFIXES = (".jsonl", ".json")


class SolutionsFormatError(ValueError):
    def __init__(self, path: str | Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = Path(path), problem


@dataclass(frozen=True)
class SolutionRow:
    line: int
    question: str
    solution: str
    answer: str
    correct: bool


def _field(path: Path, number: int, record: dict[str, Any], name: str) -> Any:
    if name not in record:
        raise SolutionsFormatError(path, f"line {number} has no field '{name}' (fields found: "
                                   f"{', '.join(sorted(map(str, record))[:8]) or 'none'})")
    return record[name]


def _text(path: Path, number: int, record: dict[str, Any], name: str) -> str:
    value = _field(path, number, record, name)
    if not isinstance(value, str) or not value.strip():
        raise SolutionsFormatError(path, f"line {number} field '{name}' holds {quote_value(value)}; expected a "
                                   "non-empty string")
    return value


def read_solutions(path: str | Path) -> list[SolutionRow]:
    """Every row in file order (see the module docstring)."""
    path = Path(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise SolutionsFormatError(path, f"line {line} is not UTF-8 text (byte offset {err.start})") from None
    rows = []
    for number, raw in enumerate(text.removeprefix("\ufeff").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as err:
            raise SolutionsFormatError(path, f"line {number} is not a JSON object (column {err.colno}: "
                                       f"{err.msg})") from None
        if not isinstance(record, dict):
            raise SolutionsFormatError(path, f"line {number} holds a JSON {type(record).__name__}, expected an "
                                       "object")
        question, solution = _text(path, number, record, "question"), _text(path, number, record, "solution")
        answer = _field(path, number, record, "answer")
        if isinstance(answer, bool) or not (isinstance(answer, str) and answer.strip()
                                            or isinstance(answer, (int, float)) and math.isfinite(answer)):
            raise SolutionsFormatError(path, f"line {number} field 'answer' holds {quote_value(answer)}; expected "
                                       "a non-empty string or a finite number")
        correct = _field(path, number, record, "correct")
        if not (isinstance(correct, bool) or (isinstance(correct, int) and correct in (0, 1))):
            raise SolutionsFormatError(path, f"line {number} field 'correct' holds {quote_value(correct)}; expected "
                                       "true / false (or 1 / 0)")
        answer_text = answer if isinstance(answer, str) else (str(int(answer)) if float(answer).is_integer()
                                                              else repr(answer))
        rows.append(SolutionRow(number, question, solution, answer_text.strip(), bool(correct)))
    if len({r.question for r in rows}) < 2:
        raise SolutionsFormatError(path, f"the file holds {len({r.question for r in rows})} distinct question(s); "
                                   "expected at least 2 (some train the verifiers, the rest test them)")
    return rows


def check_solutions_file(path: str | Path) -> int:
    """Validate a solutions file as :func:`read_solutions` reads it; the number of rows. The ``ValueError``
    names the line and the field (the caller names the file)."""
    if Path(path).suffix.lower() not in SUFFIXES:
        raise ValueError(f"expected a JSON Lines file ending in one of {SUFFIXES}, got '{Path(path).suffix}'")
    try:
        return len(read_solutions(path))
    except SolutionsFormatError as err:
        raise ValueError(err.problem) from None
