"""A pretrained language model as the generator of sampled solutions (SmolLM2-135M-Instruct by default).

Each problem's question goes into the model's chat template with an instruction that asks for one calculation per
line and a closing ``answer: N`` line (the step format the verifiers read, see `components.reasoning.problems`).
``samples`` completions per question are drawn at ``temperature`` (nucleus ``top_p``), each seeded by its prompt
index, so a solution does not depend on batching. A completion is kept as written, cut to its non-blank lines;
``correct`` is its final answer (`extract_answer`) graded against the problem's exact answer (`grade`).

The rows are those of a solutions file (`SolutionRow`), so the verifiers train and re-rank them as they do any
file; the model's slips are its own, with no step labels (PRM needs the programmatic policy).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from components.reasoning.grading import extract_answer, grade
from components.reasoning.problems import Problem
from components.reasoning.solutions_file import SolutionRow

INSTRUCTION = (
    "Solve the problem step by step. Write one calculation per line, for example '12+7=19', and end "
    "with a line 'answer: <number>'."
)
EXAMPLE = (
    "Ann has 7 apples. She gets 8 more, then gives away 6. How many apples does Ann have now?",
    "7+8=15\n15-6=9\nanswer: 9",
)


def chat_prompt(lm: Any, question: str) -> str:
    """The chat-formatted prompt of one question: the instruction, one worked example, the question."""
    return lm.chat(
        [
            {"role": "user", "content": f"{INSTRUCTION}\n\n{EXAMPLE[0]}"},
            {"role": "assistant", "content": EXAMPLE[1]},
            {"role": "user", "content": question},
        ]
    )


def clean_solution(text: str) -> str:
    """The completion's non-blank lines, stripped, newline-separated (steps end at newlines)."""
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def lm_solutions(
    lm: Any,
    problems: Sequence[Problem],
    samples: int,
    *,
    temperature: float = 0.7,
    top_p: float = 0.95,
    max_new_tokens: int = 96,
    seed: int = 0,
    batch_size: int = 16,
) -> list[SolutionRow]:
    """``samples`` sampled solutions of every problem as solution rows (``line`` = 1-based sample index)."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 to draw different samples, got {temperature}")
    prompts = [chat_prompt(lm, p.question) for p in problems for _ in range(samples)]
    texts = lm.generate(
        prompts,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_p=top_p,
        seed=seed,
        batch_size=batch_size,
        drop_finished=True,
    )
    rows = []
    for i, text in enumerate(texts):
        problem = problems[i // samples]
        answer = str(problem.running()[-1])
        solution = clean_solution(text) or "(no solution)"
        rows.append(SolutionRow(i + 1, problem.question, solution, answer, grade(extract_answer(solution), answer)))
    return rows
