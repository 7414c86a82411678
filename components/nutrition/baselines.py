"""Non-LLM carbohydrate estimators, all with one interface: ``fit(texts, carbs)`` then ``predict(texts)``.

* ``mean``: the training-set mean carbohydrate, whatever the meal.
* ``ridge``: TF-IDF of word uni- and bigrams (numbers kept as tokens) -> ridge regression on grams of carbs.
* ``lookup`` (parse and look up): split the description into items and read each quantity and unit
  (:mod:`components.nutrition.parsing`); retrieve each item's food from the food table by TF-IDF cosine
  (character 2-4-grams of the food's description phrase and name); convert the amount to grams with
  the food's own household weights (falling back to generic ones) and sum carbs = grams x carbs/100 g
  (or servings x carbs/serving for per-serving foods). Nothing is learned from the training meals.

Estimators are built by name from ``BASELINES``; all are deterministic. scikit-learn is imported when an
estimator that uses it is built, so the names (read by parameter validation) come without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from components.nutrition.foods import Food
from components.nutrition.parsing import METRIC_GRAMS, ParsedItem, split_items

# generic household weights (g) for a measure the retrieved food does not list
GENERIC_MEASURE_GRAMS = {
    "cup": 240.0,
    "glass": 250.0,
    "slice": 30.0,
    "bowl": 250.0,
    "plate": 300.0,
    "tablespoon": 15.0,
    "teaspoon": 5.0,
    "spoonful": 15.0,
    "piece": 50.0,
    "portion": 150.0,
    "fillet": 120.0,
    "pot": 125.0,
    "square": 10.0,
    "handful": 30.0,
    "can": 330.0,
    "bottle": 500.0,
    "mug": 250.0,
    "scoop": 60.0,
    "stick": 10.0,
    "bar": 50.0,
    "packet": 30.0,
    "wedge": 40.0,
}


class CarbEstimator(Protocol):
    def fit(self, texts: list[str], carbs: np.ndarray) -> CarbEstimator: ...

    def predict(self, texts: list[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class BaselineConfig:
    ridge_alpha: float = 1.0  # L2 penalty of the ridge regression


class MeanEstimator:
    """Predicts the training mean for every meal."""

    def __init__(self, foods: list[Food], cfg: BaselineConfig) -> None:
        self.value: float | None = None

    def fit(self, texts: list[str], carbs: np.ndarray) -> MeanEstimator:
        carbs = np.asarray(carbs, dtype=np.float64)
        if carbs.size == 0:
            raise ValueError("mean baseline: no training meals")
        self.value = float(carbs.mean())
        return self

    def predict(self, texts: list[str]) -> np.ndarray:
        if self.value is None:
            raise RuntimeError("mean baseline: call fit first")
        return np.full(len(texts), self.value)


class RidgeEstimator:
    """TF-IDF (word 1-2-grams, numbers kept) + ridge regression."""

    def __init__(self, foods: list[Food], cfg: BaselineConfig) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import Ridge

        self.vectorizer = TfidfVectorizer(
            ngram_range=(1, 2), token_pattern=r"(?u)\b\w[\w.]*\b", sublinear_tf=True, lowercase=True
        )
        self.model = Ridge(alpha=cfg.ridge_alpha)
        self.fitted = False

    def fit(self, texts: list[str], carbs: np.ndarray) -> RidgeEstimator:
        if len(texts) == 0:
            raise ValueError("ridge baseline: no training meals")
        self.model.fit(self.vectorizer.fit_transform(texts), np.asarray(carbs, dtype=np.float64))
        self.fitted = True
        return self

    def predict(self, texts: list[str]) -> np.ndarray:
        if not self.fitted:
            raise RuntimeError("ridge baseline: call fit first")
        return self.model.predict(self.vectorizer.transform(texts))


class LookupEstimator:
    """Parse-and-lookup against the food table (see the module docstring)."""

    def __init__(self, foods: list[Food], cfg: BaselineConfig) -> None:
        if not foods:
            raise ValueError("lookup baseline: the food table is empty")
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.foods = foods
        self.vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True, lowercase=True)
        self.matrix = self.vectorizer.fit_transform([f"{f.phrase} {f.name}" for f in foods])

    def fit(self, texts: list[str], carbs: np.ndarray) -> LookupEstimator:
        return self  # nothing to learn: the knowledge is the food table

    def match(self, food_texts: list[str]) -> list[Food]:
        """The table food most similar (TF-IDF cosine) to each text."""
        if not food_texts:
            return []
        scores = (self.vectorizer.transform(food_texts) @ self.matrix.T).toarray()
        return [self.foods[int(i)] for i in np.argmax(scores, axis=1)]

    @staticmethod
    def item_carbs(item: ParsedItem, food: Food) -> float:
        """Carbs (g) of ``item`` read as ``food``."""
        unit = item.unit
        if food.basis == "serving":
            # per-serving foods: any household unit or a bare count is that many servings
            return item.quantity * food.carb if unit not in METRIC_GRAMS else food.carb
        if unit in METRIC_GRAMS:
            grams = item.quantity * METRIC_GRAMS[unit]
        elif unit in food.measures:
            grams = item.quantity * food.measures[unit]
        elif unit in (None, "unit", "item", "piece", "serving", "order") and (food.serving_grams or food.measures):
            grams = item.quantity * (food.serving_grams or next(iter(food.measures.values())))
        else:
            grams = item.quantity * GENERIC_MEASURE_GRAMS.get(unit or "", 100.0)
        return grams * food.carb / 100.0

    def predict(self, texts: list[str]) -> np.ndarray:
        parsed = [split_items(t) for t in texts]
        matched = self.match([item.food for items in parsed for item in items])
        out, k = np.zeros(len(texts)), 0
        for row, items in enumerate(parsed):
            for item in items:
                out[row] += self.item_carbs(item, matched[k])
                k += 1
        return out


BASELINES: dict[str, Callable[[list[Food], BaselineConfig], CarbEstimator]] = {
    "mean": MeanEstimator,
    "ridge": RidgeEstimator,
    "lookup": LookupEstimator,
}


def make_baseline(name: str, foods: list[Food], cfg: BaselineConfig = BaselineConfig()) -> CarbEstimator:
    if name not in BASELINES:
        raise KeyError(f"unknown baseline {name!r}; choose from {sorted(BASELINES)}")
    return BASELINES[name](foods, cfg)
