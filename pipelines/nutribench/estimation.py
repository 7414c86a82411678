"""nutribench's estimators wired to the meals (one paper's helpers, kept out of ``pipeline.py`` so that it reads
like the method): the non-LLM baselines fitted on the training meals, the LLM prompting strategies (the local LLM
and the RAG sentence encoder loaded once per process), and the per-meal prediction rows the estimate stage
writes."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from components.nutrition.baselines import BaselineConfig, make_baseline
from components.nutrition.foods import Food
from components.nutrition.llm_estimation import (
    GenerationConfig,
    RetrievalConfig,
    build_chats,
    build_food_index,
    generate_answers,
    reasoning_strategy,
    retrieve_facts,
)
from paperflows.seeds import derive_seed
from pipelines.nutribench.params import EstimateParams

Meal = dict[str, Any]


@functools.lru_cache(maxsize=1)
def _language_model(name: str, cache_dir: Path | None, root: Path | None) -> Any:
    from components.llm import load_lm

    return load_lm(name, cache_dir=cache_dir, seed=0, root=root)


@functools.lru_cache(maxsize=1)
def _sentence_encoder(name: str) -> Any:
    from components.llm import load_encoder

    return load_encoder(name)


def llm_subset(eval_meals: list[Meal], n: int | None, seed: int) -> list[Meal]:
    """The eval meals the LLM strategies answer: ``n`` of them by a seeded draw, in eval order."""
    if n is None or n >= len(eval_meals):
        return list(eval_meals)
    keep = set(np.random.default_rng(derive_seed(seed, "llm_meals")).permutation(len(eval_meals))[:n].tolist())
    return [m for i, m in enumerate(eval_meals) if i in keep]


def baseline_answers(
    strategy: str, foods: list[Food], train: list[Meal], evaluated: list[Meal], e: EstimateParams
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Fit the non-LLM baseline ``strategy`` on the training meals and predict the evaluated ones; the answer
    records carry no text (a baseline states no answer, is never cut, never loops and needs no completion)."""
    model = make_baseline(strategy, foods, BaselineConfig(ridge_alpha=e.ridge_alpha))
    model.fit([m["meal_description"] for m in train], np.array([m["carb"] for m in train]))
    preds = model.predict([m["meal_description"] for m in evaluated])
    out = [
        {"answer": None, "truncated": False, "looped": False, "pred_first": float(x), "completion": None} for x in preds
    ]
    return preds, out


def llm_answers(
    strategy: str,
    texts: list[str],
    foods: list[Food],
    e: EstimateParams,
    cache_dir: Path | None,
    root: Path | None = None,
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Prompt the local LLM with ``strategy`` (base, CoT, or RAG with nutrition facts retrieved from the food
    table) on the meal descriptions ``texts``; its parsed predictions and the answer records. ``root``: where a
    relative ``estimate.name_or_path`` is taken from."""
    facts = None
    if strategy == "rag":
        encoder = _sentence_encoder(e.encoder)
        facts = retrieve_facts(
            build_food_index(encoder, foods),
            encoder,
            texts,
            RetrievalConfig(k_per_item=e.rag_k_per_item, max_facts=e.rag_max_facts),
        )
    reasoning = reasoning_strategy(strategy)
    cfg = GenerationConfig(
        max_new_tokens=e.cot_max_new_tokens if reasoning else e.max_new_tokens,
        batch_size=e.batch_size,
        completion_tokens=e.completion_tokens,
        reasoning=reasoning,
        stop_repeats=e.loop_tokens if reasoning else 0,
    )
    out = generate_answers(
        _language_model(e.lm_used, cache_dir, root), build_chats(strategy, texts, facts, e.few_shot, e.prompt_set), cfg
    )
    return np.array([o["pred"] for o in out]), out


def prediction_rows(evaluated: list[Meal], preds: np.ndarray, out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per evaluated meal: its id, serving type and true carbs beside the estimate and how it was read."""
    return [
        {
            "meal_id": m["meal_id"],
            "serving_type": m["serving_type"],
            "carb": m["carb"],
            "pred": float(pr),
            "answer": o["answer"],
            "truncated": bool(o["truncated"]),
            "looped": bool(o["looped"]),
            "pred_first": float(o["pred_first"]),
            "completion": o["completion"],
        }
        for m, pr, o in zip(evaluated, preds, out)
    ]
