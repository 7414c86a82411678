"""Statistics over repeated runs: means with confidence intervals, paired tests, one Spearman.

Every claim of every paper is decided from these, so that "A beats B" means the same thing everywhere:

* :func:`mean_ci`: mean and Student-t interval of values over seeds (undefined, i.e. infinite, for n < 2:
  one seed cannot say how noisy a number is);
* :func:`paired_ci`: the same for the per-seed differences of two paired series (same seed, same data);
* :func:`bootstrap_ci`: a percentile bootstrap interval of any statistic of one sample;
* :func:`sign_flip_pvalue`: the exact (or Monte-Carlo) sign-flip permutation test of paired differences;
* :func:`spearman`: rank correlation with tied values given their average rank, and
  :func:`spearman_ci`: its bootstrap interval over pairs;
* :func:`pearson` and :func:`kendall` (tau-b), and :data:`CORRELATIONS`, the three by name;
* :class:`Estimate`: an effect measured over independent units (seeds, questions, ...) together with what
  it takes to test it against any value: its interval at any level and its one-sided p-values, by the
  Student t, the sign-flip permutation test, a bootstrap, or exactly (a deterministic quantity).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
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


def bootstrap_ci(
    values: Sequence[float],
    statistic: Callable[[np.ndarray], float] = np.mean,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> Interval:
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


def spearman_ci(
    x: Sequence[float], y: Sequence[float], level: float = 0.95, n_boot: int = 1000, seed: int = 0
) -> Interval:
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
    "pearson": pearson,
    "spearman": spearman,
    "kendall": kendall,
}


# --------------------------------------------------------------------------------------------------
# an effect over independent units, testable against any value
# --------------------------------------------------------------------------------------------------
Test = str  # "t" | "sign_flip" | "bootstrap" | "exact"
TESTS = ("t", "sign_flip", "bootstrap", "exact")


@dataclass(frozen=True)
class Estimate:
    """An effect measured over ``n`` independent units, with its sampling distribution.

    ``test`` says how it is tested:

    * ``"t"``: the mean of ``units`` (one value per unit: a difference, a log-ratio, a score), Student t;
    * ``"sign_flip"``: the same mean, tested by flipping the signs of ``units - value`` (no normality
      assumed; exact up to 16 units, else Monte Carlo with a fixed seed); the interval inverts the test;
    * ``"bootstrap"``: ``estimate`` with the statistic's bootstrap ``draws`` (percentile interval);
    * ``"exact"``: a deterministic quantity (no sampling error; the interval is the point).

    ``log=True`` marks an estimate on the log scale (``units`` are log-ratios): :meth:`shown` maps values
    back to ratios for display. ``keys`` name the units (seeds, ``(category, seed)``, ...), in the order
    of ``units``.
    """

    estimate: float
    n: int
    test: Test = "t"
    units: tuple[float, ...] = ()
    draws: tuple[float, ...] = ()
    keys: tuple[object, ...] = ()
    log: bool = False

    def __post_init__(self) -> None:
        if self.test not in TESTS:
            raise ValueError(f"Estimate: test must be one of {TESTS}, got {self.test!r}")
        if self.test in ("t", "sign_flip") and len(self.units) != self.n:
            raise ValueError(f"Estimate: {self.n} units declared, {len(self.units)} given")

    # -- constructors ---------------------------------------------------------------------------------
    @classmethod
    def of(cls, values: Mapping[object, float], test: Test = "t", log: bool = False) -> Estimate:
        """The mean of one value per unit (``{seed: value}``), tested by ``test`` (``"t"`` or
        ``"sign_flip"``); with ``log=True`` the values are logged first (they must be > 0)."""
        keys = tuple(values)
        x = _finite([float(values[k]) for k in keys], "Estimate.of")
        if len(x) == 0:
            raise ValueError("Estimate.of: no units")
        if log:
            if (x <= 0).any():
                raise ValueError(f"Estimate.of: log scale needs positive values, got {x.tolist()}")
            x = np.log(x)
        return cls(float(x.mean()), len(x), test, tuple(float(v) for v in x), keys=keys, log=log)

    @classmethod
    def paired(
        cls, a: Mapping[object, float], b: Mapping[object, float], test: Test = "t", log: bool = False
    ) -> Estimate:
        """``a - b`` per unit (or ``log(a / b)`` with ``log=True``), the units matched by key (seed,
        ``(category, seed)``...), never by position: keys present on one side only are an error."""
        only_a, only_b = [k for k in a if k not in b], [k for k in b if k not in a]
        if only_a or only_b:
            raise ValueError(
                f"paired estimate: the two arms cover different units (only in the first: "
                f"{_keys(only_a)}; only in the second: {_keys(only_b)})"
            )
        keys = _sorted(a)
        x = _finite([float(a[k]) for k in keys], "Estimate.paired a")
        y = _finite([float(b[k]) for k in keys], "Estimate.paired b")
        if len(x) == 0:
            raise ValueError("Estimate.paired: no units")
        if log:
            if (x <= 0).any() or (y <= 0).any():
                raise ValueError("Estimate.paired: a log-ratio needs positive values on both sides")
            d = np.log(x) - np.log(y)
        else:
            d = x - y
        return cls(float(d.mean()), len(d), test, tuple(float(v) for v in d), keys=keys, log=log)

    @classmethod
    def bootstrap(cls, estimate: float, draws: Sequence[float], n: int, log: bool = False) -> Estimate:
        """A statistic and its bootstrap draws over ``n`` units (resampled units, e.g. questions x seeds)."""
        d = np.asarray(draws, dtype=float)
        d = d[np.isfinite(d)]
        if not math.isfinite(estimate):
            raise ValueError(f"Estimate.bootstrap: the estimate must be finite, got {estimate}")
        return cls(float(estimate), int(n), "bootstrap", draws=tuple(float(v) for v in d), log=log)

    @classmethod
    def resampled(
        cls,
        statistic: Callable[..., float],
        sizes: Sequence[int],
        n_boot: int = 2000,
        seed: int = 0,
        n: int | None = None,
        log: bool = False,
    ) -> Estimate:
        """``statistic(*indices)`` on all units and on ``n_boot`` bootstrap resamples that draw each axis's units
        independently with replacement: one axis is the plain bootstrap over units (meals, questions), two a
        crossed bootstrap (seeds x questions: both sources of variation resampled). ``statistic`` receives one
        index array per axis (``np.arange(size)`` for the estimate itself). ``n``: the units the estimate stands
        for (default: the product of the sizes)."""
        sizes = [int(size) for size in sizes]
        if not sizes or min(sizes) < 1:
            raise ValueError(f"Estimate.resampled: every axis needs at least one unit, got sizes {sizes}")
        point = float(statistic(*(np.arange(size) for size in sizes)))
        rng = np.random.default_rng(seed)
        draws = [float(statistic(*(rng.integers(0, size, size) for size in sizes))) for _ in range(n_boot)]
        return cls.bootstrap(point, draws, int(np.prod(sizes)) if n is None else n, log=log)

    @classmethod
    def exact(cls, value: float, n: int = 1, log: bool = False) -> Estimate:
        """A deterministic quantity (computed exactly, or the same on every unit by construction)."""
        if not math.isfinite(value):
            raise ValueError(f"Estimate.exact: the value must be finite, got {value}")
        return cls(float(value), int(n), "exact", log=log)

    # -- what a verdict needs -------------------------------------------------------------------------
    @property
    def spread(self) -> float:
        """Standard deviation of one unit's value (from the bootstrap: its standard error times sqrt(n));
        nan when it cannot be measured (n < 2, exact)."""
        if self.test in ("t", "sign_flip"):
            return float(np.std(self.units, ddof=1)) if self.n >= 2 else math.nan
        if self.test == "bootstrap" and len(self.draws) >= 2 and self.n >= 1:
            return float(np.std(self.draws, ddof=1)) * math.sqrt(self.n)
        return math.nan

    @property
    def no_variance(self) -> bool:
        """Two or more units that all gave the same value: the data carry no estimate of the noise."""
        if self.test in ("t", "sign_flip"):
            return self.n >= 2 and float(np.ptp(self.units)) == 0.0
        if self.test == "bootstrap":
            return self.n >= 2 and (len(self.draws) == 0 or float(np.ptp(self.draws)) == 0.0)
        return False

    def interval(self, level: float = 0.95) -> Interval:
        """Two-sided interval at ``level`` (in the test's scale: log-ratios when ``log``)."""
        est = self.estimate
        if self.test == "exact":
            return Interval(est, est, est, self.n, level)
        if self.test == "bootstrap":
            if self.n < 2 or len(self.draws) < 2:
                return Interval(est, -math.inf, math.inf, self.n, level)
            low, high = np.quantile(self.draws, [0.5 - level / 2, 0.5 + level / 2])
            return Interval(est, float(low), float(high), self.n, level)
        if self.n < 2:
            return Interval(est, -math.inf, math.inf, self.n, level)
        if self.test == "t":
            return mean_ci(self.units, level)
        return self._sign_flip_interval(level)

    def p_above(self, value: float) -> float:
        """One-sided p-value against "the effect is at most ``value``" (small: the effect exceeds it)."""
        return self._p(value, +1)

    def p_below(self, value: float) -> float:
        """One-sided p-value against "the effect is at least ``value``" (small: the effect is below it)."""
        return self._p(value, -1)

    def shown(self, value: float) -> float:
        """A value of the test's scale as reported (a ratio for a log-scale estimate)."""
        return (
            math.exp(value)
            if self.log and math.isfinite(value)
            else (0.0 if self.log and value == -math.inf else value)
        )

    def units_to_decide(self, half_width: float, level: float = 0.95) -> int | None:
        """How many units an interval of half-width below ``half_width`` needs at the measured spread
        (None when the spread cannot be measured or the target is not positive)."""
        sd = self.spread
        if not (half_width > 0) or not math.isfinite(sd) or sd <= 0:
            return None
        from scipy.stats import t as student_t

        z = 1.959963984540054
        n = max(2, math.ceil((z * sd / half_width) ** 2))
        while float(student_t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n) >= half_width and n < 10**7:
            n += max(1, n // 20)
        return n

    # -- internals ------------------------------------------------------------------------------------
    def _p(self, value: float, side: int) -> float:
        est = self.estimate
        if self.test == "exact":
            return 0.0 if side * (est - value) > 0 else 1.0
        if self.test == "bootstrap":
            if self.n < 2 or len(self.draws) < 2:
                return 1.0
            d = np.asarray(self.draws)
            beyond = np.sum(d <= value) if side > 0 else np.sum(d >= value)
            return float((beyond + 1) / (len(d) + 1))
        if self.n < 2:
            return 1.0
        x = np.asarray(self.units) - value
        if self.test == "sign_flip":
            return _sign_flip_one_sided(x, side)
        sd = float(x.std(ddof=1))
        if sd == 0.0:
            return 0.0 if side * x.mean() > 0 else 1.0
        from scipy.stats import t as student_t

        return float(student_t.sf(side * x.mean() / (sd / math.sqrt(self.n)), self.n - 1))

    def _sign_flip_interval(self, level: float) -> Interval:
        """The values not rejected by either one-sided sign-flip test at (1 - level) / 2."""
        alpha = (1 - level) / 2
        x = np.asarray(self.units)
        lo_edge, hi_edge = float(x.min()), float(x.max())
        if _sign_flip_one_sided(x - lo_edge + 1e-12 * max(1.0, abs(lo_edge)), +1) > alpha:
            return Interval(self.estimate, -math.inf, math.inf, self.n, level)  # too few units to reject

        def bisect(reject_at: float, keep_at: float, side: int) -> float:
            for _ in range(60):
                mid = (reject_at + keep_at) / 2
                if _sign_flip_one_sided(x - mid, side) <= alpha:
                    reject_at = mid
                else:
                    keep_at = mid
            return reject_at

        low = bisect(lo_edge - 1e-12 * max(1.0, abs(lo_edge)), self.estimate, +1)
        high = bisect(hi_edge + 1e-12 * max(1.0, abs(hi_edge)), self.estimate, -1)
        return Interval(self.estimate, low, high, self.n, level)


def _sign_flip_one_sided(x: np.ndarray, side: int, n_mc: int = 20_000, seed: int = 0) -> float:
    """P(mean of sign-flipped ``x`` >= observed mean) for ``side`` +1 (<= for -1)."""
    observed = side * float(x.mean())
    n = len(x)
    if n <= 16:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
    else:
        signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(n_mc, n))
    means = side * (signs * x).mean(axis=1)
    return float(np.mean(means >= observed - 1e-12 * max(1.0, abs(observed))))


def _sorted(keys: Iterable[object]) -> tuple[object, ...]:
    """Unit keys in their natural order (seeds ascending), or by their text when they do not compare."""
    keys = list(keys)
    try:
        return tuple(sorted(keys))  # type: ignore[type-var]
    except TypeError:
        return tuple(sorted(keys, key=repr))


def _keys(keys: Sequence[object]) -> str:
    return "none" if not keys else ", ".join(repr(k) for k in list(keys)[:8]) + (" ..." if len(keys) > 8 else "")
