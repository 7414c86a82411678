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

Two sets of worked examples (``prompt_set``), written for this project:

* ``official`` (the default): NutriBench's own three example meals (oatmeal with half a banana and orange
  juice; scrambled eggs with toast; half a peanut butter and jelly sandwich) with their reference totals
  (66.5, 15, 25.3 g) and the official reasoning shape: a short *lookup and sum* per item ("1 cup of oatmeal
  has 27 g carbs"), a halving where the meal says half, then the sum. The wording is our own; the RAG
  variant adds facts in the same format the retrieval produces and the reasoning names the serving weight.
* ``per100g``: three other meals whose reasoning multiplies grams by carbohydrates per 100 g (longer
  answers, with arithmetic), closer to how the retrieved facts are stated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

ANSWER_KEY = "total_carbohydrates"

_TASK = (
    "You estimate carbohydrates. The query describes a meal; work out how many grams of "
    "carbohydrates it contains in total. When an item's amount is not given, assume one standard "
    "serving as defined by common nutrition references such as the USDA."
)
_BASE_FORMAT = (
    "Answer with a dictionary object giving the total carbohydrates in grams, in this form:\n"
    f'{{"{ANSWER_KEY}": total grams of carbohydrates in the meal}}\n'
    "The value is the number of grams alone, without units or other words. If you cannot estimate it, answer "
    f'{{"{ANSWER_KEY}": -1}}.'
)
_COT_STEPS = (
    "Reason step by step:\n"
    "1. List each food or drink in the meal with its amount; ignore words that are not about "
    "the items or their amounts.\n"
    "2. Give the grams of carbohydrates in each item for that amount.\n"
    "3. Add the items up. Finish with a last line of the form\n"
    f'Output: {{"{ANSWER_KEY}": total grams of carbohydrates in the meal}}\n'
    "with the number of grams alone as the value, or -1 if you cannot tell."
)
_RAG_NOTE = (
    "Each query comes with nutrition facts looked up in a food-composition table for foods that "
    "resemble the meal's items. Use a fact when it matches an item; otherwise rely on your own "
    "knowledge."
)


@dataclass(frozen=True)
class Example:
    meal: str
    facts: tuple[str, ...]
    reasoning: str
    total: float


OFFICIAL_EXAMPLES: tuple[Example, ...] = (
    Example(
        meal="For breakfast I had a cup of oatmeal, half a banana sliced on top and a glass of orange juice.",
        facts=(
            "oatmeal, cooked: 11.5 g carbohydrates per 100 g; 1 cup = 234 g",
            "banana: 23 g carbohydrates per 100 g; 1 medium banana = 118 g",
            "orange juice: 10.4 g carbohydrates per 100 g; 1 glass = 249 g",
        ),
        reasoning=(
            "The meal consists of 1 cup of oatmeal, 1/2 a banana and 1 glass of orange juice.\n"
            "1 cup of oatmeal has 27 g carbs.\n"
            "1 banana has 27 g carbs, so 1/2 a banana has 27 * 1/2 = 13.5 g carbs.\n"
            "1 glass of orange juice has 26 g carbs.\n"
            "Total carbs = 27 + 13.5 + 26 = 66.5"
        ),
        total=66.5,
    ),
    Example(
        meal="Scrambled eggs made from 2 eggs, with one slice of toast.",
        facts=(
            "scrambled egg: 1.6 g carbohydrates per 100 g; 1 large egg = 61 g",
            "white bread, toasted: 50 g carbohydrates per 100 g; 1 slice = 26 g",
        ),
        reasoning=(
            "The meal consists of scrambled eggs made from 2 eggs and 1 slice of toast.\n"
            "Scrambled eggs made from 2 eggs have 2 g carbs.\n"
            "1 slice of toast has 13 g carbs.\n"
            "Total carbs = 2 + 13 = 15"
        ),
        total=15.0,
    ),
    Example(
        meal="Half of a peanut butter and jelly sandwich.",
        facts=("peanut butter and jelly sandwich: 50.6 g carbohydrates per sandwich",),
        reasoning=(
            "The meal consists of 1/2 a peanut butter and jelly sandwich.\n"
            "1 peanut butter and jelly sandwich has 50.6 g carbs, so 1/2 a sandwich has 50.6 * 1/2 = 25.3 g "
            "carbs.\n"
            "Total carbs = 25.3"
        ),
        total=25.3,
    ),
)

PER100G_EXAMPLES: tuple[Example, ...] = (
    Example(
        meal="For lunch I had a bowl of cooked white rice and a glass of apple juice.",
        facts=(
            "cooked white rice: 28 g carbohydrates per 100 g; 1 cup = 160 g, 1 bowl = 250 g",
            "apple juice: 11 g carbohydrates per 100 g; 1 glass = 250 g, 1 cup = 240 g",
        ),
        reasoning=(
            "The meal is 1 bowl of cooked white rice and 1 glass of apple juice.\n"
            "1 bowl of cooked white rice (250 g) has 250 * 28 / 100 = 70 g carbs.\n"
            "1 glass of apple juice (250 g) has 250 * 11 / 100 = 27.5 g carbs.\n"
            "Total carbs = 70 + 27.5 = 97.5"
        ),
        total=97.5,
    ),
    Example(
        meal="Two slices of whole wheat toast with a teaspoon of butter.",
        facts=(
            "whole wheat bread: 43 g carbohydrates per 100 g; 1 slice = 30 g",
            "butter: 0.6 g carbohydrates per 100 g; 1 tablespoon = 14 g, 1 teaspoon = 5 g",
        ),
        reasoning=(
            "The meal is 2 slices of whole wheat toast and 1 teaspoon of butter.\n"
            "1 slice of whole wheat toast (30 g) has 13 g carbs, so 2 slices have 2 * 13 = 26 g carbs.\n"
            "1 teaspoon of butter has 0 g carbs.\n"
            "Total carbs = 26 + 0 = 26"
        ),
        total=26.0,
    ),
    Example(
        meal="I ate 150 g of strawberries and half a pot of plain yogurt.",
        facts=(
            "strawberries: 7.7 g carbohydrates per 100 g; 1 cup = 150 g",
            "plain yogurt: 4.8 g carbohydrates per 100 g; 1 pot = 125 g",
        ),
        reasoning=(
            "The meal is 150 g of strawberries and 1/2 pot of plain yogurt.\n"
            "150 g of strawberries has 150 * 7.7 / 100 = 11.6 g carbs.\n"
            "1 pot of plain yogurt (125 g) has 6 g carbs, so half a pot has 6 / 2 = 3 g carbs.\n"
            "Total carbs = 11.6 + 3 = 14.6"
        ),
        total=14.6,
    ),
)


EXAMPLES = OFFICIAL_EXAMPLES  # the default set
PROMPT_SETS: dict[str, tuple[Example, ...]] = {"official": OFFICIAL_EXAMPLES, "per100g": PER100G_EXAMPLES}


def _query(meal: str, reasoning: bool) -> str:
    return f'Query: "{meal}"\nAnswer:' + (" Let's think step by step." if reasoning else "")


def _facts_block(facts: list[str] | tuple[str, ...]) -> str:
    lines = "\n".join(f"- {f}" for f in facts) if facts else "- (no matching foods found)"
    return f"Nutrition facts:\n{lines}\n"


def _answer(total: float) -> str:
    return f'{{"{ANSWER_KEY}": {total:g}}}'


Shots = tuple[Example, ...]


def base_messages(meal: str, facts: list[str] | None, examples: Shots) -> list[dict[str, str]]:
    shots = "\n\n".join(f"{_query(e.meal, False)} {_answer(e.total)}" for e in examples)
    system = f"{_TASK}\n{_BASE_FORMAT}\n\nExamples:\n\n{shots}"
    return [{"role": "system", "content": system}, {"role": "user", "content": _query(meal, False)}]


def cot_messages(meal: str, facts: list[str] | None, examples: Shots) -> list[dict[str, str]]:
    shots = "\n\n".join(f"{_query(e.meal, True)}\n{e.reasoning}\nOutput: {_answer(e.total)}" for e in examples)
    system = f"{_TASK}\n{_COT_STEPS}\n\nFollow the format of these examples:\n\n{shots}"
    return [{"role": "system", "content": system}, {"role": "user", "content": _query(meal, True)}]


def rag_messages(meal: str, facts: list[str] | None, examples: Shots) -> list[dict[str, str]]:
    shots = "\n\n".join(
        f"{_facts_block(e.facts)}{_query(e.meal, True)}\n{e.reasoning}\nOutput: {_answer(e.total)}" for e in examples
    )
    system = f"{_TASK}\n{_RAG_NOTE}\n{_COT_STEPS}\n\nFollow the format of these examples:\n\n{shots}"
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": f"{_facts_block(facts or [])}{_query(meal, True)}"},
    ]


PROMPTS: dict[str, Callable[[str, list[str] | None, Shots], list[dict[str, str]]]] = {
    "base": base_messages,
    "cot": cot_messages,
    "rag": rag_messages,
}
LLM_STRATEGIES = tuple(PROMPTS)
REASONING_STRATEGIES = ("cot", "rag")


def build_messages(
    strategy: str, meal: str, facts: list[str] | None = None, n_shots: int = 3, prompt_set: str = "official"
) -> list[dict[str, str]]:
    """The chat of ``strategy`` for one meal, with the first ``n_shots`` (0..3) worked examples of
    ``prompt_set`` (one of `PROMPT_SETS`)."""
    if strategy not in PROMPTS:
        raise KeyError(f"unknown LLM strategy {strategy!r}; choose from {sorted(PROMPTS)}")
    if prompt_set not in PROMPT_SETS:
        raise KeyError(f"unknown prompt set {prompt_set!r}; choose from {sorted(PROMPT_SETS)}")
    examples = PROMPT_SETS[prompt_set]
    if not 0 <= n_shots <= len(examples):
        raise ValueError(f"n_shots must be in 0..{len(examples)}, got {n_shots}")
    return PROMPTS[strategy](meal, facts, examples[:n_shots])
