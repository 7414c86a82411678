"""CHAMP (competition math, 270 problems, 19,440 model-written solutions) as rows of a solutions file.

The file is ``dataset_files/v0.json`` of the ``champ-dataset`` package (MIT). Its ``problems`` map a problem id to
``_text`` (the statement), ``_answer`` (the reference answer, as text), ``conversations`` (key
``"<model>|<prompt setting>"``, each ``{"messages": [{role, text, error}, ...]}``) and ``fws_annotations``
(for some solutions: the first wrong step as a character span ``start_idx`` / ``end_idx`` into the solution;
both null when the annotator found no wrong step).

A conversation's **solution** is its first model message (role ``Model.<name>``; few-shot examples are
``Imputation`` messages); its **final answer message** is the last model message (usually the reply to "summarise
the answer in one sentence"; null when the solution hit the length limit).

**Reference** (`reference_answer`): ``_answer`` reduced to one gradable expression, or None when it has none
(the problem is then left out, and counted). ``X, or equivalently Y`` / ``X, or an equivalent form such as Y``
keep the last alternative that is an expression (math-verify cannot expand ``C(10, 5)``; ``252`` it reads);
``, or approximately ...`` and a trailing ``(i.e. ...)`` are dropped; ``Yes`` / ``No`` stay; a leading integer
followed by words (``98 values``, ``0 is the only possible value``) is that integer. An expression may hold
numbers, single letters, ``+-*/^()!.,[]`` and the functions ``sqrt``, ``floor``, ``ceil``, ``log``, ``ln``; words,
relations (``=``, ``<``, ``≥`` ...) and lists joined by ``and`` make the answer ungradable.

**Final answer** (`final_answer`) read from the final answer message, in order:

1. an ``answer: ...`` line or ``\\boxed{...}`` (`grading.extract_answer`);
2. ``Yes`` / ``No`` when the message starts with that word;
3. after a pivot outside LaTeX math, the first pivot that is followed by an answer: the words ``is``, ``are``,
   ``equals``, ``equal to`` (not ``or equal to``), ``be`` left to right, then ``=`` right to left. Filler words
   (``given by the expression``, ``always``, ...) are skipped; the answer is then a LaTeX math segment
   (``$...$``, ``\\(...\\)``, ``\\[...\\]``: its right-hand side after a last ``=``) or the leading expression
   (numbers, single letters, operators, the functions above; a word stops it; trailing ``.`` / ``,`` dropped);
4. else, when the message has no pivot at all, the last expression with a digit in it (LaTeX segments read as
   their content); else None.

Correct = `grade_champ(final answer, reference)`: `grading.grade` (plain integers exactly, else math-verify, 1 s
limit), with an expression in a free variable never equal to an integer reference (and Yes / No compared as
words). Solution text for the verifier: the solution's non-blank lines (one step each; the verifier's step
delimiter is the newline), the leading lines kept while they fit in ``max_chars`` characters (a line that does
not fit is cut), then the line ``answer: <final answer>`` when there is one (so the verifier sees the answer, as
in the synthetic format, and `grading.extract_answer` reads it back for majority vote).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

from components.reasoning.grading import as_integer, extract_answer, grade
from components.reasoning.solutions_file import SolutionRow

MODELS = ("GPT-3.5", "GPT-4", "GPT-4 Turbo", "PaLM 2 Medium")
SETTINGS = (
    "0-Shot",
    "5-Shot",
    "1/3 Soln",
    "2/3 Soln",
    "No C w/o H",
    "No C w/ H",
    "Direct C w/o H",
    "Direct C w/ H",
    "Root C w/o H",
    "Root C w/ H",
    "Name C w/o H",
    "Name C w/ H",
    "Example C w/o H",
    "Example C w/ H",
    "Problem C w/o H",
    "Problem C w/ H",
    "Misleading C w/o H",
    "Misleading C w/ H",
)
FUNCTIONS = ("sqrt", "floor", "ceil", "log", "ln")
_TOKEN = re.compile(r"[A-Za-z]+|\d+(?:\.\d+)?|\S")
_MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
_PIVOT = re.compile(r"\b(?:is|are|equals|(?<!or )equal to|be)\b|=", re.IGNORECASE)
FILLER = (
    "given",
    "by",
    "the",
    "expression",
    "formula",
    "always",
    "exactly",
    "just",
    "only",
    "simply",
    "equal",
    "to",
    "a",
    "an",
    "approximately",
    "then",
    "therefore",
    "thus",
)
_LEADING_INT = re.compile(r"^([+-]?\d+)\s+[A-Za-z]")


class ChampFormatError(ValueError):
    def __init__(self, path: str | Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = Path(path), problem


@dataclass(frozen=True)
class ChampSolution:
    """One model-written solution: its problem, model and prompt setting, the verifier text, the final answer
    read from the conversation, its grade, and the annotated first wrong step (character span into the raw
    solution) when the conversation has one (``annotated``; ``first_wrong`` None: no wrong step)."""

    problem: str
    model: str
    setting: str
    question: str
    solution: str
    reference: str
    predicted: str | None
    correct: bool
    annotated: bool
    first_wrong: tuple[int, int] | None


def default_path() -> Path | None:
    """``dataset_files/v0.json`` of the installed ``champ_dataset`` package (located without importing it), or
    None when the package is not installed."""
    spec = find_spec("champ_dataset")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "dataset_files" / "v0.json"


def _expression(tokens: Sequence[str]) -> str | None:
    """The leading run of expression tokens, joined with the text's spacing dropped, or None."""
    out: list[str] = []
    for tok in tokens:
        if tok.isalpha() and len(tok) > 1 and tok.lower() not in FUNCTIONS:
            break
        if not (tok.isalnum() or tok.replace(".", "").isdigit() or tok in "+-*/^()!.,[]_√"):
            break
        out.append(tok)
    text = "".join(out).rstrip(".,")
    while text.count("(") < text.count(")") and text.endswith(")"):
        text = text[:-1]
    return text if any(c.isalnum() for c in text) else None


def _is_expression(text: str) -> bool:
    if re.search(r"[=<>≤≥]|\band\b", text):
        return False
    tokens = _TOKEN.findall(text)
    return _expression(tokens) == "".join(tokens).rstrip(".,")


def reference_answer(answer: str) -> str | None:
    """``_answer`` as one gradable expression, Yes / No, or None (see the module docstring)."""
    text = re.sub(r",\s*or approximately .*$", "", answer.strip())
    text = re.sub(r"\s*\((?:i\.e\.|none)[^)]*\)\s*$", "", text).strip()
    if text.lower() in ("yes", "no"):
        return text.capitalize()
    parts = re.split(r",\s*or (?:equivalently|an equivalent form such as)\s+", text)
    for part in reversed(parts):
        part = part.strip()
        if _is_expression(part):
            return "".join(_TOKEN.findall(part))
    lead = _LEADING_INT.match(text)
    return lead.group(1) if lead and len(parts) == 1 and not re.search(r"\band\b|,", text) else None


def final_answer(message: str | None) -> str | None:
    """The final answer in a model's short final message (see the module docstring), or None."""
    if not message or not message.strip():
        return None
    found = extract_answer(message)
    if found:
        return found
    first = re.match(r"\s*(yes|no)\b", message, re.IGNORECASE)
    if first:
        return first.group(1).capitalize()
    masked = _MATH.sub(lambda m: "#" * len(m.group(0)), message)
    words = [m for m in _PIVOT.finditer(masked) if m.group(0) != "="]
    equals = [m for m in _PIVOT.finditer(masked) if m.group(0) == "="]
    for pivot in words + equals[::-1]:
        found = _after(message[pivot.end() :])
        if found:
            return found
    if words or equals:
        return None
    tokens = _TOKEN.findall(_MATH.sub(lambda m: " " + next(g for g in m.groups() if g) + " ", message))
    for start in range(len(tokens) - 1, -1, -1):  # the last expression in the message
        found = _expression(tokens[start:])
        if found and any(c.isdigit() for c in found) and (start == 0 or _expression(tokens[start - 1 :]) is None):
            return found
    return None


def _after(tail: str) -> str | None:
    """The answer right after a pivot: filler words skipped, then a LaTeX segment's right-hand side or the
    leading expression."""
    rest = tail.lstrip()
    while True:
        word = re.match(r"([A-Za-z]+)[\s:]+", rest)
        if not word or word.group(1).lower() not in FILLER:
            break
        rest = rest[word.end() :]
    math = _MATH.match(rest)
    if math:
        inner = next(g for g in math.groups() if g is not None)
        return inner.split("=")[-1].strip().rstrip(".,") or None
    return _expression(_TOKEN.findall(rest))


@cache
def grade_champ(predicted: str | None, reference: str) -> bool:
    """`grading.grade` with a 5 s math-verify limit, memoised; Yes / No match only themselves; an expression with a
    free variable (a letter other than a function name or ``C``) never equals an integer reference. The limit is
    ten times the slowest comparison seen (``n*(n-3)/2`` against ``n(n-3)/2``, 0.5 s on one free core): at 1 s a
    busy machine timed such comparisons out, so a grade depended on the machine's load."""
    if reference in ("Yes", "No") or predicted in ("Yes", "No"):
        return predicted == reference
    if (
        predicted is not None
        and as_integer(reference) is not None
        and any(tok.isalpha() and tok.lower() not in FUNCTIONS and tok != "C" for tok in _TOKEN.findall(predicted))
    ):
        return False
    return grade(predicted, reference, timeout_seconds=5)


def verifier_solution(raw: str, predicted: str | None, max_chars: int) -> str:
    """The solution's non-blank lines within ``max_chars`` characters, newlines counted (the last kept one cut to
    fit), then the answer line."""
    kept, used = [], 0
    for line in (s.strip() for s in raw.split("\n")):
        if not line:
            continue
        room = max_chars - used
        if room <= 0:
            break
        kept.append(line[:room].rstrip())
        used += min(len(line), room) + 1
    if predicted is not None:
        kept.append(f"answer: {predicted}")
    return "\n".join(kept) if kept else "answer: none"


def _field(record: Any, key: str, where: str, error, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(record, Mapping) or key not in record:
        raise error(f"{where} has no field '{key}'")
    value = record[key]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise error(f"{where} field '{key}' is a {type(value).__name__}; expected {names}")
    return value


def read_champ(
    path: str | Path, models: Sequence[str], settings: Sequence[str], max_chars: int, problems: int | None = None
) -> tuple[list[ChampSolution], dict[str, float]]:
    """Every gradable problem's solutions by ``models`` under ``settings``; a summary (problems kept and left
    out). ``problems``: keep that many gradable problems, evenly spaced over the file's order. The whole file is
    checked before anything is graded: a missing file, bad JSON, a missing or wrongly typed field raises
    :class:`ChampFormatError` naming the problem (and conversation) and the field."""
    path = Path(path)

    def error(problem: str) -> ChampFormatError:
        return ChampFormatError(path, problem)

    if not path.is_file():
        raise error("no such file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise error(f"not valid UTF-8 JSON ({type(err).__name__}: {err})") from None
    table = _field(data, "problems", "the top level", error, dict)
    wanted = [(m, s) for m in models for s in settings]
    parsed = []
    for pid, prob in table.items():
        where = f"problem '{pid}'"
        question = _field(prob, "_text", where, error, str)
        answer = _field(prob, "_answer", where, error, str)
        convs = _field(prob, "conversations", where, error, dict)
        fws = _field(prob, "fws_annotations", where, error, dict)
        texts = {}
        for key in (f"{m}|{s}" for m, s in wanted):
            if key not in convs:
                raise error(f"{where} field 'conversations' has no conversation '{key}'")
            messages = _field(convs[key], "messages", f"{where} conversation '{key}'", error, list)
            said = []
            for i, msg in enumerate(messages):
                role = _field(msg, "role", f"{where} conversation '{key}' message {i}", error, str)
                text = _field(msg, "text", f"{where} conversation '{key}' message {i}", error, (str, type(None)))
                if role.startswith("Model"):
                    said.append(text)
            if not said or not said[0]:
                raise error(f"{where} conversation '{key}' field 'messages' holds no model solution")
            span = None
            if key in fws:
                start = _field(fws[key], "start_idx", f"{where} annotation '{key}'", error, (int, type(None)))
                end = _field(fws[key], "end_idx", f"{where} annotation '{key}'", error, (int, type(None)))
                span = (key, None if start is None or end is None else (start, end))
            texts[key] = (said[0], said[-1] if len(said) > 1 else None, span)
        parsed.append((pid, question, answer, texts))
    gradable = [(p, q, r, t) for p, q, a, t in parsed if (r := reference_answer(a)) is not None]
    if problems is not None and problems < len(gradable):
        gradable = [gradable[int(i)] for i in np.linspace(0, len(gradable) - 1, problems).round()]
    rows = []
    for pid, question, ref, texts in gradable:
        for key, (raw, last, span) in texts.items():
            model, setting = key.split("|", 1)
            predicted = final_answer(last)
            rows.append(
                ChampSolution(
                    pid,
                    model,
                    setting,
                    question,
                    verifier_solution(raw, predicted, max_chars),
                    ref,
                    predicted,
                    grade_champ(predicted, ref),
                    span is not None,
                    span[1] if span else None,
                )
            )
    summary = {
        "problems_in_file": float(len(table)),
        "problems_gradable": float(sum(reference_answer(a) is not None for _, _, a, _ in parsed)),
        "problems_used": float(len(gradable)),
    }
    return rows, summary


def as_solution_rows(rows: Sequence[ChampSolution]) -> list[SolutionRow]:
    """The solutions-file rows (``line``: the index in ``rows``); the question text carries the problem id so
    problems with the same statement stay apart."""
    return [
        SolutionRow(i, f"[{r.problem}] {r.question}", r.solution, r.reference, r.correct) for i, r in enumerate(rows)
    ]


def model_summary(rows: Sequence[ChampSolution]) -> dict[str, dict[str, float | None]]:
    """Per model: solutions, graded accuracy, share with a final answer read, and against the first-wrong-step
    annotations: the share graded correct among annotated solutions with no wrong step (should be high) and
    among those with one (a right answer reached through a wrong step is possible, so it need not be 0)."""
    out = {}
    for model in dict.fromkeys(r.model for r in rows):
        mine = [r for r in rows if r.model == model]
        clean = [r.correct for r in mine if r.annotated and r.first_wrong is None]
        flawed = [r.correct for r in mine if r.annotated and r.first_wrong is not None]
        out[model] = {
            "solutions": float(len(mine)),
            "accuracy": float(np.mean([r.correct for r in mine])),
            "answered": float(np.mean([r.predicted is not None for r in mine])),
            "annotated_no_wrong_step": float(len(clean)),
            "graded_correct_no_wrong_step": float(np.mean(clean)) if clean else None,
            "annotated_wrong_step": float(len(flawed)),
            "graded_correct_wrong_step": float(np.mean(flawed)) if flawed else None,
        }
    return out
