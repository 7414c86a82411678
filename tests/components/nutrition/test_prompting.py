"""Prompt structure of the three LLM strategies, RAG retrieval, and generation with the tiny LM."""

from __future__ import annotations

import re

import pytest

from components.llm import load_encoder, load_lm
from components.nutrition.answers import parse_answer
from components.nutrition.foods import Food
from components.nutrition.llm_estimation import (
    ANSWER_OPEN,
    GenerationConfig,
    RetrievalConfig,
    build_chats,
    build_food_index,
    completion_prompt,
    generate_answers,
    retrieve_facts,
)
from components.nutrition.prompting import EXAMPLES, OFFICIAL_EXAMPLES, PROMPT_SETS, build_messages

FOODS = [
    Food(
        "rice",
        "White rice (cooked)",
        "cooked white rice",
        "t",
        "c",
        "grains",
        "solid",
        "100g",
        28.0,
        None,
        None,
        None,
        measures={"cup": 160.0},
    ),
    Food(
        "milk",
        "Whole milk",
        "whole milk",
        "t",
        "c",
        "dairy_eggs",
        "liquid",
        "100g",
        4.8,
        None,
        None,
        None,
        measures={"glass": 250.0},
    ),
    Food(
        "burger",
        "Cheeseburger (Sonic)",
        "Cheeseburger from Sonic",
        "fastfood",
        "USA",
        "fast_food",
        "item",
        "serving",
        40.0,
        None,
        None,
        None,
        "item",
    ),
    Food(
        "kiwi", "Kiwi", "kiwi", "t", "c", "fruits", "unit", "100g", 10.0, None, None, None, "unit", 75.0, {"unit": 75.0}
    ),
]
MEAL = "For lunch I had a cup of cooked white rice and a glass of whole milk."


@pytest.mark.parametrize("prompt_set", sorted(PROMPT_SETS))
def test_examples_are_self_consistent(prompt_set: str) -> None:
    """Each worked example's reasoning adds up to its answer, and the answer parses back."""
    for ex in PROMPT_SETS[prompt_set]:
        total_line = ex.reasoning.splitlines()[-1]
        terms = [float(t) for t in re.findall(r"[\d.]+", total_line.split("=")[1])]
        assert sum(terms) == pytest.approx(ex.total, abs=0.05)
        assert float(total_line.split("=")[-1]) == pytest.approx(ex.total, abs=0.05)


def test_the_default_examples_are_the_official_meals_and_totals() -> None:
    """NutriBench's three worked meals (oatmeal + half a banana + orange juice, eggs + toast, half a PB&J
    sandwich) with the official totals, reasoned by short per-item lookups (no per-100 g arithmetic)."""
    assert EXAMPLES is OFFICIAL_EXAMPLES
    assert [e.total for e in EXAMPLES] == [66.5, 15.0, 25.3]
    assert "oatmeal" in EXAMPLES[0].meal and "2 eggs" in EXAMPLES[1].meal and "peanut butter" in EXAMPLES[2].meal
    for ex in EXAMPLES:
        assert "/ 100" not in ex.reasoning and ex.reasoning.startswith("The meal consists of")
    cot = build_messages("cot", MEAL)[0]["content"]
    assert "1 cup of oatmeal has 27 g carbs." in cot and "per 100 g" not in cot
    assert "250 * 28 / 100 = 70" in build_messages("cot", MEAL, prompt_set="per100g")[0]["content"]


@pytest.mark.parametrize("prompt_set", sorted(PROMPT_SETS))
@pytest.mark.parametrize("strategy", ["base", "cot", "rag"])
def test_message_structure(strategy: str, prompt_set: str) -> None:
    messages = build_messages(
        strategy, MEAL, ["cooked white rice: 28 g carbohydrates per 100 g"], prompt_set=prompt_set
    )
    assert [m["role"] for m in messages] == ["system", "user"]
    system, user = messages[0]["content"], messages[1]["content"]
    assert "total_carbohydrates" in system and "-1" in system
    assert system.count("Query:") == 3  # three worked meals
    assert f'Query: "{MEAL}"\nAnswer:' in user
    reasoning = strategy in ("cot", "rag")
    assert user.endswith("Let's think step by step.") == reasoning
    assert ("Output:" in system) == reasoning
    assert ("Nutrition facts:" in user) == (strategy == "rag")
    assert system.count("Nutrition facts:") == (3 if strategy == "rag" else 0)
    # the worked answers parse to the example totals
    answers = [parse_answer(chunk.split("Query:")[0]) for chunk in system.split("Answer:")[1:]]
    assert answers == pytest.approx([e.total for e in PROMPT_SETS[prompt_set]])


def test_few_shot_count_and_errors() -> None:
    assert build_messages("cot", MEAL, n_shots=1)[0]["content"].count("Query:") == 1
    assert build_messages("base", MEAL, n_shots=0)[0]["content"].count("Query:") == 0
    with pytest.raises(ValueError, match="n_shots"):
        build_messages("base", MEAL, n_shots=4)
    with pytest.raises(KeyError, match="unknown LLM strategy"):
        build_messages("tot", MEAL)
    with pytest.raises(KeyError, match="unknown prompt set"):
        build_messages("cot", MEAL, prompt_set="mine")
    with pytest.raises(ValueError, match="rag needs"):
        build_chats("rag", [MEAL])


def test_retrieval_finds_each_item() -> None:
    encoder = load_encoder("tiny")
    index = build_food_index(encoder, FOODS)
    facts = retrieve_facts(
        index, encoder, [MEAL, "2 Cheeseburgers from Sonic and a kiwi"], RetrievalConfig(k_per_item=1, max_facts=3)
    )
    assert [f.food_id for f in facts[0]] == ["rice", "milk"]
    assert [f.food_id for f in facts[1]] == ["burger", "kiwi"]
    wide = retrieve_facts(index, encoder, [MEAL], RetrievalConfig(k_per_item=2, max_facts=4))[0]
    assert [f.food_id for f in wide[:2]] == ["rice", "milk"] and len(wide) == len({f.food_id for f in wide}) <= 4
    capped = retrieve_facts(index, encoder, [MEAL], RetrievalConfig(k_per_item=2, max_facts=1))[0]
    assert [f.food_id for f in capped] == ["rice"]  # every item's best match comes before second matches
    chat = build_chats("rag", [MEAL], facts[:1])[0]
    assert "cooked white rice: 28 g carbohydrates per 100 g; 1 cup = 160 g" in chat[1]["content"]


def test_generation_with_the_tiny_lm() -> None:
    lm = load_lm("tiny")
    chats = build_chats("base", [MEAL, "Two kiwis."], n_shots=1)
    first = generate_answers(lm, chats, GenerationConfig(max_new_tokens=6, batch_size=2))
    again = generate_answers(lm, chats[::-1], GenerationConfig(max_new_tokens=6, batch_size=1))
    assert [a["answer"] for a in first] == [a["answer"] for a in again[::-1]]  # greedy, batch-invariant
    for a in first:
        assert a["pred"] == parse_answer(a["answer"])
        # the random tiny model never emits a stop string: every answer uses its whole budget (the byte
        # tokenizer can re-encode decoded text into more tokens than were generated)
        assert a["truncated"] and a["n_tokens"] >= 5


class ScriptedLM:
    """Answers each prompt from a script (a KeyError for a prompt it does not expect) and records the calls."""

    def __init__(self, script: dict[str, str]):
        self.script, self.calls = script, []
        self.tokenizer = lambda text, add_special_tokens=False: {"input_ids": list(text)}

    def chat(self, messages: list[dict[str, str]]) -> str:
        return f"<{messages[-1]['content']}>\n"

    def generate(self, prompts: list[str], **kwargs: object) -> list[str]:
        self.calls.append((list(prompts), kwargs))
        return [self.script[p] for p in prompts]


def test_completion_pass_reads_the_number_only_where_none_was_stated() -> None:
    chats = [[{"role": "user", "content": c}] for c in "ABCD"]
    cue = "\nOutput: " + ANSWER_OPEN
    lm = ScriptedLM(
        {
            "<A>\n": 'Some steps.\nOutput: {"total_carbohydrates": 40',  # answered
            "<B>\n": "1 cup of rice has 20 g carbs.\n1 slice of",  # cut mid-reasoning
            "<C>\n": 'Output: {"total_carbohydrates": -1',  # explicit abstention
            "<D>\n": 'Rice has 30 g.\nOutput: {"total_carbohydrates": <grams>',  # echoed placeholder
            # the reasoning so far is kept and only the answer line is forced
            "<B>\n1 cup of rice has 20 g carbs.\n1 slice of" + cue: "20",
            "<D>\nRice has 30 g." + cue: "none",
        }
    )
    out = generate_answers(lm, chats, GenerationConfig(max_new_tokens=64, completion_tokens=6, reasoning=True))
    assert [o["pred_first"] for o in out] == [40.0, -1.0, -1.0, -1.0]
    assert [o["pred"] for o in out] == [40.0, 20.0, -1.0, -1.0]
    assert [o["completion"] for o in out] == [None, "20", None, "none"]
    (_, first), (cued, second) = lm.calls
    assert len(cued) == 2 and first["max_new_tokens"] == 64 and second["max_new_tokens"] == 6
    off = ScriptedLM(lm.script)
    assert [o["pred"] for o in generate_answers(off, chats, GenerationConfig(max_new_tokens=64))] == [40, -1, -1, -1]
    assert len(off.calls) == 1  # completion_tokens=0: no second pass


def test_completion_prompt_of_a_base_answer_drops_an_unfinished_object() -> None:
    echo = '"two eggs"\n{"total_carbohydrates": <grams>'
    assert completion_prompt("P:", echo, False) == f'P:"two eggs"\n{ANSWER_OPEN}'
    assert completion_prompt("P:", "", False) == f"P:{ANSWER_OPEN}"
    assert completion_prompt("P:", "", True) == f"P:Output: {ANSWER_OPEN}"
