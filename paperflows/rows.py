"""Helpers over a stage's result rows (lists of dicts read from Parquet): select, pair by unit, summarise.

Stages, plots and reports all use them; they live apart from the report module so that computing a
result never depends on how it is reported.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from components.metrics.stats import mean_ci


def rows_where(rows: Iterable[dict[str, Any]], **equal: Any) -> list[dict[str, Any]]:
    """The rows whose columns equal the given values: ``rows_where(rows, method="ties", seed=0)``."""
    return [r for r in rows if all(r.get(k) == v for k, v in equal.items())]


def values(rows: Iterable[dict[str, Any]], key: str, order_by: str = "seed", **equal: Any) -> list[float]:
    """``key`` of the matching rows, ordered by ``order_by`` (seed): a column for a table cell. Claims pair
    series by unit key with :func:`by_unit`, never by position."""
    chosen = sorted(rows_where(rows, **equal), key=lambda r: r.get(order_by, 0))
    return [float("nan") if r[key] is None else float(r[key]) for r in chosen]  # Parquet keeps NaN as null


def by_unit(
    rows: Iterable[dict[str, Any]], key: str, unit: str | Sequence[str] = "seed", **equal: Any
) -> dict[Any, float]:
    """``{unit: value of key}`` over the matching rows, the unit being one column (``"seed"``) or a tuple of
    columns (``("category", "seed")``): what :class:`~components.metrics.stats.Estimate` pairs by. A unit
    that appears twice is an error (the rows do not identify their units); missing values are left out."""
    cols = (unit,) if isinstance(unit, str) else tuple(unit)
    out: dict[Any, float] = {}
    for r in rows_where(rows, **equal):
        k = r[cols[0]] if len(cols) == 1 else tuple(r[c] for c in cols)
        if k in out:
            raise ValueError(
                f"{key}: unit {k!r} appears twice among the rows matching {equal} "
                f"(add the column that tells them apart to the unit)"
            )
        if r.get(key) is not None and not (isinstance(r[key], float) and math.isnan(r[key])):
            out[k] = float(r[key])
    return out


def pm(xs: Sequence[float], digits: int = 2) -> str:
    """``mean ± half-width of the 95% interval`` (``mean`` alone for one value)."""
    interval = mean_ci(xs)
    if interval.n < 2:
        return f"{interval.estimate:.{digits}f}"
    return f"{interval.estimate:.{digits}f} ± {interval.high - interval.estimate:.{digits}f}"


def mean(xs: Sequence[float]) -> float:
    return mean_ci(xs).estimate


__all__ = ["by_unit", "mean", "pm", "rows_where", "values"]
