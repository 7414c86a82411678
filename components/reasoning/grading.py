"""Final answers: read them from a solution's text and grade them against the reference.

`extract_answer` takes the last ``answer: ...`` line (case-insensitive), else the content of the last
``\\boxed{...}``, else None. `grade` compares plain integers exactly (commas allowed as thousands separators)
and anything else with math-verify (``verify(parse($gold$), parse($pred$))``: fractions, decimals, radicals and
expressions are equal when they are mathematically equal).
"""

from __future__ import annotations

import re

_ANSWER = re.compile(r"^\s*answer\s*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_INTEGER = re.compile(r"^[+-]?\d{1,3}(,\d{3})*$|^[+-]?\d+$")


def _last_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed{") - 1
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1 : j].strip() or None
    return None


def extract_answer(solution: str) -> str | None:
    """The final answer written in ``solution`` (see the module docstring), or None."""
    found = _ANSWER.findall(solution)
    if found:
        return found[-1].strip().rstrip(".") or None
    return _last_boxed(solution)


def as_integer(text: str) -> int | None:
    """``text`` as an int when it is a plain integer (``1,234`` included), else None."""
    text = text.strip()
    return int(text.replace(",", "")) if _INTEGER.match(text) else None


def grade(predicted: str | None, gold: str, timeout_seconds: int = 5) -> bool:
    """Whether ``predicted`` equals ``gold``: exactly for plain integers, by math-verify otherwise (parsing and
    comparison each give up after ``timeout_seconds``: not a match)."""
    if predicted is None or not predicted.strip():
        return False
    a, b = as_integer(predicted), as_integer(gold)
    if a is not None and b is not None:
        return a == b
    from math_verify import parse, verify  # sympy-based, slow to import: only for non-integer answers

    def wrap(text: str) -> str:
        text = text.strip()
        return text if text.startswith("$") else f"${text}$"

    try:
        return bool(
            verify(
                parse(wrap(gold), parsing_timeout=timeout_seconds),
                parse(wrap(predicted), parsing_timeout=timeout_seconds),
                timeout_seconds=timeout_seconds,
            )
        )
    except Exception:  # math-verify raises on text it cannot parse: such an answer is not a match
        return False
