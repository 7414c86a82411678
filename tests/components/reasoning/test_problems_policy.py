"""Word problems, the slip policy and its exact prefix values: known answers and a Monte-Carlo agreement."""

from __future__ import annotations

import numpy as np
import pytest

from components.reasoning.datasets import sample_synthetic
from components.reasoning.policy import SlipPolicy, next_line, prefix_value, sample_solution, start_state
from components.reasoning.problems import Problem, has_carry, make_problems


def test_problems_are_deterministic_and_stay_in_range() -> None:
    a, b = make_problems(50, seed=3, numbers=5, high=9, cap=20), make_problems(50, seed=3, numbers=5, high=9, cap=20)
    assert a == b and a != make_problems(50, seed=4, numbers=5, high=9, cap=20)
    for p in a:
        values = p.running()
        assert len(p.ops) == 4 and all(0 <= v <= 20 for v in values) and 1 <= p.start <= 9
        assert p.question.endswith("now?") and str(p.start) in p.question
        assert p.reference_solution().split("\n")[-1] == f"answer: {p.answer}"


def test_reference_format_and_carries() -> None:
    p = Problem("q", 7, (("+", 8), ("-", 6), ("+", 9)))
    assert p.running() == [7, 15, 9, 18]
    assert p.reference_solution() == "7+8=15\n15-6=9\n9+9=18\nanswer: 18"
    assert has_carry(7, "+", 8) and not has_carry(7, "+", 2) and has_carry(15, "-", 6) and not has_carry(15, "-", 4)


def test_a_policy_without_slips_writes_the_reference() -> None:
    p = Problem("q", 7, (("+", 8), ("-", 6)))
    path = sample_solution(p, SlipPolicy(0.0, 0.0, 0.0), np.random.default_rng(0))
    assert "\n".join(path.lines) == p.reference_solution() and path.answer == 9
    assert path.line_correct == (True, True, True) and prefix_value(p, start_state(p), SlipPolicy(0, 0, 0)) == 1.0


def test_exact_value_of_one_step_by_hand() -> None:
    # 5 + 7 carries: right with 0.8; a slip (0.2) is fresh and noticed with 0.5 -> V* = 0.8 + 0.2 * 0.5 = 0.9
    p, policy = Problem("q", 5, (("+", 7),)), SlipPolicy(slip_carry=0.2, slip_plain=0.1, recover=0.5)
    assert prefix_value(p, start_state(p), policy) == pytest.approx(0.9)
    always = SlipPolicy(slip_carry=1.0, slip_plain=1.0, recover=0.3)
    assert prefix_value(p, start_state(p), always) == pytest.approx(0.3)  # only a recovery saves it
    slipped = next_line(p, start_state(p), always, np.random.default_rng(0))
    assert slipped.fresh_slip and not slipped.line_correct[-1]
    assert prefix_value(p, slipped, always) == pytest.approx(0.3)


def test_recovery_line_and_carried_errors() -> None:
    p, policy = Problem("q", 5, (("+", 7), ("+", 1))), SlipPolicy(1.0, 1.0, 1.0)
    rng = np.random.default_rng(1)
    state = next_line(p, start_state(p), policy, rng)  # slips
    state = next_line(p, state, policy, rng)  # always noticed
    assert state.lines[-1] == "wait 5+7=12" and state.written == 12 and state.line_correct == (False, True)
    never = SlipPolicy(1.0, 1.0, 0.0)
    carried = next_line(p, next_line(p, start_state(p), never, rng), never, rng)
    assert not carried.fresh_slip and carried.step == 2


def test_exact_values_agree_with_sampling() -> None:
    policy = SlipPolicy(0.25, 0.05, 0.3)
    for p in make_problems(2, seed=11, numbers=4):
        rng = np.random.default_rng(5)
        wins = np.mean([sample_solution(p, policy, rng).answer == p.answer for _ in range(4000)])
        exact = prefix_value(p, start_state(p), policy)
        assert abs(wins - exact) < 4 * np.sqrt(exact * (1 - exact) / 4000) + 1e-9


def test_synthetic_records_carry_labels_and_values() -> None:
    train, test, summary = sample_synthetic(6, 2, 4, 3, 9, 30, SlipPolicy(0.5, 0.2, 0.3), seed=0)
    assert len(train) == 24 and len(test) == 8 and summary["train_questions"] == 6
    assert sorted({r["question_id"] for r in train}) == list(range(6)) and {r["question_id"] for r in test} == {0, 1}
    for r in train + test:
        lines = r["solution"].split("\n")
        assert len(lines) == len(r["line_correct"]) == len(r["line_values"])
        assert r["line_values"][-1] == float(r["correct"]) and r["line_correct"][-1] == r["correct"]
        assert all(0.0 <= v <= 1.0 for v in r["line_values"])
