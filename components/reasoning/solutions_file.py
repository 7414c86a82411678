"""A JSON Lines file of sampled solutions, one object per line: the verifiers' real-data format.

Fields: ``question`` (non-empty string), ``solution`` (non-empty string; lines separated by newlines, the
final answer as ``answer: ...`` or ``\\boxed{...}``), ``answer`` (the reference answer: a string or a number),
``correct`` (true / false, or 1 / 0: whether the solution's final answer is right). Rows of one question share
its exact ``question`` text. Blank lines are skipped; the file must be UTF-8 and hold at least two questions.
The first problem raises :class:`SolutionsFormatError` naming the file, the line (1-based) and the field; a
refused value is described by :func:`components.io.quote_value`, never quoted from the file.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

from components.io import json_field, json_text, quote_value, read_json_lines

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


def _finite(number: int | float) -> bool:
    """A finite float, or an int within the float range (the reader of JSON numbers refuses larger ones)."""
    return math.isfinite(number) if isinstance(number, float) else abs(number) <= sys.float_info.max


def read_solutions(path: str | Path) -> list[SolutionRow]:
    """Every row in file order (see the module docstring)."""
    path = Path(path)

    def error(problem: str) -> SolutionsFormatError:
        return SolutionsFormatError(path, problem)

    rows = []
    for number, record in read_json_lines(path, error):
        question = json_text(record, "question", number, error)
        solution = json_text(record, "solution", number, error)
        answer = json_field(record, "answer", number, error)
        if isinstance(answer, bool) or not (
            isinstance(answer, str) and answer.strip() or isinstance(answer, (int, float)) and _finite(answer)
        ):
            raise error(
                f"line {number} field 'answer' holds {quote_value(answer)}; expected a non-empty string "
                "or a finite number"
            )
        correct = json_field(record, "correct", number, error)
        if not (isinstance(correct, bool) or (isinstance(correct, int) and correct in (0, 1))):
            raise error(f"line {number} field 'correct' holds {quote_value(correct)}; expected true / false (or 1 / 0)")
        answer_text = (
            answer
            if isinstance(answer, str)
            else str(answer)
            if isinstance(answer, int)
            else str(int(answer))
            if answer.is_integer()
            else repr(answer)
        )
        rows.append(SolutionRow(number, question, solution, answer_text.strip(), bool(correct)))
    if len({r.question for r in rows}) < 2:
        raise error(
            f"the file holds {len({r.question for r in rows})} distinct question(s); expected at least 2 "
            "(some train the verifiers, the rest test them)"
        )
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
