"""Statistics over repeated runs: means with confidence intervals, paired tests, one Spearman.

Every claim of every paper is decided from these, so that "A beats B" means the same thing everywhere:

* :func:`mean_ci`: mean and Student-t interval of values over seeds (undefined, i.e. infinite, for n < 2:
  one seed cannot say how noisy a number is);
* :func:`paired_ci`: the same for the per-seed differences of two paired series (same seed, same data);
* :func:`bootstrap_ci`: a percentile bootstrap interval of any statistic of one sample;
* :func:`sign_flip_pvalue`: the exact (or Monte-Carlo) sign-flip permutation test of paired differences;
* :func:`spearman`: rank correlation with tied values given their average rank, and
  :func:`spearman_ci`: its bootstrap interval over pairs;
* :func:`pearson` and :func:`kendall` (tau-b), and :data:`CORRELATIONS`, the three by name.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Interval:
    """An estimate with its confidence interval and the number of values behind it."""

    estimate: float
    low: float
    high: float
    n: int
    level: float = 0.95

    def excludes(self, value: float) -> bool:
        return self.low > value or self.high < value

    def __str__(self) -> str:
        return f"{self.estimate:.4g} [{self.low:.4g}, {self.high:.4g}] (n={self.n})"


def _finite(values: Sequence[float], name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D sequence, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name}: values must be finite, got {array.tolist()}")
    return array


def mean_ci(values: Sequence[float], level: float = 0.95) -> Interval:
    """Mean and two-sided Student-t interval; for n < 2 the interval is (-inf, inf)."""
    x = _finite(values, "mean_ci")
    n = len(x)
    if n == 0:
        raise ValueError("mean_ci: no values")
    mean = float(x.mean())
    if n < 2:
        return Interval(mean, -math.inf, math.inf, n, level)
    sem = float(x.std(ddof=1)) / math.sqrt(n)
    from scipy.stats import t as student_t  # scipy.stats is slow to import; only needed here

    half = float(student_t.ppf(0.5 + level / 2, n - 1)) * sem
    return Interval(mean, mean - half, mean + half, n, level)


def paired_ci(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> Interval:
    """Interval of mean(a - b) over paired runs (a[i] and b[i] share seed i)."""
    x, y = _finite(a, "paired_ci a"), _finite(b, "paired_ci b")
    if x.shape != y.shape:
        raise ValueError(f"paired_ci: series of different lengths {len(x)} and {len(y)}")
    return mean_ci(x - y, level)


def bootstrap_ci(values: Sequence[float], statistic: Callable[[np.ndarray], float] = np.mean,
                 level: float = 0.95, n_boot: int = 2000, seed: int = 0) -> Interval:
    """Percentile bootstrap interval of ``statistic`` over resamples of ``values``."""
    x = _finite(values, "bootstrap_ci")
    if len(x) == 0:
        raise ValueError("bootstrap_ci: no values")
    estimate = float(statistic(x))
    if len(x) < 2:
        return Interval(estimate, -math.inf, math.inf, len(x), level)
    rng = np.random.default_rng(seed)
    draws = np.array([statistic(x[rng.integers(0, len(x), len(x))]) for _ in range(n_boot)], dtype=float)
    low, high = np.quantile(draws, [0.5 - level / 2, 0.5 + level / 2])
    return Interval(estimate, float(low), float(high), len(x), level)


def sign_flip_pvalue(diffs: Sequence[float], n_mc: int = 20_000, seed: int = 0) -> float:
    """Two-sided p-value of mean(diffs) = 0 by flipping signs (exact up to 16 values, else Monte Carlo)."""
    d = _finite(diffs, "sign_flip_pvalue")
    if len(d) == 0:
        raise ValueError("sign_flip_pvalue: no values")
    observed = abs(d.mean())
    if len(d) <= 16:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=len(d))))
    else:
        signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(n_mc, len(d)))
    means = np.abs((signs * d).mean(axis=1))
    return float(np.mean(means >= observed - 1e-12))


def ranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks, tied values sharing their average rank."""
    from scipy.stats import rankdata

    return rankdata(_finite(values, "ranks"), method="average")


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho: Pearson correlation of average ranks (nan when either side is constant)."""
    a, b = _finite(x, "spearman x"), _finite(y, "spearman y")
    if a.shape != b.shape or len(a) < 2:
        raise ValueError(f"spearman: need two paired series of length >= 2, got {len(a)} and {len(b)}")
    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def spearman_ci(x: Sequence[float], y: Sequence[float], level: float = 0.95, n_boot: int = 1000,
                seed: int = 0) -> Interval:
    """Spearman's rho with a bootstrap interval over (x, y) pairs."""
    a, b = _finite(x, "spearman_ci x"), _finite(y, "spearman_ci y")
    rho = spearman(a, b)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        idx = rng.integers(0, len(a), len(a))
        value = spearman(a[idx], b[idx]) if len(set(idx.tolist())) > 1 else float("nan")
        if not math.isnan(value):
            draws.append(value)
    if not draws or math.isnan(rho):
        return Interval(rho, -1.0, 1.0, len(a), level)
    low, high = np.quantile(draws, [0.5 - level / 2, 0.5 + level / 2])
    return Interval(rho, float(low), float(high), len(a), level)


def _paired(x: Sequence[float], y: Sequence[float], name: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Two paired finite series of length >= 2; None when either is constant (no correlation defined)."""
    a, b = _finite(x, f"{name} x"), _finite(y, f"{name} y")
    if a.shape != b.shape or len(a) < 2:
        raise ValueError(f"{name}: need two paired series of length >= 2, got {len(a)} and {len(b)}")
    return None if a.std() == 0 or b.std() == 0 else (a, b)


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson's r (nan when either side is constant)."""
    pair = _paired(x, y, "pearson")
    return float("nan") if pair is None else float(np.corrcoef(*pair)[0, 1])


def kendall(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b (ties in either series accounted for; nan when either side is constant)."""
    from scipy.stats import kendalltau

    pair = _paired(x, y, "kendall")
    return float("nan") if pair is None else float(kendalltau(*pair).statistic)


CORRELATIONS: dict[str, Callable[[Sequence[float], Sequence[float]], float]] = {
    "pearson": pearson, "spearman": spearman, "kendall": kendall}
