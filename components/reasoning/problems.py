"""Multi-step arithmetic word problems with exact answers, and the text format of their solutions.

A problem starts from an amount and applies k - 1 operations (``+ x`` or ``- x``), e.g.

    question: "Ann has 7 apples. She gets 8 more. She gives away 6. She gets 9 more. How many apples now?"
    solution: "7+8=15\\n15-6=9\\n9+9=18\\nanswer: 18"

One line per step, ``<carried value><op><x>=<result>``, then ``answer: N``; lines are separated by newlines
(the step delimiter). Amounts stay in [0, cap].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NAMES = (("Ann", "She"), ("Ben", "He"), ("Cara", "She"), ("Dev", "He"), ("Eli", "He"), ("Fay", "She"))
ITEMS = ("apples", "coins", "cards", "books", "pens", "shells")
ANSWER_PREFIX = "answer: "


@dataclass(frozen=True)
class Problem:
    """``start`` followed by ``ops`` [(op, x)], op in {"+", "-"}; ``question`` is its text."""

    question: str
    start: int
    ops: tuple[tuple[str, int], ...]

    def running(self) -> list[int]:
        """The true amount after 0, 1, ..., len(ops) steps (``running()[-1]`` is the answer)."""
        values = [self.start]
        for op, x in self.ops:
            values.append(apply(values[-1], op, x))
        return values

    @property
    def answer(self) -> int:
        return self.running()[-1]

    def reference_solution(self) -> str:
        """The correct solution text."""
        values = self.running()
        lines = [step_line(values[i], op, x, values[i + 1]) for i, (op, x) in enumerate(self.ops)]
        return "\n".join([*lines, answer_line(values[-1])])


def apply(a: int, op: str, x: int) -> int:
    """a op x for op in {"+", "-"}."""
    if op == "+":
        return a + x
    if op == "-":
        return a - x
    raise ValueError(f"unknown operation {op!r}")


def step_line(a: int, op: str, x: int, result: int) -> str:
    return f"{a}{op}{x}={result}"


def answer_line(value: int) -> str:
    return f"{ANSWER_PREFIX}{value}"


def has_carry(a: int, op: str, x: int) -> bool:
    """Whether the units column carries (addition) or borrows (subtraction)."""
    return (a % 10 + x % 10) >= 10 if op == "+" else (a % 10) < (x % 10)


def make_problem(rng: np.random.Generator, numbers: int = 4, low: int = 1, high: int = 9, cap: int = 30) -> Problem:
    """A problem with ``numbers`` amounts (the start and numbers - 1 operations) drawn from ``rng``: the start
    and every operand in [low, high]; an addition only while the amount stays <= ``cap``, a subtraction only
    while it stays >= 0 (each is drawn with probability 1/2 when both are possible)."""
    if numbers < 2 or not 1 <= low <= high or cap < high:
        raise ValueError(f"need numbers >= 2, 1 <= low <= high <= cap; got {numbers}, {low}, {high}, {cap}")
    name, pronoun = NAMES[int(rng.integers(len(NAMES)))]
    item = ITEMS[int(rng.integers(len(ITEMS)))]
    start = int(rng.integers(low, high + 1))
    value, ops, words = start, [], [f"{name} has {start} {item}."]
    for _ in range(numbers - 1):
        can_add, can_sub = value + low <= cap, value >= low
        if can_sub and (not can_add or rng.random() < 0.5):
            x = int(rng.integers(low, min(high, value) + 1))
            ops.append(("-", x))
            words.append(f"{pronoun} gives away {x}.")
        else:
            x = int(rng.integers(low, min(high, cap - value) + 1))
            ops.append(("+", x))
            words.append(f"{pronoun} gets {x} more.")
        value = apply(value, *ops[-1])
    words.append(f"How many {item} now?")
    return Problem(" ".join(words), start, tuple(ops))


def make_problems(n: int, seed: int, numbers: int = 4, low: int = 1, high: int = 9, cap: int = 30) -> list[Problem]:
    """``n`` problems, a deterministic function of ``seed``."""
    rng = np.random.default_rng(seed)
    return [make_problem(rng, numbers, low, high, cap) for _ in range(n)]
