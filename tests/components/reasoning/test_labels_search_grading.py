"""ORM / PRM / TVM labels, answer grading, majority vote, Best-of-N and step beam search on known answers."""

from __future__ import annotations

import numpy as np
import pytest

from components.reasoning.grading import extract_answer, grade
from components.reasoning.labels import outcome_labels, step_labels, token_value_labels
from components.reasoning.search import best_of_n, majority_vote, step_beam_search


def test_three_label_types_by_hand() -> None:
    ids = [[9, 1, 2, 3], [9, 1, 2, 4], [9, 1, 5, 6], [9, 1, 2, 3]]
    prompts, outcomes, groups = [1, 1, 1, 1], [1.0, 0.0, 0.0, 1.0], [0, 0, 0, 1]
    orm = outcome_labels(ids, prompts, outcomes)
    assert [a.tolist() for a in orm] == [[1, 1, 1], [0, 0, 0], [0, 0, 0], [1, 1, 1]]
    tvm = token_value_labels(ids, prompts, outcomes, groups)
    # question 0: [1] shared by 3 (mean 1/3), [1, 2] by 2 (1/2), then diverged; question 1 alone
    assert np.allclose(tvm[0], [1 / 3, 0.5, 1.0]) and np.allclose(tvm[1], [1 / 3, 0.5, 0.0])
    assert np.allclose(tvm[2], [1 / 3, 0.0, 0.0]) and np.allclose(tvm[3], [1.0, 1.0, 1.0])
    prm = step_labels([[9, 1, 7, 2, 7]], [1], [[2, 4]], [[True, False]])
    assert prm[0].tolist() == [1.0, 1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="line ends"):
        step_labels([[9, 1, 7, 2, 7]], [1], [[2, 3]], [[True, False]])


def test_answer_extraction_and_grading() -> None:
    assert (
        extract_answer("3+4=7\nanswer: 7") == "7" and extract_answer("so \\boxed{\\frac{1}{2}} done") == "\\frac{1}{2}"
    )
    assert extract_answer("Answer: 1,234.") == "1,234" and extract_answer("no final line") is None
    assert grade("1,234", "1234") and not grade("12", "13") and not grade(None, "3")
    assert grade("0.5", "\\frac{1}{2}") and grade("2^{1/2}", "\\sqrt{2}") and not grade("0.4", "1/2")


def test_majority_and_best_of_n() -> None:
    assert majority_vote(["3", "4", "4", None, "3"]) == "3"  # tie: the first seen
    assert majority_vote([None, None]) is None and majority_vote([None, "5"]) == "5"
    assert best_of_n([0.1, 0.9, 0.9], ["a", "b", "c"]) == "b"
    with pytest.raises(ValueError):
        best_of_n([0.1], ["a", "b"])


def test_step_beam_search_follows_the_scorer_and_counts_tokens() -> None:
    # paths of three binary digits; the scorer prefers 1s; two questions, one preferring 0s
    def expand(q, state, rng):
        return state + (int(rng.integers(2)),)

    def score(pairs):
        return np.array([sum(s) if q == 0 else -sum(s) for q, s in pairs], dtype=float)

    result = step_beam_search(
        [(), ()],
        expand,
        lambda s: len(s) == 3,
        lambda s: s,
        lambda c, p: 1,
        score,
        beams=2,
        per_beam=4,
        rng=np.random.default_rng(0),
    )
    assert result.best == [(1, 1, 1), (0, 0, 0)] and result.scores == [3.0, 0.0]
    assert result.tokens == [8 + 2 * 4 + 2 * 4] * 2  # b*K draws at the start, then K per live beam
    with pytest.raises(ValueError):
        step_beam_search(
            [()],
            expand,
            lambda s: True,
            lambda s: s,
            lambda c, p: 1,
            score,
            beams=0,
            per_beam=1,
            rng=np.random.default_rng(0),
        )
