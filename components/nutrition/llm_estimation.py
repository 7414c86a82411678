"""Running the LLM strategies: retrieval of food facts for RAG, greedy generation, parsing.

Retrieval (``rag``): the food table is embedded once (each food's description phrase and name) with a
sentence encoder; every meal is split into items (:func:`components.nutrition.parsing.split_items`;
the whole description when no item is found) and each item's food text retrieves its ``k_per_item``
most similar foods by cosine similarity; the facts of the distinct foods, best first, at most
``max_facts``, go into the prompt (:func:`components.nutrition.foods.food_fact`).

Generation: the chat template is applied to each strategy's messages; decoding is greedy (temperature 0)
up to ``max_new_tokens`` and stops at the first "}" (the end of the answer object) or when the model
starts a new "Query:"; the text up to there is parsed with :func:`components.nutrition.answers.parse_answer`.
An answer is *truncated* when it used the whole token budget (re-tokenised length >= max_new_tokens - 1)
without reaching a stop, i.e. the cap cut the reasoning short.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from components.llm import top_k
from components.nutrition.answers import parse_answer
from components.nutrition.foods import Food, food_fact
from components.nutrition.parsing import split_items
from components.nutrition.prompting import build_messages

STOP = ("}", "\nQuery:")


@dataclass(frozen=True)
class RetrievalConfig:
    k_per_item: int = 2        # foods retrieved per parsed item
    max_facts: int = 6         # facts per prompt at most


@dataclass(frozen=True)
class GenerationConfig:
    max_new_tokens: int = 24
    batch_size: int = 8


@dataclass(frozen=True)
class FoodIndex:
    """Unit-norm embeddings (N, d) of the foods, in table order."""

    foods: list[Food]
    embeddings: np.ndarray


def build_food_index(encoder: Any, foods: list[Food]) -> FoodIndex:
    """Embed every food's ``"<phrase> (<name>)"`` with ``encoder.encode`` -> FoodIndex."""
    if not foods:
        raise ValueError("the food table is empty")
    return FoodIndex(foods, encoder.encode([f"{f.phrase} ({f.name})" for f in foods]))


def retrieve_facts(index: FoodIndex, encoder: Any, meals: list[str], cfg: RetrievalConfig = RetrievalConfig()
                   ) -> list[list[Food]]:
    """The foods whose facts go into each meal's prompt (see the module docstring), one list per meal."""
    if cfg.k_per_item < 1 or cfg.max_facts < 1:
        raise ValueError("k_per_item and max_facts must be >= 1")
    queries, owner = [], []
    for m, meal in enumerate(meals):
        texts = [item.food for item in split_items(meal)] or [meal]
        queries += texts
        owner += [m] * len(texts)
    if not queries:
        return []
    k = min(cfg.k_per_item, len(index.foods))
    _, idx = top_k(encoder.encode(queries), index.embeddings, k)
    chosen: list[list[Food]] = [[] for _ in meals]
    # round-robin over items so every item gets its best match before any gets a second one
    for rank in range(k):
        for q, m in enumerate(owner):
            food = index.foods[int(idx[q, rank])]
            if food not in chosen[m] and len(chosen[m]) < cfg.max_facts:
                chosen[m].append(food)
    return chosen


def build_chats(strategy: str, meals: list[str], facts: list[list[Food]] | None = None, n_shots: int = 3
                ) -> list[list[dict[str, str]]]:
    """The chat messages of ``strategy`` for each meal (facts are used by ``rag`` only)."""
    if strategy == "rag" and (facts is None or len(facts) != len(meals)):
        raise ValueError("rag needs one list of retrieved foods per meal")
    return [build_messages(strategy, meal, [food_fact(f) for f in facts[i]] if facts is not None else None, n_shots)
            for i, meal in enumerate(meals)]


def generate_answers(lm: Any, chats: list[list[dict[str, str]]], cfg: GenerationConfig) -> list[dict[str, Any]]:
    """Greedy answers for each chat: ``{"answer", "pred", "truncated", "n_tokens"}`` per chat, in order."""
    prompts = [lm.chat(messages) for messages in chats]
    texts = lm.generate(prompts, max_new_tokens=cfg.max_new_tokens, temperature=0.0, batch_size=cfg.batch_size,
                        stop=STOP)
    out = []
    for text in texts:
        n_tokens = len(lm.tokenizer(text, add_special_tokens=False)["input_ids"])
        out.append({"answer": text, "pred": parse_answer(text), "n_tokens": n_tokens,
                    "truncated": n_tokens >= cfg.max_new_tokens - 1})
    return out
