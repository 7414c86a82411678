"""The language-model generator of sampled solutions, with a scripted stand-in for the LM (the real SmolLM2 run
is in tests/components/llm/test_llm_real_models.py)."""

from __future__ import annotations

import pytest

from components.reasoning.lm_policy import INSTRUCTION, clean_solution, lm_solutions
from components.reasoning.problems import make_problems


class ScriptedLM:
    """Answers every prompt with the next of ``replies``; records what it was asked."""

    def __init__(self, replies: list[str]) -> None:
        self.replies, self.calls = replies, []

    def chat(self, messages: list[dict[str, str]]) -> str:
        return " | ".join(f"{m['role']}: {m['content']}" for m in messages)

    def generate(self, prompts: list[str], **kwargs: object) -> list[str]:
        self.calls.append((prompts, kwargs))
        return self.replies[: len(prompts)]


def test_rows_are_graded_against_the_exact_answer_and_keep_their_question() -> None:
    problems = make_problems(2, seed=3)
    truth = [str(p.running()[-1]) for p in problems]
    lm = ScriptedLM([f"  step one\n\nanswer: {truth[0]}\n", "answer: -1", "no answer at all", f"answer: {truth[1]}"])
    rows = lm_solutions(lm, problems, 2, temperature=0.5, max_new_tokens=40, seed=9)
    assert [r.correct for r in rows] == [True, False, False, True]
    assert [r.question for r in rows] == [problems[0].question] * 2 + [problems[1].question] * 2
    assert [r.answer for r in rows] == [truth[0]] * 2 + [truth[1]] * 2 and [r.line for r in rows] == [1, 2, 3, 4]
    assert rows[0].solution == f"step one\nanswer: {truth[0]}"  # blank lines dropped, lines stripped
    prompts, kwargs = lm.calls[0]
    assert len(prompts) == 4 and prompts[0] == prompts[1] and INSTRUCTION in prompts[0]
    assert problems[1].question in prompts[2]
    assert kwargs["temperature"] == 0.5 and kwargs["max_new_tokens"] == 40 and kwargs["seed"] == 9


def test_bad_settings_are_refused() -> None:
    problems = make_problems(1, seed=0)
    with pytest.raises(ValueError, match="samples"):
        lm_solutions(ScriptedLM([]), problems, 0)
    with pytest.raises(ValueError, match="temperature"):
        lm_solutions(ScriptedLM([]), problems, 2, temperature=0.0)
    assert clean_solution("\n  \n") == ""
