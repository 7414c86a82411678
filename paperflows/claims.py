"""Claims and their verdicts: the one rule every paper's report is decided by.

A paper's ``report.py`` declares its claims as :class:`ClaimSpec` constants (what is claimed, the statistic,
the :class:`Rule` with its boundary, smallest effect of interest and their source, whether it is the paper's
headline claim) and decides each one with :func:`decide` from an :class:`~components.metrics.stats.Estimate`
measured over independent units and the learning :class:`Gate` s its compared arms must pass. No report
builds a verdict itself.

The rule, for a superiority claim "the effect is above ``boundary``" (mirrored for "below"), on the 95 %
interval of the effect:

* **holds** when the whole interval lies above the boundary;
* otherwise **does not hold** when the whole interval lies below ``boundary + smallest_effect``: every effect
  that would matter is excluded, so a small or absent effect is a decided negative;
* otherwise **not resolved**, printed with how many units would decide it at the measured spread.

A non-inferiority claim ("not worse than the reference by more than ``margin``") holds when the interval
lies above ``boundary - margin`` and does not hold when it lies below it; an equivalence claim holds when the
interval lies inside ``boundary ± margin`` and does not hold when it lies outside. Before the interval:

* a gate that failed (an arm that did not beat its trivial reference: chance, popularity, the training mean,
  no merge...) makes the claim *not resolved* and names the gate: no verdict comes from arms that did not learn;
* two or more units that all gave the same value carry no estimate of the noise: *not resolved* ("no
  variance"), unless the claim declares itself ``deterministic``;
* a missing measurement (``estimate=None``) is *not resolved* with the reason given.

Each verdict is also a one-sided test at 2.5 % (its p-value is kept). Per paper, the secondary claims get a
Holm-adjusted verdict beside the raw one (:func:`holm`); the headline claim is pre-registered and is not
adjusted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from components.metrics.stats import Estimate, Interval

Verdict = Literal["holds", "does not hold", "not resolved"]
VERDICTS: tuple[Verdict, ...] = ("holds", "does not hold", "not resolved")
Direction = Literal["greater", "less"]
Kind = Literal["superiority", "non_inferiority", "equivalence"]
LEVEL = 0.95
ALPHA = (1 - LEVEL) / 2  # each verdict is a one-sided test at this level


@dataclass(frozen=True)
class Rule:
    """How a claim's effect is judged: its kind, direction, boundary, smallest effect of interest (for a
    non-inferiority or equivalence claim: the margin) and where those numbers come from.

    For an estimate on the log scale the boundary is a ratio (``None``: 1) and the smallest effect a
    relative change (0.1 = 10 %); otherwise both are in the statistic's units (``None``: 0)."""

    kind: Kind
    smallest_effect: float
    source: str
    direction: Direction = "greater"
    boundary: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("superiority", "non_inferiority", "equivalence"):
            raise ValueError(f"rule kind must be superiority, non_inferiority or equivalence, got {self.kind!r}")
        if self.direction not in ("greater", "less"):
            raise ValueError(f"rule direction must be 'greater' or 'less', got {self.direction!r}")
        if not (math.isfinite(self.smallest_effect) and self.smallest_effect > 0):
            raise ValueError(f"the smallest effect of interest must be a positive number, got {self.smallest_effect}")
        if not self.source.strip():
            raise ValueError("a rule names the source of its boundary and smallest effect")

    def on(self, log: bool) -> tuple[float, float]:
        """(boundary, smallest effect) in the estimate's test scale."""
        if log:
            ratio = 1.0 if self.boundary is None else self.boundary
            if ratio <= 0:
                raise ValueError(f"a log-scale rule needs a positive ratio boundary, got {ratio}")
            return math.log(ratio), math.log1p(self.smallest_effect)
        return (0.0 if self.boundary is None else self.boundary), self.smallest_effect

    def describe(self, log: bool = False) -> str:
        b = (1.0 if log else 0.0) if self.boundary is None else self.boundary
        s = f"{100 * self.smallest_effect:.3g} %" if log else f"{self.smallest_effect:.3g}"
        side = ">" if self.direction == "greater" else "<"
        if self.kind == "superiority":
            return f"effect {side} {b:.4g} (smallest effect of interest {s}; source: {self.source})"
        if self.kind == "non_inferiority":
            return (
                f"non-inferior: effect {side} {b:.4g} {'-' if side == '>' else '+'} margin {s} (source: {self.source})"
            )
        return f"equivalent: effect within {b:.4g} ± {s} (source: {self.source})"


def superiority(
    smallest_effect: float, source: str, *, direction: Direction = "greater", boundary: float | None = None
) -> Rule:
    """ "The effect is above ``boundary``" (``direction="less"``: below); ``smallest_effect`` (> 0) is the
    smallest difference beyond the boundary that would matter."""
    return Rule("superiority", smallest_effect, source, direction, boundary)


def non_inferiority(
    margin: float, source: str, *, direction: Direction = "greater", boundary: float | None = None
) -> Rule:
    """ "The effect is not worse than ``boundary`` by more than ``margin``" (``direction`` is the good side)."""
    return Rule("non_inferiority", margin, source, direction, boundary)


def equivalence(margin: float, source: str, *, boundary: float | None = None) -> Rule:
    """ "The effect lies within ``boundary ± margin``"."""
    return Rule("equivalence", margin, source, "greater", boundary)


@dataclass(frozen=True)
class ClaimSpec:
    """A claim as a report declares it (a module constant), before anything is measured."""

    id: str
    claim: str
    statistic: str
    rule: Rule
    headline: bool = False
    deterministic: bool = False  # an exact quantity: identical units are its answer, not a missing noise estimate
    # decided from wall-clock measurements of this machine: reported beside the results DVC tracks, never in them
    timed: bool = False

    def __post_init__(self) -> None:
        if self.timed and self.headline:
            raise ValueError(f"claim {self.id}: a headline claim is decided from results, not from wall-clock time")
        if not self.id or not self.id.replace("_", "").isalnum() or self.id != self.id.lower():
            raise ValueError(f"claim id must be a snake_case name, got {self.id!r}")


@dataclass(frozen=True)
class Gate:
    """A learning gate: a compared arm against the trivial reference it must beat, with its interval."""

    arm: str
    reference: str
    statistic: str
    effect: float
    ci: tuple[float, float]
    n: int
    passed: bool

    def describe(self) -> str:
        state = "passed" if self.passed else "FAILED"
        return (
            f"{self.arm} vs {self.reference}: {self.statistic} = {_num(self.effect)} "
            f"[{_num(self.ci[0])}, {_num(self.ci[1])}], n={self.n} ({state})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "arm": self.arm,
            "reference": self.reference,
            "statistic": self.statistic,
            "effect": _json(self.effect),
            "ci": [_json(v) for v in self.ci],
            "n": self.n,
            "passed": self.passed,
        }


def gate(
    arm: str,
    reference: str,
    estimate: Estimate | None,
    *,
    statistic: str = "arm - reference",
    margin: float = 0.0,
    direction: Direction = "greater",
) -> Gate:
    """``arm`` beats ``reference`` (chance, popularity, the training mean, no merge, ...) when the interval of
    ``estimate`` (arm minus reference, or a log-ratio) lies wholly beyond ``margin`` on ``direction``'s side.
    All units beyond it by the same amount (zero spread) also pass: every unit learned. ``None``: not measured,
    so not passed."""
    if estimate is None:
        return Gate(arm, reference, statistic, math.nan, (-math.inf, math.inf), 0, False)
    interval = estimate.interval(LEVEL)
    b = math.log(margin) if estimate.log and margin > 0 else (0.0 if estimate.log else margin)
    low, high = interval.low, interval.high
    if estimate.no_variance:
        low = high = estimate.estimate
    passed = low > b if direction == "greater" else high < b
    return Gate(
        arm,
        reference,
        statistic,
        estimate.shown(estimate.estimate),
        (estimate.shown(interval.low), estimate.shown(interval.high)),
        estimate.n,
        bool(passed),
    )


def fixed_gate(arm: str, reference: str, value: float, passed: bool, statistic: str) -> Gate:
    """A gate on one exactly known quantity (a deterministic evaluation), e.g. a validation choice that
    must fall inside its grid: ``passed`` is the condition, ``value`` what it was judged on."""
    return Gate(arm, reference, statistic, float(value), (float(value), float(value)), 1, bool(passed))


@dataclass
class Claim:
    """A claim decided by :func:`decide` (never built by hand in a report)."""

    id: str
    claim: str
    statistic: str
    effect: float
    ci: tuple[float, float]
    n: int
    verdict: Verdict
    evidence: str
    rule: Rule
    log: bool = False
    headline: bool = False
    deterministic: bool = False
    reason: str = ""  # why not resolved, when it is
    p_value: float = 1.0  # one-sided p-value of the verdict reached (of the nearer one when not resolved)
    units_needed: int | None = None
    gates: list[Gate] = field(default_factory=list)
    numbers: dict[str, float] = field(default_factory=dict)
    holm_verdict: Verdict | None = None
    timed: bool = False

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"claim {self.id}: verdict must be one of {VERDICTS}, got {self.verdict!r}")

    @property
    def holds(self) -> bool:
        return self.verdict == "holds"

    @property
    def boundary(self) -> float:
        return (1.0 if self.log else 0.0) if self.rule.boundary is None else self.rule.boundary

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "claim": self.claim,
            "statistic": self.statistic,
            "effect": _json(self.effect),
            "ci": [_json(v) for v in self.ci],
            "n": self.n,
            "verdict": self.verdict,
            "holm_verdict": self.holm_verdict or self.verdict,
            "headline": self.headline,
            "evidence": self.evidence,
            "kind": self.rule.kind,
            "direction": self.rule.direction,
            "threshold": self.boundary,
            "boundary": self.boundary,
            "smallest_effect": self.rule.smallest_effect,
            "source": self.rule.source,
            "scale": "log-ratio" if self.log else "difference",
            "deterministic": self.deterministic,
            "reason": self.reason,
            "p_value": _json(self.p_value),
            "units_needed": self.units_needed,
            "gates": [g.to_dict() for g in self.gates],
            "timed": self.timed,
            "numbers": {k: _json(v) for k, v in self.numbers.items()},
        }


def decide(
    spec: ClaimSpec,
    estimate: Estimate | None,
    *,
    gates: Sequence[Gate] = (),
    evidence: str = "",
    numbers: dict[str, float] | None = None,
    missing: str = "",
) -> Claim:
    """The claim ``spec`` decided from ``estimate`` by the platform rule (module docstring).

    ``estimate=None`` means the run did not measure it: ``missing`` says what it lacked."""
    if estimate is None:
        if not missing:
            raise ValueError(f"claim {spec.id}: no estimate, and no reason given (missing=...)")
        return _claim(spec, None, "not resolved", f"not measured: {missing}", 1.0, None, gates, evidence, numbers)
    b, s = spec.rule.on(estimate.log)
    interval = estimate.interval(LEVEL)
    failed = [g for g in gates if not g.passed]
    p_holds, p_fails = _p_values(spec.rule, estimate, b, s)
    if failed:
        reason = "gate failed: " + "; ".join(g.describe() for g in failed)
        return _claim(spec, estimate, "not resolved", reason, 1.0, None, gates, evidence, numbers)
    if estimate.no_variance and not spec.deterministic:
        reason = f"no variance: all {estimate.n} units gave the same value"
        return _claim(spec, estimate, "not resolved", reason, 1.0, None, gates, evidence, numbers)
    if estimate.test == "exact" and not spec.deterministic:
        raise ValueError(f"claim {spec.id}: an exact estimate needs a claim declared deterministic")
    verdict = _verdict(spec.rule, interval, b, s)
    if verdict == "holds":
        return _claim(spec, estimate, verdict, "", p_holds, None, gates, evidence, numbers)
    if verdict == "does not hold":
        return _claim(spec, estimate, verdict, "", p_fails, None, gates, evidence, numbers)
    needed = estimate.units_to_decide(_half_width_needed(spec.rule, estimate.estimate, b, s))
    reason = "interval contains the boundary" if spec.rule.kind != "equivalence" else "interval crosses the margin"
    if math.isinf(interval.low) or math.isinf(interval.high):
        reason = f"{estimate.n} unit(s): too few for an interval"
    return _claim(spec, estimate, verdict, reason, min(p_holds, p_fails), needed, gates, evidence, numbers)


def _verdict(rule: Rule, interval: Interval, b: float, s: float) -> Verdict:
    low, high = interval.low, interval.high
    if rule.kind == "equivalence":
        if b - s < low and high < b + s:
            return "holds"
        return "does not hold" if low > b + s or high < b - s else "not resolved"
    if rule.kind == "non_inferiority":
        line = b - s if rule.direction == "greater" else b + s
        if rule.direction == "greater":
            return "holds" if low > line else "does not hold" if high < line else "not resolved"
        return "holds" if high < line else "does not hold" if low > line else "not resolved"
    if rule.direction == "greater":
        return "holds" if low > b else "does not hold" if high < b + s else "not resolved"
    return "holds" if high < b else "does not hold" if low > b - s else "not resolved"


def _p_values(rule: Rule, est: Estimate, b: float, s: float) -> tuple[float, float]:
    """One-sided p-values of the two decisions: (holds, does not hold)."""
    if rule.kind == "equivalence":
        return max(est.p_above(b - s), est.p_below(b + s)), min(est.p_above(b + s), est.p_below(b - s))
    if rule.kind == "non_inferiority":
        line = b - s if rule.direction == "greater" else b + s
        return (
            (est.p_above(line), est.p_below(line))
            if rule.direction == "greater"
            else (est.p_below(line), est.p_above(line))
        )
    if rule.direction == "greater":
        return est.p_above(b), est.p_below(b + s)
    return est.p_below(b), est.p_above(b - s)


def _half_width_needed(rule: Rule, estimate: float, b: float, s: float) -> float:
    """The half-width under which the interval around ``estimate`` would reach a verdict."""
    if rule.kind == "equivalence":
        return abs(s - abs(estimate - b))
    if rule.kind == "non_inferiority":
        line = b - s if rule.direction == "greater" else b + s
        return abs(estimate - line)
    if rule.direction == "greater":
        return max(estimate - b, b + s - estimate)
    return max(b - estimate, estimate - (b - s))


def _claim(
    spec: ClaimSpec,
    est: Estimate | None,
    verdict: Verdict,
    reason: str,
    p: float,
    needed: int | None,
    gates: Sequence[Gate],
    evidence: str,
    numbers: dict[str, float] | None,
) -> Claim:
    if est is None:
        effect, ci, n, log = math.nan, (-math.inf, math.inf), 0, False
    else:
        interval = est.interval(LEVEL)
        effect, ci, n, log = (
            est.shown(est.estimate),
            (est.shown(interval.low), est.shown(interval.high)),
            est.n,
            est.log,
        )
    text = f"{spec.statistic} = {_num(effect)} [{_num(ci[0])}, {_num(ci[1])}], n={n}" + (
        " (ratio, from log-ratios)" if log else ""
    )
    text += f"; claimed: {spec.rule.describe(log)}"
    if reason:
        text += f"; not resolved: {reason}"
    if needed is not None:
        text += f"; about {needed} units would decide it at the measured spread"
    passed = [g for g in gates if g.passed]
    if passed:
        text += "; gates passed: " + "; ".join(f"{g.arm} > {g.reference}" for g in passed)
    if evidence:
        text += f". {evidence.strip().rstrip('.')}"
    return Claim(
        id=spec.id,
        claim=spec.claim,
        statistic=spec.statistic,
        effect=effect,
        ci=ci,
        n=n,
        verdict=verdict,
        evidence=text + ".",
        rule=spec.rule,
        log=log,
        headline=spec.headline,
        deterministic=spec.deterministic,
        reason=reason,
        p_value=p,
        units_needed=needed,
        gates=list(gates),
        numbers=dict(numbers or {}),
        timed=spec.timed,
    )


def holm(claims: Sequence[Claim], alpha: float = ALPHA) -> None:
    """Give each secondary (non-headline) claim its Holm-adjusted verdict, in place: a decided verdict
    stays decided only when its p-value survives Holm's step-down over the paper's secondary claims.
    Headline claims keep their raw verdict (pre-registered)."""
    for claim in claims:
        if claim.headline:
            claim.holm_verdict = claim.verdict
    secondary = sorted((c for c in claims if not c.headline), key=lambda c: c.p_value)
    m = len(secondary)
    rejecting = True
    for rank, claim in enumerate(secondary):
        rejecting = rejecting and claim.verdict != "not resolved" and claim.p_value <= alpha / (m - rank)
        claim.holm_verdict = claim.verdict if rejecting else "not resolved"


def _num(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    return f"{value:.3f}" if abs(value) >= 1e-3 or value == 0 else f"{value:.2e}"


def _json(value: float | None) -> float | None:
    return None if value is None or math.isinf(value) or math.isnan(value) else float(value)


__all__ = [
    "ALPHA",
    "Claim",
    "ClaimSpec",
    "Direction",
    "Gate",
    "LEVEL",
    "Rule",
    "VERDICTS",
    "Verdict",
    "decide",
    "equivalence",
    "fixed_gate",
    "gate",
    "holm",
    "non_inferiority",
    "superiority",
]
