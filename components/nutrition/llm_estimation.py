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
without reaching a stop, i.e. the cap cut the reasoning short. With ``stop_repeats`` = n > 0 an answer
also ends once its last n tokens repeat an earlier run of its own tokens (greedy decoding in a loop,
which would otherwise run to the cap); such an answer is *looped*.

Completion pass (``completion_tokens`` > 0): an answer from which no number can be read (truncated
reasoning, prose, an echoed placeholder; an explicit -1 is an abstention and is kept) is continued once
more: its text up to the answer line (before the last "Output:", or before an unfinished "{" of a base
answer) is appended to the prompt, followed by the cue ``\nOutput: {"total_carbohydrates": `` (reasoning
strategies) or ``{"total_carbohydrates": `` (base), and at most ``completion_tokens`` greedy tokens up to
"}" are read as the value. The reasoning is kept, only the answer line is forced, so the estimate is the
model's own conclusion of what it reasoned so far.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from components.llm import top_k
from components.llm.lm import repeats_itself
from components.nutrition.answers import parse_answer, read_answer
from components.nutrition.foods import Food, food_fact
from components.nutrition.parsing import split_items
from components.nutrition.prompting import ANSWER_KEY, REASONING_STRATEGIES, build_messages

STOP = ("}", "\nQuery:")
ANSWER_OPEN = f'{{"{ANSWER_KEY}": '


@dataclass(frozen=True)
class RetrievalConfig:
    k_per_item: int = 2  # foods retrieved per parsed item
    max_facts: int = 6  # facts per prompt at most


@dataclass(frozen=True)
class GenerationConfig:
    max_new_tokens: int = 24
    batch_size: int = 8
    completion_tokens: int = 0  # budget of the completion pass; 0: none
    reasoning: bool = False  # the cue of the completion pass starts a new "Output:" line
    drop_finished: bool = True  # ended rows leave their batch (see LocalLM.generate)
    stop_repeats: int = 0  # end an answer whose last n tokens repeat an earlier run (a loop); 0: off


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


def retrieve_facts(
    index: FoodIndex, encoder: Any, meals: list[str], cfg: RetrievalConfig = RetrievalConfig()
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


def build_chats(
    strategy: str,
    meals: list[str],
    facts: list[list[Food]] | None = None,
    n_shots: int = 3,
    prompt_set: str = "official",
) -> list[list[dict[str, str]]]:
    """The chat messages of ``strategy`` for each meal (facts are used by ``rag`` only)."""
    if strategy == "rag" and (facts is None or len(facts) != len(meals)):
        raise ValueError("rag needs one list of retrieved foods per meal")
    return [
        build_messages(
            strategy, meal, [food_fact(f) for f in facts[i]] if facts is not None else None, n_shots, prompt_set
        )
        for i, meal in enumerate(meals)
    ]


def completion_prompt(prompt: str, answer: str, reasoning: bool) -> str:
    """The prompt of the completion pass for an unreadable ``answer`` (see the module docstring)."""
    head = answer.rsplit("Output:", 1)[0] if "Output:" in answer else answer
    if not reasoning and "{" in head:
        head = head[: head.rfind("{")]
    head = head.rstrip()
    if reasoning:
        return f"{prompt}{head}\nOutput: {ANSWER_OPEN}" if head else f"{prompt}Output: {ANSWER_OPEN}"
    return f"{prompt}{head}\n{ANSWER_OPEN}" if head else f"{prompt}{ANSWER_OPEN}"


def generate_answers(lm: Any, chats: list[list[dict[str, str]]], cfg: GenerationConfig) -> list[dict[str, Any]]:
    """Greedy answers for each chat, in order: ``{"answer", "pred", "truncated", "looped", "n_tokens",
    "pred_first", "completion"}`` per chat; ``pred_first`` is the first pass's estimate, ``completion`` the text of the
    completion pass (None when the first answer was readable or the pass is off) and ``pred`` the final
    estimate."""
    if cfg.completion_tokens < 0:
        raise ValueError(f"completion_tokens must be >= 0, got {cfg.completion_tokens}")
    prompts = [lm.chat(messages) for messages in chats]
    texts = lm.generate(
        prompts,
        max_new_tokens=cfg.max_new_tokens,
        temperature=0.0,
        batch_size=cfg.batch_size,
        stop=STOP,
        drop_finished=cfg.drop_finished,
        stop_repeats=cfg.stop_repeats,
    )
    out = []
    for text in texts:
        ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
        pred, truncated = parse_answer(text), len(ids) >= cfg.max_new_tokens - 1
        out.append(
            {
                "answer": text,
                "pred": pred,
                "pred_first": pred,
                "completion": None,
                "n_tokens": len(ids),
                "truncated": truncated,
                "looped": not truncated and cfg.stop_repeats > 0 and repeats_itself(ids, cfg.stop_repeats),
            }
        )
    unread = [i for i, text in enumerate(texts) if read_answer(text) is None]
    if cfg.completion_tokens and unread:
        cued = [completion_prompt(prompts[i], texts[i], cfg.reasoning) for i in unread]
        tails = lm.generate(
            cued,
            max_new_tokens=cfg.completion_tokens,
            temperature=0.0,
            batch_size=cfg.batch_size,
            stop=STOP,
            drop_finished=cfg.drop_finished,
        )
        for i, tail in zip(unread, tails):
            out[i]["completion"] = tail
            out[i]["pred"] = parse_answer(ANSWER_OPEN + tail + "}")
    return out


def reasoning_strategy(strategy: str) -> bool:
    """Whether ``strategy`` answers after a chain of thought (its completion cue opens an "Output:" line)."""
    return strategy in REASONING_STRATEGIES
