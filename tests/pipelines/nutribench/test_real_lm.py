"""NutriBench prompts on the real SmolLM2-135M-Instruct: the default CoT budget does not cut the worked
answers, the chat starts with one role marker, and a few curated meals get an answer at default decoding."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from components.llm import LocalLM, load_lm
from components.nutrition.curation import CurationConfig, curate_meals
from components.nutrition.foods import load_food_table
from components.nutrition.llm_estimation import GenerationConfig, build_chats, generate_answers
from components.nutrition.prompting import PROMPT_SETS, _answer
from components.training import torch_threads
from paperflows.settings import default_cache_dir
from pipelines.nutribench.params import NutribenchParams

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smol() -> LocalLM:  # the project's shared model cache: built once per machine, not once per session
    configured = os.environ.get("PAPERFLOWS_CACHE")
    return load_lm("smollm2-135m", cache_dir=Path(configured) if configured else default_cache_dir())


def test_the_cot_budget_is_at_least_twice_the_longest_worked_answer(smol: LocalLM) -> None:
    budget = NutribenchParams().estimate.cot_max_new_tokens
    for examples in PROMPT_SETS.values():
        lengths = [
            len(smol.tokenizer(f"{e.reasoning}\nOutput: {_answer(e.total)}", add_special_tokens=False)["input_ids"])
            for e in examples
        ]
        assert 60 < max(lengths) and 2 * max(lengths) <= budget, lengths


def test_the_formatted_prompt_has_one_leading_role_marker(smol: LocalLM) -> None:
    ids = smol.tokenizer(smol.chat(build_chats("cot", ["Two slices of toast."])[0]))["input_ids"]
    marker = smol.tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert ids[0] == marker and ids[1] != marker and ids.count(marker) == 3  # system, user, assistant


def test_cot_answers_a_few_curated_meals_at_default_decoding(smol: LocalLM) -> None:
    e = NutribenchParams().estimate
    meals = curate_meals(load_food_table(["open_food_calories"]), CurationConfig(n_meals=40, seed=0))[:3]
    cfg = GenerationConfig(
        max_new_tokens=e.cot_max_new_tokens,
        batch_size=3,
        completion_tokens=e.completion_tokens,
        reasoning=True,
        stop_repeats=e.loop_tokens,
    )
    with torch_threads(1):
        out = generate_answers(smol, build_chats("cot", [m["meal_description"] for m in meals]), cfg)
    assert all(o["n_tokens"] > 20 for o in out)  # it reasons before it answers
    assert np.mean([o["pred"] != -1 for o in out]) >= 2 / 3  # and, with the completion pass, answers
