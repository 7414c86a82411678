"""The CHAMP reader: reference answers reduced to one expression, final answers read from real final messages
(LaTeX fractions included), grading of known-right and known-wrong solutions, the verifier text, and a malformed
file refused with the problem and the field named."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

from components.reasoning.champ import (
    ChampFormatError,
    as_solution_rows,
    default_path,
    final_answer,
    grade_champ,
    model_summary,
    read_champ,
    reference_answer,
    verifier_solution,
)

FILE = default_path()
pytestmark = pytest.mark.skipif(FILE is None, reason="champ-dataset is not installed")


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("239", "239"),
        ("C(10, 5), or equivalently 252", "252"),  # math-verify cannot expand C(10, 5)
        ("5/14, or approximately 35.7%", "5/14"),
        ("sqrt(3)/3, or equivalently 1/sqrt(3)", "1/sqrt(3)"),
        ("sum_(i=1)^n i^2, or equivalently n(n+1)(2n+1)/6", "n(n+1)(2n+1)/6"),
        ("100 (i.e., all values)", "100"),
        ("0 is the only possible value", "0"),
        ("98 values", "98"),
        ("No", "No"),
        ("2^floor(n/2)*floor(n/2)!", "2^floor(n/2)*floor(n/2)!"),
        ("376 and 625", None),
        ("x=6, y=5", None),
        ("The limit exists and is equal to 3", None),
        ("x(n)<y(n-1) for all n≥3", None),
        ("At least 1 number", None),
    ],
)
def test_reference_answers(answer: str, expected: str | None) -> None:
    assert reference_answer(answer) == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "There are 239 strings of length 6 consisting of the digits 1, 2, and 3, where adjacent digits differ by "
            "less than or equal to 1.",
            "239",
        ),
        ("The number of permutations that satisfy the given condition for n = 10 is 512.", "512"),
        ("The largest value of (a^2 + b^2 + c^2)/(ab + ac + bc) is 2.", "2"),
        (
            "The number of diagonals in a convex polygon with n vertices is given by the expression n(n-3)/2.",
            "n(n-3)/2",
        ),
        (
            "The smallest value of the expression (a^2 + b^2) / (a + b)^2 for positive a, b is 1/2, and this value is "
            "achieved when a = b.",
            "1/2",
        ),
        (
            "There are 240 ways to distribute the three toys among four boys and six girls such that at least two boys "
            "are selected.",
            "240",
        ),
        ("The expansion of (x+y+z)^1999 will have 2,001,000 terms.", "2,001,000"),
        (
            "The number of strings of length 6 that end in 1, 2, or 3, with adjacent digits differing by less than or "
            "equal to 1, is $\\frac{27}{16}$.",
            "\\frac{27}{16}",
        ),
        ("There are $\\frac{10!}{(10-5)!} = 2520$ strings of length 5 using the digits {0, 1, ..., 9}.", "2520"),
        ("No, n+2 cannot be a factor of 1^1987+2^1987+...+n^1987 for any n.", "No"),
        ("So the final answer is \\boxed{\\frac{5}{14}}.", "\\frac{5}{14}"),
        ("The expression 385^1980 + 18^1980 is not a perfect square.", None),
        (None, None),
        ("", None),
    ],
)
def test_final_answers_from_real_final_messages(message: str | None, expected: str | None) -> None:
    assert final_answer(message) == expected


def test_grading() -> None:
    assert grade_champ("\\frac{27}{16}", "239") is False
    assert grade_champ("\\frac{5}{14}", "5/14") and grade_champ("n*(n-3)/2", "n(n-3)/2")
    assert grade_champ("2,001,000", "2001000") and grade_champ("0.5", "1/2")
    assert grade_champ("n*(n-1)/2", "10") is False  # a free variable never equals an integer reference
    assert grade_champ("No", "No") and grade_champ("Yes", "No") is False and grade_champ(None, "3") is False


def test_verifier_text_keeps_leading_lines_and_the_answer() -> None:
    raw = "First line.\n\n  Second line is long.\nThird.\n"
    assert verifier_solution(raw, "7", 100) == "First line.\nSecond line is long.\nThird.\nanswer: 7"
    assert verifier_solution(raw, "7", 16) == "First line.\nSeco\nanswer: 7"
    assert verifier_solution(raw, None, 11) == "First line."
    assert verifier_solution("\n\n", None, 10) == "answer: none"


def test_real_problems_graded_against_the_annotations() -> None:
    rows, kept = read_champ(FILE, ["GPT-3.5"], ["No C w/o H", "Direct C w/ H"], 300, problems=3)
    assert kept["problems_in_file"] == 270 and 150 < kept["problems_gradable"] < 270 and kept["problems_used"] == 3
    assert len(rows) == 6 and {r.setting for r in rows} == {"No C w/o H", "Direct C w/ H"}
    first = {r.setting: r for r in rows if r.problem == "P_Combinatorics_1"}
    # the annotated solutions of the first problem: 29 with a wrong recursion (span), 239 without a wrong step
    wrong, right = first["No C w/o H"], first["Direct C w/ H"]
    assert (wrong.predicted, wrong.correct, wrong.annotated) == ("29", False, True) and wrong.first_wrong == (319, 469)
    assert (right.predicted, right.correct, right.first_wrong) == ("239", True, None) and right.reference == "239"
    assert right.solution.endswith("\nanswer: 239") and len(right.solution) <= 300 + len("answer: 239")
    assert right.annotated and all(r.first_wrong is None for r in rows if not r.annotated)
    summary = model_summary(rows)["GPT-3.5"]
    assert summary["solutions"] == 6 and summary["graded_correct_no_wrong_step"] == 1.0
    file_rows = as_solution_rows(rows)
    assert [r.line for r in file_rows] == list(range(6)) and file_rows[0].question.startswith("[P_Combinatorics_1] ")


@lru_cache(maxsize=1)
def _two_problems() -> str:
    data = json.loads(FILE.read_text())
    return json.dumps({**data, "problems": dict(list(data["problems"].items())[:2])})


def _small_file(tmp_path: Path) -> tuple[Path, dict]:
    return tmp_path / "v0.json", json.loads(_two_problems())


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (
            lambda d: d["problems"]["P_Combinatorics_2"].pop("_answer"),
            "problem 'P_Combinatorics_2' has no field '_answer'",
        ),
        (
            lambda d: d["problems"]["P_Combinatorics_1"].__setitem__("_text", 3),
            "problem 'P_Combinatorics_1' field '_text' is a int; expected str",
        ),
        (
            lambda d: d["problems"]["P_Combinatorics_1"]["conversations"].pop("GPT-3.5|0-Shot"),
            "problem 'P_Combinatorics_1' field 'conversations' has no conversation 'GPT-3.5|0-Shot'",
        ),
        (
            lambda d: d["problems"]["P_Combinatorics_2"]["conversations"]["GPT-3.5|0-Shot"]["messages"][2].pop("role"),
            "problem 'P_Combinatorics_2' conversation 'GPT-3.5|0-Shot' message 2 has no field 'role'",
        ),
        (lambda d: d.pop("problems"), "the top level has no field 'problems'"),
    ],
)
def test_malformed_file_names_problem_and_field(tmp_path: Path, corrupt, message: str) -> None:
    path, data = _small_file(tmp_path)
    corrupt(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ChampFormatError) as err:
        read_champ(path, ["GPT-3.5"], ["0-Shot"], 100)
    assert message in str(err.value) and str(path) in str(err.value)


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ChampFormatError, match="no such file"):
        read_champ(tmp_path / "absent.json", ["GPT-3.5"], ["0-Shot"], 100)
    (tmp_path / "bad.json").write_text('{"problems": {')
    with pytest.raises(ChampFormatError, match="not valid UTF-8 JSON"):
        read_champ(tmp_path / "bad.json", ["GPT-3.5"], ["0-Shot"], 100)
