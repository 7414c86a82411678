"""Curating a NutriBench-style meal benchmark from the food-composition table.

Each meal is 1..``max_items`` foods drawn from the table, described in one sentence the way people log a
meal, and labelled with the exact nutrient totals the table gives for the stated amounts. As in
NutriBench, a meal is written either with **natural** servings (household measures: "a cup of",
"2 slices of", "half a", a whole unit such as "an apple"; the grams behind each measure come from
:func:`components.nutrition.foods.household_measures`, or the source's ``weight_per_unit``) or with
**metric** servings ("150 g of", "250 ml of"). Per-serving foods (fast-food items, cereal cups) have no
gram weight and appear in natural meals only.

Output columns (NutriBench's own, plus metadata): ``meal_id``, ``meal_description``, ``carb`` (g),
``protein``/``fat`` (g) and ``energy`` (kcal) when every item of the meal has them (else null),
``country``, ``source``, ``serving_type`` (natural | metric), ``n_items``, ``items`` (JSON list: food_id,
phrase, quantity, measure, grams, carb), ``split`` (train | eval).

Everything random comes from one ``numpy.random.Generator`` seeded with ``seed``, and the foods are
iterated in table order, so the same table and config give the same rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from components.nutrition.foods import NUTRIENTS, Food

SERVING_TYPES = ("natural", "metric")
# natural quantities and how they are written (the writing is drawn too)
_COUNTS = (0.5, 1.0, 1.5, 2.0, 3.0)
_COUNT_PROBS = (0.15, 0.5, 0.1, 0.18, 0.07)
_COUNT_WORDS = {1.5: ("one and a half", "1 1/2", "1.5"), 2.0: ("two", "2"), 3.0: ("three", "3")}
_OPENERS = (
    "For breakfast, I had {items}.",
    "I had {items} for lunch.",
    "For dinner I ate {items}.",
    "My afternoon snack was {items}.",
    "I'm having {items}.",
    "Just finished {items}.",
    "{Items}.",
    "This morning I had {items}.",
    "Tonight's dinner: {items}.",
    "I grabbed {items} on the go.",
    "Lunch today was {items}.",
    "I ate {items}.",
)
_PER_SERVING_CATEGORIES = ("fast_food", "breakfast_cereal")


@dataclass(frozen=True)
class CurationConfig:
    """How many meals, how large, natural vs metric, and the eval split."""

    n_meals: int = 3000
    max_items: int = 3
    metric_share: float = 0.5  # share of meals written with metric servings
    eval_share: float = 0.25  # share of meals held out for evaluation
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n_meals < 2 or not 1 <= self.max_items <= 8:
            raise ValueError(f"need n_meals >= 2 and 1 <= max_items <= 8, got {self.n_meals}, {self.max_items}")
        if not 0.0 <= self.metric_share <= 1.0 or not 0.0 < self.eval_share < 1.0:
            raise ValueError(
                f"need metric_share in [0, 1] and eval_share in (0, 1), got {self.metric_share}, {self.eval_share}"
            )


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def pluralize(phrase: str) -> str:
    """Plural of a noun phrase's head word (the last word before ' from ' / ' with ', naive English rules)."""
    for sep in (" from ", " with ", " in "):
        if sep in phrase:
            head, rest = phrase.split(sep, 1)
            return f"{pluralize(head)}{sep}{rest}"
    words = phrase.split(" ")
    last = words[-1]
    if not last or last[-1:] in "sS" or not last[-1:].isalpha():
        return phrase
    if last.endswith(("ch", "sh", "x", "z")):
        last += "es"
    elif last.endswith("y") and last[-2:-1].lower() not in "aeiou":
        last = last[:-1] + "ies"
    else:
        last += "s"
    return " ".join(words[:-1] + [last])


def _count_text(count: float, rng: np.random.Generator) -> str:
    forms = _COUNT_WORDS[count]
    return forms[int(rng.integers(len(forms)))]


def natural_phrase(food: Food, rng: np.random.Generator) -> dict[str, Any]:
    """One item in a household measure: its text and amount (grams for per-100 g foods, else servings)."""
    count = float(rng.choice(_COUNTS, p=_COUNT_PROBS))
    if food.basis == "serving":
        measure = food.serving_name or "serving"
        grams = None
    else:
        options = list(food.measures)
        measure = options[int(rng.integers(len(options)))]
        grams = round(count * food.measures[measure], 1)
    if measure in ("unit", "item"):  # the food itself is the unit: "an apple", "2 Big Macs from ..."
        noun = food.phrase
        text = (
            f"half {_article(noun)} {noun}"
            if count == 0.5
            else f"{_article(noun)} {noun}"
            if count == 1.0
            else f"{_count_text(count, rng)} {pluralize(noun)}"
        )
    else:
        text = (
            f"half {_article(measure)} {measure} of {food.phrase}"
            if count == 0.5
            else f"{_article(measure)} {measure} of {food.phrase}"
            if count == 1.0
            else f"{_count_text(count, rng)} {pluralize(measure)} of {food.phrase}"
        )
    return {"text": text, "quantity": count, "measure": measure, "grams": grams}


def metric_phrase(food: Food, rng: np.random.Generator) -> dict[str, Any]:
    """One item in grams (ml for liquids at 1 g/ml), around a household portion, rounded to 5 g."""
    if food.basis != "100g":
        raise ValueError(f"{food.food_id}: per-serving foods have no gram weight for a metric serving")
    portion = list(food.measures.values())[int(rng.integers(len(food.measures)))]
    grams = float(max(5.0, 5.0 * round(portion * rng.uniform(0.5, 2.0) / 5.0)))
    unit = "ml" if food.food_type == "liquid" else ("g", "grams")[int(rng.integers(2))]
    spacer = "" if unit == "g" and rng.random() < 0.3 else " "
    return {"text": f"{grams:g}{spacer}{unit} of {food.phrase}", "quantity": grams, "measure": unit, "grams": grams}


def _join(parts: list[str], rng: np.random.Generator) -> str:
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2:
        return f"{parts[0]} {('and', 'with')[int(rng.integers(2))]} {parts[1]}"
    return ", ".join(parts[:-1]) + (", and " if rng.random() < 0.3 else " and ") + parts[-1]


def _draw_foods(by_category: dict[str, list[Food]], n_items: int, metric: bool, rng: np.random.Generator) -> list[Food]:
    chosen: list[Food] = []
    categories = [c for c in by_category if not (metric and c in _PER_SERVING_CATEGORIES)]
    while len(chosen) < n_items:
        allowed = [
            c
            for c in categories
            if not (c == "beverages" and (not chosen or any(f.category == "beverages" for f in chosen)))
        ]
        category = allowed[int(rng.integers(len(allowed)))]
        pool = [f for f in by_category[category] if f not in chosen]
        if pool:
            chosen.append(pool[int(rng.integers(len(pool)))])
    return chosen


def _sum_or_none(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else round(float(sum(values)), 2)


def curate_meals(foods: list[Food], cfg: CurationConfig = CurationConfig()) -> list[dict[str, Any]]:
    """Meals with labels from ``foods`` (see the module docstring for the columns); rows in meal_id order."""
    if not foods:
        raise ValueError("the food table is empty")
    rng = np.random.default_rng(cfg.seed)
    by_category: dict[str, list[Food]] = {}
    for food in foods:
        by_category.setdefault(food.category, []).append(food)
    if not any(c not in _PER_SERVING_CATEGORIES for c in by_category) and cfg.metric_share > 0:
        raise ValueError("metric meals need per-100 g foods; the table has only per-serving foods")
    eval_ids = set(rng.permutation(cfg.n_meals)[: max(1, round(cfg.eval_share * cfg.n_meals))].tolist())
    rows = []
    for i in range(cfg.n_meals):
        metric = bool(rng.random() < cfg.metric_share)
        n_items = int(rng.integers(1, cfg.max_items + 1))
        chosen = _draw_foods(by_category, n_items, metric, rng)
        items, totals = [], {k: [] for k in NUTRIENTS}
        for food in chosen:
            amount = metric_phrase(food, rng) if metric else natural_phrase(food, rng)
            values = (
                food.nutrients(grams=amount["grams"])
                if food.basis == "100g"
                else food.nutrients(servings=amount["quantity"])
            )
            for k in NUTRIENTS:
                totals[k].append(values[k])
            items.append(
                {
                    "food_id": food.food_id,
                    "phrase": food.phrase,
                    "text": amount["text"],
                    "quantity": amount["quantity"],
                    "measure": amount["measure"],
                    "grams": amount["grams"],
                    "carb": round(float(values["carb"]), 2),
                }
            )
        listed = _join([it["text"] for it in items], rng)
        opener = _OPENERS[int(rng.integers(len(_OPENERS)))]
        description = opener.format(items=listed, Items=listed[:1].upper() + listed[1:])
        countries = sorted({f.country for f in chosen})
        rows.append(
            {
                "meal_id": f"meal-{cfg.seed}-{i:06d}",
                "meal_description": description,
                "carb": round(float(sum(totals["carb"])), 2),
                "protein": _sum_or_none(totals["protein"]),
                "fat": _sum_or_none(totals["fat"]),
                "energy": _sum_or_none(totals["energy"]),
                "country": countries[0] if len(countries) == 1 else "mixed",
                "source": "+".join(sorted({f.source for f in chosen})),
                "serving_type": "metric" if metric else "natural",
                "n_items": len(items),
                "items": json.dumps(items),
                "split": "eval" if i in eval_ids else "train",
            }
        )
    return rows
