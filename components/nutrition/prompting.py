"""LLM prompting strategies for carbohydrate estimation, in NutriBench's structure.

Every strategy builds a chat: a **system** message with the task instructions followed by three worked
example meals (few-shot; fewer on request, for models with a short context), and a **user** message
``Query: "<meal>"\nAnswer:`` (plus "Let's think step by step." for the reasoning strategies). The chat
template of the model is applied by the caller.

* ``base``: answer directly with ``{"total_carbohydrates": x}``; x = -1 when unknown.
* ``cot``: chain of thought: list the items with their servings (a standard serving when none is
  given), give each item's carbohydrates, add them up, and end with
  ``Output: {"total_carbohydrates": x}``.
* ``rag``: the ``cot`` prompt plus, before each query, nutrition facts retrieved from the food table
  for the meal's items (carbohydrates per 100 g or per serving, and household weights); the
  instructions ask the model to use the facts when they match an item.

The instructions and examples are written for this project (the example meals and their carbohydrate
values are typical US portions, not taken from the benchmark).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

ANSWER_KEY = "total_carbohydrates"

_TASK = ("You estimate carbohydrates. The query describes a meal; work out how many grams of "
         "carbohydrates it contains in total. When an item's amount is not given, assume one standard "
         "serving as defined by common nutrition references such as the USDA.")
_BASE_FORMAT = (f'Reply only with a JSON object of the form {{"{ANSWER_KEY}": <grams>}}, where <grams> is a single '
                f'number and nothing else. If you cannot tell, reply {{"{ANSWER_KEY}": -1}}.')
_COT_STEPS = ("Reason step by step:\n"
              "1. List each food or drink in the meal with its amount; ignore words that are not about "
              "the items or their amounts.\n"
              "2. Give the grams of carbohydrates in each item for that amount.\n"
              "3. Add the items up. Finish with a last line of the form\n"
              f'Output: {{"{ANSWER_KEY}": <grams>}}\n'
              f"where <grams> is one number; use -1 if you cannot tell.")
_RAG_NOTE = ("Each query comes with nutrition facts looked up in a food-composition table for foods that "
             "resemble the meal's items. Use a fact when it matches an item; otherwise rely on your own "
             "knowledge.")


@dataclass(frozen=True)
class Example:
    meal: str
    facts: tuple[str, ...]
    reasoning: str
    total: float


EXAMPLES: tuple[Example, ...] = (
    Example(
        meal="For lunch I had a bowl of cooked white rice and a glass of apple juice.",
        facts=("cooked white rice: 28 g carbohydrates per 100 g; 1 cup = 160 g, 1 bowl = 250 g",
               "apple juice: 11 g carbohydrates per 100 g; 1 glass = 250 g, 1 cup = 240 g"),
        reasoning=("The meal is 1 bowl of cooked white rice and 1 glass of apple juice.\n"
                   "1 bowl of cooked white rice (250 g) has 250 * 28 / 100 = 70 g carbs.\n"
                   "1 glass of apple juice (250 g) has 250 * 11 / 100 = 27.5 g carbs.\n"
                   "Total carbs = 70 + 27.5 = 97.5"),
        total=97.5),
    Example(
        meal="Two slices of whole wheat toast with a teaspoon of butter.",
        facts=("whole wheat bread: 43 g carbohydrates per 100 g; 1 slice = 30 g",
               "butter: 0.6 g carbohydrates per 100 g; 1 tablespoon = 14 g, 1 teaspoon = 5 g"),
        reasoning=("The meal is 2 slices of whole wheat toast and 1 teaspoon of butter.\n"
                   "1 slice of whole wheat toast (30 g) has 13 g carbs, so 2 slices have 2 * 13 = 26 g carbs.\n"
                   "1 teaspoon of butter has 0 g carbs.\n"
                   "Total carbs = 26 + 0 = 26"),
        total=26.0),
    Example(
        meal="I ate 150 g of strawberries and half a pot of plain yogurt.",
        facts=("strawberries: 7.7 g carbohydrates per 100 g; 1 cup = 150 g",
               "plain yogurt: 4.8 g carbohydrates per 100 g; 1 pot = 125 g"),
        reasoning=("The meal is 150 g of strawberries and 1/2 pot of plain yogurt.\n"
                   "150 g of strawberries has 150 * 7.7 / 100 = 11.6 g carbs.\n"
                   "1 pot of plain yogurt (125 g) has 6 g carbs, so half a pot has 6 / 2 = 3 g carbs.\n"
                   "Total carbs = 11.6 + 3 = 14.6"),
        total=14.6),
)


def _query(meal: str, reasoning: bool) -> str:
    return f'Query: "{meal}"\nAnswer:' + (" Let's think step by step." if reasoning else "")


def _facts_block(facts: list[str] | tuple[str, ...]) -> str:
    lines = "\n".join(f"- {f}" for f in facts) if facts else "- (no matching foods found)"
    return f"Nutrition facts:\n{lines}\n"


def _answer(total: float) -> str:
    return f'{{"{ANSWER_KEY}": {total:g}}}'


def base_messages(meal: str, facts: list[str] | None = None, n_shots: int = 3) -> list[dict[str, str]]:
    shots = "\n\n".join(f"{_query(e.meal, False)} {_answer(e.total)}" for e in EXAMPLES[:n_shots])
    system = f"{_TASK}\n{_BASE_FORMAT}\n\nExamples:\n\n{shots}"
    return [{"role": "system", "content": system}, {"role": "user", "content": _query(meal, False)}]


def cot_messages(meal: str, facts: list[str] | None = None, n_shots: int = 3) -> list[dict[str, str]]:
    shots = "\n\n".join(f"{_query(e.meal, True)}\n{e.reasoning}\nOutput: {_answer(e.total)}"
                        for e in EXAMPLES[:n_shots])
    system = f"{_TASK}\n{_COT_STEPS}\n\nFollow the format of these examples:\n\n{shots}"
    return [{"role": "system", "content": system}, {"role": "user", "content": _query(meal, True)}]


def rag_messages(meal: str, facts: list[str] | None = None, n_shots: int = 3) -> list[dict[str, str]]:
    shots = "\n\n".join(f"{_facts_block(e.facts)}{_query(e.meal, True)}\n{e.reasoning}\nOutput: {_answer(e.total)}"
                        for e in EXAMPLES[:n_shots])
    system = f"{_TASK}\n{_RAG_NOTE}\n{_COT_STEPS}\n\nFollow the format of these examples:\n\n{shots}"
    return [{"role": "system", "content": system},
            {"role": "user", "content": f"{_facts_block(facts or [])}{_query(meal, True)}"}]


PROMPTS: dict[str, Callable[[str, list[str] | None, int], list[dict[str, str]]]] = {
    "base": base_messages,
    "cot": cot_messages,
    "rag": rag_messages,
}
LLM_STRATEGIES = tuple(PROMPTS)


def build_messages(strategy: str, meal: str, facts: list[str] | None = None, n_shots: int = 3
                   ) -> list[dict[str, str]]:
    """The chat of ``strategy`` for one meal, with the first ``n_shots`` (0..3) worked examples."""
    if strategy not in PROMPTS:
        raise KeyError(f"unknown LLM strategy {strategy!r}; choose from {sorted(PROMPTS)}")
    if not 0 <= n_shots <= len(EXAMPLES):
        raise ValueError(f"n_shots must be in 0..{len(EXAMPLES)}, got {n_shots}")
    return PROMPTS[strategy](meal, facts, n_shots)
