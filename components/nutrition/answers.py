"""Reading a carbohydrate estimate out of an LLM answer, and NutriBench's metrics.

Parser (NutriBench's ``clean_output`` for carbohydrates, re-implemented):

1. if the answer contains "Output:", keep only the text after the last "Output:" (the reasoning of a
   chain-of-thought answer is dropped; a base answer has no "Output:" and is kept whole);
2. find the first ``"total_carbohydrates": <value>`` (single or double quotes around the key; the value
   may be quoted) where <value> is
   - a number (``45``, ``12.5``, ``-1``, ``.5``)           -> that number,
   - a range ``a-b``                                       -> the midpoint (a + b) / 2,
   - a list ``[a, b, ...]``                                -> the mean of its numbers;
3. with no such key, an answer that is just a number gives that number;
4. anything else gives -1 (the benchmark's "unknown").

Metrics (per meal, then averaged; :func:`meal_scores`, :func:`carb_metrics`):

* answered = pred != -1;
* absolute error |pred - gt|, a -1 answer counting as the estimate -1 as in the official scoring (MAE is
  lower-is-better);
* hit = answered and |pred - gt| < 7.5 g, so Acc@7.5 never credits an abstention. The official
  ``process_results`` scores -1 as a number, which makes "unknown" a hit on every meal under 6.5 g of
  carbs; that figure is kept as ``acc_7_5_official``.
"""

from __future__ import annotations

import re

import numpy as np

UNKNOWN = -1.0
ACC_TOLERANCE_G = 7.5
_NUMBER = r"-?(?:\d+(?:\.\d*)?|\.\d+)"
_UNSIGNED = r"(?:\d+(?:\.\d*)?|\.\d+)"
_PATTERN = re.compile(
    r"[\"']\s*total_carbohydrates\s*[\"']\s*:\s*"
    rf"(?:[\"']?\s*(?P<value>{_NUMBER}(?:\s*-\s*{_UNSIGNED})?)\s*[\"']?"
    rf"|\[\s*(?P<list>{_NUMBER}(?:\s*,\s*{_NUMBER})*)\s*\])"
)
_RANGE = re.compile(rf"^\s*(?P<a>{_NUMBER})\s*-\s*(?P<b>{_UNSIGNED})\s*$")


def _to_float(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None


def read_answer(answer: str) -> float | None:
    """The number an answer states (steps 1-3 of the module docstring; an explicit -1 is returned as -1),
    or None when no number can be read from it."""
    if not isinstance(answer, str):
        return None
    text = answer.rsplit("Output:", 1)[1] if "Output:" in answer else answer
    text = text.strip()
    match = _PATTERN.search(text)
    if match is None:
        value = _to_float(text)
        return value if value is not None and np.isfinite(value) else None
    if match.group("list") is not None:
        numbers = [float(x) for x in match.group("list").split(",")]
        return float(np.mean(numbers))
    raw = match.group("value")
    value = _to_float(raw)
    if value is not None:
        return value
    bounds = _RANGE.match(raw)
    if bounds is None:  # unreachable by construction of _PATTERN, kept as the benchmark's fallback
        return None
    return (float(bounds.group("a")) + float(bounds.group("b"))) / 2.0


def parse_answer(answer: str) -> float:
    """The carbohydrate estimate (g) in an answer, or -1 when none can be read (see the module docstring)."""
    value = read_answer(answer)
    return UNKNOWN if value is None else value


def _checked(pred: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pred = np.asarray(pred, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    if pred.shape != truth.shape or pred.ndim != 1 or pred.size == 0:
        raise ValueError(f"pred and truth must be 1-D of the same non-zero length, got {pred.shape}, {truth.shape}")
    if not (np.all(np.isfinite(pred)) and np.all(np.isfinite(truth))):
        raise ValueError("pred and truth must be finite")
    return pred, truth


def meal_scores(pred: np.ndarray, truth: np.ndarray) -> dict[str, np.ndarray]:
    """Per meal, each (N,): ``answered`` (bool), ``abs_error`` (g) and ``hit`` (bool), as in the module
    docstring (an abstention is never a hit; its error is |-1 - gt|).

    Raises:
        ValueError: shapes differ, N = 0, or a value is not finite.
    """
    pred, truth = _checked(pred, truth)
    error = np.abs(pred - truth)
    answered = pred != UNKNOWN
    return {"answered": answered, "abs_error": error, "hit": answered & (error < ACC_TOLERANCE_G)}


def carb_metrics(pred: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Metrics of predictions pred (N,) against labels truth (N,): ``acc_7_5`` (abstentions are misses),
    ``acc_7_5_official`` (-1 scored as a number), ``mae``, ``answer_rate``, ``acc_answered`` and
    ``mae_answered`` (over the answered meals; NaN when none is answered) and ``n`` = N.

    Raises:
        ValueError: shapes differ, N = 0, or a value is not finite.
    """
    scores = meal_scores(pred, truth)
    answered, error = scores["answered"], scores["abs_error"]
    some = bool(answered.any())
    return {
        "acc_7_5": float(scores["hit"].mean()),
        "acc_7_5_official": float(np.mean(error < ACC_TOLERANCE_G)),
        "mae": float(error.mean()),
        "answer_rate": float(answered.mean()),
        "acc_answered": float(scores["hit"][answered].mean()) if some else float("nan"),
        "mae_answered": float(error[answered].mean()) if some else float("nan"),
        "n": float(error.size),
    }
