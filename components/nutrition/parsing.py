"""Splitting a meal description into items and reading each item's quantity and unit.

``split_items("For lunch I had half a cup of rice and 2 slices of bread.")`` gives
``[ParsedItem(quantity=0.5, unit="cup", food="rice"), ParsedItem(quantity=2.0, unit="slice", food="bread")]``.

Items are separated by commas, "and", "with", "plus" when the next words start a quantity (so "bacon and
cheese burger" stays one item). A quantity is a number (``2``, ``1.5``), a fraction (``1/2``, ``1 1/2``,
``½``, ``1½``, ``1 ¾``: the vulgar fractions ½ ¼ ¾ ⅓ ⅔ ⅛), a number word (``a``, ``an``, ``one`` .. ``twelve``,
``a couple of``) or a fraction word (``half``, ``half a``, ``a half``, ``a quarter of``, ``one and a half``); the
unit that may follow is a metric unit
(g, kg, mg, ml, l, oz, lb, glued or not: ``150g``), a US fluid ounce (``fl oz``, ``fl. oz``, ``floz``,
``fluid ounce(s)``: converted to ml, 1 fl oz = 29.5735 ml, so ``12 fl oz`` reads as 354.9 ml) or a household
measure (cup, slice, tablespoon, ..., plural or singular). An article before a measured size counts once:
``a 16.9 fl oz bottle of water`` is 16.9 fl oz of "bottle of water", ``a ½ cup of rice`` half a cup. A chunk
with no quantity is one default portion of its food, unless it is only meal-context words ("for breakfast",
"I had").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUMBER_WORDS = {
    "a": 1.0,
    "an": 1.0,
    "one": 1.0,
    "two": 2.0,
    "three": 3.0,
    "four": 4.0,
    "five": 5.0,
    "six": 6.0,
    "seven": 7.0,
    "eight": 8.0,
    "nine": 9.0,
    "ten": 10.0,
    "eleven": 11.0,
    "twelve": 12.0,
    "dozen": 12.0,
}
# unit spellings -> canonical unit
UNIT_ALIASES = {
    "g": "g",
    "gr": "g",
    "gram": "g",
    "grams": "g",
    "kg": "kg",
    "kilogram": "kg",
    "kilograms": "kg",
    "mg": "mg",
    "ml": "ml",
    "milliliter": "ml",
    "milliliters": "ml",
    "millilitre": "ml",
    "millilitres": "ml",
    "l": "l",
    "liter": "l",
    "liters": "l",
    "litre": "l",
    "litres": "l",
    "oz": "oz",
    "ounce": "oz",
    "ounces": "oz",
    "lb": "lb",
    "lbs": "lb",
    "pound": "lb",
    "pounds": "lb",
    "tbsp": "tablespoon",
    "tsp": "teaspoon",
}
HOUSEHOLD_UNITS = (
    "cup",
    "glass",
    "slice",
    "bowl",
    "plate",
    "tablespoon",
    "teaspoon",
    "piece",
    "portion",
    "fillet",
    "pot",
    "square",
    "handful",
    "can",
    "bottle",
    "serving",
    "unit",
    "item",
    "order",
    "mug",
    "scoop",
    "stick",
    "bar",
    "packet",
    "spoonful",
    "wedge",
)
_PLURALS = {"glasses": "glass", "handfuls": "handful", "spoonfuls": "spoonful"}
US_FL_OZ_ML = 29.5735
# spellings converted to another unit: canonical spelling -> (unit, factor)
CONVERTED_UNITS = {"fl oz": ("ml", US_FL_OZ_ML)}
_FLUID_OUNCE_SPELLINGS = {
    "fl oz": "fl oz",
    "floz": "fl oz",
    "fl ounce": "fl oz",
    "fl ounces": "fl oz",
    "fluid ounce": "fl oz",
    "fluid ounces": "fl oz",
    "fluid oz": "fl oz",
}
VULGAR_FRACTIONS = {"½": 1 / 2, "¼": 1 / 4, "¾": 3 / 4, "⅓": 1 / 3, "⅔": 2 / 3, "⅛": 1 / 8}
METRIC_GRAMS = {"g": 1.0, "kg": 1000.0, "mg": 0.001, "ml": 1.0, "l": 1000.0, "oz": 28.35, "lb": 453.6}

_VULGAR = "[" + "".join(VULGAR_FRACTIONS) + "]"
_NUM = rf"(?:\d+\s*{_VULGAR}|{_VULGAR}|\d+\s+\d+/\d+|\d+/\d+|\d+(?:\.\d+)?|\.\d+)"
_WORDS = "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True))
_QUANTITY_WORDS = (
    rf"(?:one\s+and\s+a\s+half|{_NUM}\s+and\s+a\s+half|a\s+half|half\s+of\s+an?|half\s+an?|half"
    rf"|a\s+quarter\s+of\s+an?|a\s+quarter\s+of|a\s+quarter|a\s+couple\s+of|{_NUM}|(?:{_WORDS}))"
)
_QUANTITY = rf"(?P<q>{_QUANTITY_WORDS})"
_UNIT_WORDS = sorted(
    set(UNIT_ALIASES) | set(HOUSEHOLD_UNITS) | {u + "s" for u in HOUSEHOLD_UNITS} | set(_PLURALS), key=len, reverse=True
)
_FLUID_OUNCE = r"fl\.?\s*oz|fl\.?\s*ounces?|fluid\s+(?:ounces?|oz)"
_UNIT = rf"(?P<u>{_FLUID_OUNCE}|{'|'.join(re.escape(u) for u in _UNIT_WORDS)})\b\.?"
# "a 12 fl oz can of cola", "a ½ cup of rice": the article before a measured size is not a second quantity
_ARTICLE_BEFORE_SIZE = re.compile(rf"(?<![\w/.])an?\s+(?={_NUM}\s*{_UNIT})", re.IGNORECASE)
_ITEM = re.compile(rf"(?<![\w/.]){_QUANTITY}(?:\s*{_UNIT})?(?:\s+of)?\s+(?P<food>.+)$", re.IGNORECASE)
_SEPARATOR = re.compile(
    rf",\s*(?:and\s+|with\s+)?|\s+(?:and|with|plus|along\s+with|alongside)\s+(?!a\s+half\b)(?={_QUANTITY_WORDS}\b)",
    re.IGNORECASE,
)
_CONTEXT_WORDS = {
    "for",
    "breakfast",
    "lunch",
    "dinner",
    "brunch",
    "snack",
    "dessert",
    "supper",
    "i",
    "i'm",
    "im",
    "we",
    "had",
    "have",
    "having",
    "ate",
    "eat",
    "eating",
    "drank",
    "grabbed",
    "enjoyed",
    "finished",
    "just",
    "my",
    "was",
    "today",
    "tonight",
    "tonight's",
    "this",
    "morning",
    "evening",
    "afternoon",
    "on",
    "the",
    "go",
    "as",
    "a",
    "an",
    "meal",
    "consisted",
    "of",
    "included",
    "and",
    "with",
}
_TRAILING_CONTEXT = re.compile(
    r"\s+(?:for\s+(?:breakfast|lunch|dinner|brunch|dessert|a\s+snack)|as\s+a\s+snack|on\s+the\s+go|today|"
    r"this\s+(?:morning|evening|afternoon)|tonight)\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ParsedItem:
    """One item of a meal: ``quantity`` of ``unit`` (canonical, None when the food itself is counted)."""

    quantity: float
    unit: str | None
    food: str


def parse_quantity(text: str) -> float:
    """A quantity expression -> number: '1 1/2' -> 1.5, '1½' -> 1.5, 'half a' -> 0.5, 'two' -> 2,
    'a quarter of' -> 0.25."""
    words = " ".join(text.lower().split())
    if words and words[-1] in VULGAR_FRACTIONS:
        whole = words[:-1].strip()
        return (float(whole) if whole else 0.0) + VULGAR_FRACTIONS[words[-1]]
    if words.endswith("and a half"):
        head = words[: -len("and a half")].strip()
        return parse_quantity(head) + 0.5
    if words.startswith("half") or words == "a half":
        return 0.5
    if words.startswith("a quarter"):
        return 0.25
    if words == "a couple of":
        return 2.0
    if words in _NUMBER_WORDS:
        return _NUMBER_WORDS[words]
    if " " in words:  # mixed number "1 1/2"
        whole, frac = words.split(" ", 1)
        return float(whole) + parse_quantity(frac)
    if "/" in words:
        num, den = words.split("/")
        if float(den) == 0:
            raise ValueError(f"zero denominator in {text!r}")
        return float(num) / float(den)
    return float(words)


def canonical_unit(unit: str | None) -> str | None:
    """A unit spelling -> its canonical name ('Tbsp' -> 'tablespoon', 'fl. oz.' -> 'fl oz'); None stays None."""
    if unit is None:
        return None
    u = unit.lower().rstrip(".")
    spaced = " ".join(u.replace(".", " ").split())
    if spaced in _FLUID_OUNCE_SPELLINGS:
        return _FLUID_OUNCE_SPELLINGS[spaced]
    if u in UNIT_ALIASES:
        return UNIT_ALIASES[u]
    if u in _PLURALS:
        return _PLURALS[u]
    if u in HOUSEHOLD_UNITS:
        return u
    if u.endswith("s") and u[:-1] in HOUSEHOLD_UNITS:
        return u[:-1]
    raise ValueError(f"unknown unit {unit!r}")


def _clean_food(text: str) -> str:
    text = text.strip().strip(".!?;: ")
    previous = None
    while previous != text:
        previous = text
        text = _TRAILING_CONTEXT.sub("", text).strip().strip(".!?;: ")
    return text


def _only_context(text: str) -> bool:
    return all(w in _CONTEXT_WORDS for w in re.findall(r"[\w']+", text.lower()))


def split_items(description: str) -> list[ParsedItem]:
    """The items of a meal description (see the module docstring); [] if nothing food-like is found."""
    text = " ".join(description.replace(":", ",").split()).strip().rstrip(".!?")
    text = _ARTICLE_BEFORE_SIZE.sub("", text)
    items = []
    for chunk in _SEPARATOR.split(text):
        chunk = chunk.strip()
        if not chunk:
            continue
        match = _ITEM.search(chunk)  # the first quantity, wherever it starts ("I had a cup of ...")
        if match is not None:
            food = _clean_food(match.group("food"))
            if food and not _only_context(food):  # "For a snack, ..." names no food
                quantity, unit = parse_quantity(match.group("q")), canonical_unit(match.group("u"))
                if unit in CONVERTED_UNITS:
                    unit, factor = CONVERTED_UNITS[unit]
                    quantity *= factor
                items.append(ParsedItem(quantity, unit, food))
            continue
        food = _clean_food(chunk)
        if re.search(r"\w", food) and not _only_context(food):
            items.append(ParsedItem(1.0, None, food))
    return items
