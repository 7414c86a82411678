"""The answer parser on the official answer formats, and the NutriBench metrics."""

from __future__ import annotations

import numpy as np
import pytest

from components.nutrition.answers import UNKNOWN, carb_metrics, meal_scores, parse_answer, read_answer


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        # base answers
        ('{"total_carbohydrates": 66.5}', 66.5),
        ('{"total_carbohydrates": 15}', 15.0),
        ("{'total_carbohydrates': 42}", 42.0),
        ('{"total_carbohydrates":12.25}', 12.25),
        ('{"total_carbohydrates": "45"}', 45.0),
        ('{"total_carbohydrates": .5}', 0.5),
        ('{"total_carbohydrates": 30.}', 30.0),
        ('{"total_carbohydrates": 66.5', 66.5),  # cut at the stop string "}"
        ('  {"total_carbohydrates": 7}  extra words', 7.0),
        ('Sure! {"total_carbohydrates": 20} is my estimate', 20.0),
        # unknown and negative
        ('{"total_carbohydrates": -1}', -1.0),
        ('{"total_carbohydrates": -20}', -20.0),
        # ranges -> midpoint, lists -> mean
        ('{"total_carbohydrates": 40-50}', 45.0),
        ('{"total_carbohydrates": 40 - 51}', 45.5),
        ('{"total_carbohydrates": "10.5-11.5"}', 11.0),
        ('{"total_carbohydrates": [30, 40]}', 35.0),
        ('{"total_carbohydrates": [30, 40, 56]}', 42.0),
        ('{"total_carbohydrates": [12.5]}', 12.5),
        # CoT: only the text after the last "Output:" counts
        ('1 cup of rice has 45g carbs.\nTotal = 45\nOutput: {"total_carbohydrates": 45}', 45.0),
        ('{"total_carbohydrates": 10} then more thinking\nOutput: {"total_carbohydrates": 12}', 12.0),
        ('Output: {"total_carbohydrates": 5}\nOutput: {"total_carbohydrates": 9}', 9.0),
        ('Reasoning without the marker, {"total_carbohydrates": 33}', 33.0),
        # several objects after the marker: the first one
        ('Output: {"total_carbohydrates": 8} {"total_carbohydrates": 99}', 8.0),
        # a bare number is accepted, with or without the marker
        ("27.5", 27.5),
        ("Output: 31", 31.0),
        # failures -> -1
        ("I don't know.", UNKNOWN),
        ("", UNKNOWN),
        ("Output:", UNKNOWN),
        ('{"total_fat": 12}', UNKNOWN),
        ('{"total_carbohydrates": "about forty"}', UNKNOWN),
        ("Total carbs are 45 grams", UNKNOWN),
        ("nan", UNKNOWN),
        ("The meal has 45 g carbs.\nOutput: none", UNKNOWN),
    ],
)
def test_parse_answer(answer: str, expected: float) -> None:
    assert parse_answer(answer) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('{"total_carbohydrates": -1}', -1.0),  # an explicit abstention is a statement
        ('Output: {"total_carbohydrates": 45', 45.0),
        ("-1", -1.0),
        ("1 cup of rice has 45 g carbs.\n2 slices of", None),  # reasoning cut before the answer line
        ('Output: {"total_carbohydrates": <grams>', None),  # an echoed placeholder
        ('"two slices of toast"\n\nThe', None),  # an echoed query
        ("", None),
    ],
)
def test_read_answer_tells_an_abstention_from_no_answer(answer: str, expected: float | None) -> None:
    assert read_answer(answer) == (None if expected is None else pytest.approx(expected))
    assert parse_answer(answer) == (UNKNOWN if expected is None else pytest.approx(expected))


def test_parse_answer_rejects_non_strings() -> None:
    assert parse_answer(None) == UNKNOWN  # type: ignore[arg-type]


def test_metrics_known_values() -> None:
    truth = np.array([10.0, 50.0, 20.0, 0.0])
    pred = np.array([12.0, 40.0, -1.0, 7.4])
    m = carb_metrics(pred, truth)
    # errors 2, 10, 21 (a -1 answer counts as the estimate -1), 7.4
    assert m["mae"] == pytest.approx((2 + 10 + 21 + 7.4) / 4)
    assert m["acc_7_5"] == pytest.approx(2 / 4)  # 2 and 7.4 are < 7.5; 10 and 21 are not
    assert m["answer_rate"] == pytest.approx(3 / 4)
    assert m["acc_answered"] == pytest.approx(2 / 3) and m["mae_answered"] == pytest.approx((2 + 10 + 7.4) / 3)
    assert m["n"] == 4


def test_an_abstention_is_never_a_hit() -> None:
    """ "Unknown" (-1) on a 3 g meal is 4 g off: the official scoring counts it as correct, Acc@7.5 does not."""
    truth = np.array([3.0, 5.0, 40.0, 60.0])
    pred = np.array([-1.0, -1.0, 41.0, -1.0])
    scores = meal_scores(pred, truth)
    assert scores["answered"].tolist() == [False, False, True, False]
    assert scores["hit"].tolist() == [False, False, True, False]
    assert scores["abs_error"].tolist() == [4.0, 6.0, 1.0, 61.0]
    m = carb_metrics(pred, truth)
    assert m["acc_7_5"] == 0.25 and m["acc_7_5_official"] == 0.75
    none = carb_metrics(np.array([-1.0, -1.0]), np.array([2.0, 3.0]))
    assert none["acc_7_5"] == 0.0 and none["acc_7_5_official"] == 1.0 and none["answer_rate"] == 0.0
    assert np.isnan(none["acc_answered"]) and np.isnan(none["mae_answered"])


def test_metrics_tolerance_is_strict() -> None:
    assert carb_metrics(np.array([17.5]), np.array([10.0]))["acc_7_5"] == 0.0
    assert carb_metrics(np.array([17.49]), np.array([10.0]))["acc_7_5"] == 1.0


def test_metrics_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="same non-zero length"):
        carb_metrics(np.array([1.0]), np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="same non-zero length"):
        carb_metrics(np.array([]), np.array([]))
    with pytest.raises(ValueError, match="finite"):
        carb_metrics(np.array([np.nan]), np.array([1.0]))
