"""The food table and the curated meal benchmark: columns, labels, serving types, reproducibility."""

from __future__ import annotations

import json

import pytest

from components.io import save_table
from components.nutrition.curation import CurationConfig, curate_meals, metric_phrase, natural_phrase, pluralize
from components.nutrition.foods import Food, description_phrase, food_fact, household_measures, load_food_table

FOODS = load_food_table()
COLUMNS = [
    "meal_id",
    "meal_description",
    "carb",
    "protein",
    "fat",
    "energy",
    "country",
    "source",
    "serving_type",
    "n_items",
    "items",
    "split",
]


def test_food_table_sources() -> None:
    by_source = {s: [f for f in FOODS if f.source == s] for s in ("open_food_calories", "fastfood", "uscereal")}
    # 1,131 open-food-calories entries have numeric carbs; 29 of them repeat an English name
    assert 1090 <= len(by_source["open_food_calories"]) <= 1131
    assert len(by_source["fastfood"]) >= 500 and len(by_source["uscereal"]) == 65
    assert all(f.basis == "100g" for f in by_source["open_food_calories"])
    assert all(f.basis == "serving" and f.serving_name == "item" for f in by_source["fastfood"])
    assert all(f.carb >= 0 for f in FOODS)
    assert len({f.food_id for f in FOODS}) == len(FOODS)
    # unit foods carry their weight_per_unit as the "unit" household measure
    assert any("unit" in f.measures and f.measures["unit"] == f.serving_grams for f in by_source["open_food_calories"])
    # cereals: carbohydrate per cup = complex carbohydrate + sugars (MASS::UScereal 'All-Bran': 21.21 + 15.15)
    all_bran = next(f for f in by_source["uscereal"] if f.name == "All-Bran")
    assert all_bran.carb == pytest.approx(21.21212 + 15.151515)


def test_food_row_round_trip_and_fact() -> None:
    food = FOODS[0]
    assert Food.from_row(food.to_row()) == food
    rice = Food(
        "x",
        "White rice (cooked)",
        "cooked white rice",
        "t",
        "c",
        "grains",
        "solid",
        "100g",
        28.0,
        2.7,
        0.3,
        130.0,
        measures={"cup": 160.0},
    )
    assert food_fact(rice) == "cooked white rice: 28 g carbohydrates per 100 g; 1 cup = 160 g"
    assert rice.nutrients(grams=250.0)["carb"] == pytest.approx(70.0)


@pytest.mark.parametrize(
    ("name", "phrase"),
    [
        ("White rice (cooked)", "cooked white rice"),
        ("Stout beer (Guinness type)", "stout beer"),
        ("Black beans (cooked)", "cooked black beans"),
        ("Honey", "honey"),
    ],
)
def test_description_phrase(name: str, phrase: str) -> None:
    assert description_phrase(name) == phrase


def test_household_measures() -> None:
    assert household_measures("whole wheat bread", "grains", "solid", None)["slice"] == 30.0
    assert next(iter(household_measures("apple", "fruits", "unit", 150.0))) == "unit"
    assert "glass" in household_measures("orange juice", "beverages", "liquid", None)


@pytest.mark.parametrize(
    ("phrase", "plural"),
    [
        ("apple", "apples"),
        ("cherry", "cherries"),
        ("peach", "peaches"),
        ("Big Mac from Mcdonalds", "Big Macs from Mcdonalds"),
        ("spring rolls", "spring rolls"),
        ("day", "days"),
    ],
)
def test_pluralize(phrase: str, plural: str) -> None:
    assert pluralize(phrase) == plural


def test_meals_have_nutribench_columns_and_consistent_labels() -> None:
    rows = curate_meals(FOODS, CurationConfig(n_meals=400, max_items=4, seed=3))
    assert all(list(r) == COLUMNS for r in rows)
    by_id = {f.food_id: f for f in FOODS}
    for r in rows:
        items = json.loads(r["items"])
        assert r["n_items"] == len(items) and 1 <= len(items) <= 4
        assert r["carb"] == pytest.approx(sum(i["carb"] for i in items), abs=0.02)
        for item in items:
            assert item["text"].lower() in r["meal_description"].lower()
            food = by_id[item["food_id"]]
            expected = (
                food.nutrients(grams=item["grams"])
                if food.basis == "100g"
                else food.nutrients(servings=item["quantity"])
            )
            assert item["carb"] == pytest.approx(expected["carb"], abs=0.01)
        if r["serving_type"] == "metric":
            assert all(by_id[i["food_id"]].basis == "100g" and i["measure"] in ("g", "grams", "ml") for i in items)
        if r["protein"] is not None:
            assert r["protein"] >= 0
    assert {r["serving_type"] for r in rows} == {"natural", "metric"}
    assert {r["split"] for r in rows} == {"train", "eval"}
    assert sum(r["split"] == "eval" for r in rows) == 100  # eval_share 0.25
    assert len({r["meal_id"] for r in rows}) == len(rows)


def test_natural_and_metric_phrases() -> None:
    import numpy as np

    apple = Food(
        "a",
        "Apple",
        "apple",
        "t",
        "c",
        "fruits",
        "unit",
        "100g",
        12.0,
        None,
        None,
        None,
        "unit",
        150.0,
        {"unit": 150.0},
    )
    texts = {natural_phrase(apple, np.random.default_rng(s))["text"] for s in range(40)}
    assert "an apple" in texts and "half an apple" in texts and any(t.endswith(" apples") for t in texts)
    metric = metric_phrase(apple, np.random.default_rng(0))
    assert metric["grams"] % 5 == 0 and metric["text"].startswith(f"{metric['grams']:g}")
    burger = Food(
        "b",
        "Burger (X)",
        "Burger from X",
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
    )
    with pytest.raises(ValueError, match="no gram weight"):
        metric_phrase(burger, np.random.default_rng(0))


def test_same_seed_gives_byte_identical_parquet(tmp_path) -> None:
    cfg = CurationConfig(n_meals=300, seed=11)
    for name in ("a", "b"):
        save_table(curate_meals(FOODS, cfg), tmp_path / f"{name}.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    other = curate_meals(FOODS, CurationConfig(n_meals=300, seed=12))
    assert [r["meal_description"] for r in other] != [r["meal_description"] for r in curate_meals(FOODS, cfg)]


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="eval_share"):
        CurationConfig(eval_share=1.0)
    with pytest.raises(ValueError, match="max_items"):
        CurationConfig(max_items=0)
    with pytest.raises(ValueError, match="empty"):
        curate_meals([], CurationConfig())
