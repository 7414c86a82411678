"""Sampled-solution records, the rows of the JSON Lines the verifiers train and are tested on.

A record has the file format's fields (``question``, ``solution``, ``answer``, ``correct``) plus
``question_id`` (index of its question in the split) and ``predicted`` (the final answer read from the
solution). Synthetic records also carry the problem (``start``, ``ops``), per line whether the amount after it
is right (``line_correct``, PRM's labels) and the exact value V* of the prefix ending after each line
(``line_values``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from components.reasoning.grading import as_integer, extract_answer, grade
from components.reasoning.policy import PathState, SlipPolicy, prefix_value, sample_solution, start_state
from components.reasoning.problems import Problem, make_problems
from components.reasoning.solutions_file import SolutionRow


def _line_values(problem: Problem, path: PathState, policy: SlipPolicy) -> list[float]:
    """V* after each line of a sampled path, replayed from its recorded lines."""
    values, state = [], start_state(problem)
    truth = problem.running()
    for line, ok in zip(path.lines, path.line_correct):
        if line.startswith("answer"):
            state = PathState(lines=state.lines + (line,), step=state.step, written=state.written, answer=state.written)
        elif line.startswith("wait"):
            state = PathState(lines=state.lines + (line,), step=state.step, written=truth[state.step])
        else:
            written = int(line.split("=")[1])
            fresh = not ok and state.written == truth[state.step]
            state = PathState(lines=state.lines + (line,), step=state.step + 1, written=written, fresh_slip=fresh)
        values.append(prefix_value(problem, state, policy))
    return values


def problem_record(problem: Problem, path: PathState, qid: int, policy: SlipPolicy) -> dict[str, Any]:
    solution = "\n".join(path.lines)
    return {
        "question": problem.question,
        "solution": solution,
        "answer": str(problem.answer),
        "correct": bool(path.answer == problem.answer),
        "question_id": qid,
        "predicted": str(path.answer),
        "start": problem.start,
        "ops": [[op, x] for op, x in problem.ops],
        "line_correct": list(path.line_correct),
        "line_values": _line_values(problem, path, policy),
    }


def sample_synthetic(
    train_questions: int,
    test_questions: int,
    samples: int,
    numbers: int,
    operand_max: int,
    cap: int,
    policy: SlipPolicy,
    seed: int,
) -> tuple[list[dict], list[dict], dict[str, float]]:
    """Train and test records: ``samples`` policy solutions for each of the problems (drawn from ``seed``)."""
    problems = make_problems(train_questions + test_questions, seed, numbers, 1, operand_max, cap)
    rng = np.random.default_rng([seed, 1])
    records = [
        [
            problem_record(
                p, sample_solution(p, policy, rng), q if q < train_questions else q - train_questions, policy
            )
            for _ in range(samples)
        ]
        for q, p in enumerate(problems)
    ]
    train = [r for rs in records[:train_questions] for r in rs]
    test = [r for rs in records[train_questions:] for r in rs]
    roots = [prefix_value(p, start_state(p), policy) for p in problems]
    summary = {
        "source": "synthetic",
        "train_questions": train_questions,
        "test_questions": test_questions,
        "samples": samples,
        "train_accuracy": float(np.mean([r["correct"] for r in train])),
        "test_accuracy": float(np.mean([r["correct"] for r in test])),
        "exact_accuracy": float(np.mean(roots)),
        "train_all_wrong_questions": float(
            np.mean([not any(r["correct"] for r in rs) for rs in records[:train_questions]])
        ),
        "recovered_solutions": float(
            np.mean([any(line.startswith("wait") for line in r["solution"].split("\n")) for r in train])
        ),
    }
    return train, test, summary


def split_file(
    rows: Sequence[SolutionRow], test_fraction: float, seed: int, grader: Callable[[str | None, str], bool] = grade
) -> tuple[list[dict], list[dict], dict[str, float]]:
    """A solutions file as train / test records, split by question (a seeded share of the questions held out,
    at least one on each side); ``regraded`` is the final answer graded against ``answer`` by ``grader``."""
    questions = list(dict.fromkeys(r.question for r in rows))
    order = np.random.default_rng(seed).permutation(len(questions))
    n_test = min(len(questions) - 1, max(1, round(test_fraction * len(questions))))
    held = {questions[i] for i in order[:n_test]}
    ids: tuple[dict[str, int], dict[str, int]] = ({}, {})
    train, test = [], []
    for r in rows:
        side, index = (test, ids[1]) if r.question in held else (train, ids[0])
        qid = index.setdefault(r.question, len(index))
        predicted = extract_answer(r.solution)
        side.append(
            {
                "question": r.question,
                "solution": r.solution,
                "answer": r.answer,
                "correct": r.correct,
                "question_id": qid,
                "predicted": predicted,
                "regraded": grader(predicted, r.answer),
                "line": r.line,
            }
        )
    agree = float(np.mean([rec["regraded"] == rec["correct"] for rec in train + test]))
    summary = {
        "source": "file",
        "train_questions": len(questions) - n_test,
        "test_questions": n_test,
        "train_solutions": len(train),
        "test_solutions": len(test),
        "train_accuracy": float(np.mean([r["correct"] for r in train])),
        "test_accuracy": float(np.mean([r["correct"] for r in test])),
        "regrade_agreement": agree,
    }
    return train, test, summary


def answer_key(predicted: str | None) -> str | None:
    """The form answers are voted in: an integer's canonical digits, other text stripped."""
    if predicted is None:
        return None
    value = as_integer(predicted)
    return str(value) if value is not None else predicted.strip()
