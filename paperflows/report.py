"""Paper-shaped result tables, and claims decided from measured numbers with their uncertainty.

A pipeline's last stage builds a :class:`Report`: a table shaped like the paper's (method rows, metric
columns, the paper's numbers beside ours where the brief gives them), the paper's **claims** and the
pipeline's **checks**.

* A :class:`Claim` is an empirical statement. It carries an id, the statistic it is decided on, the
  effect with a confidence interval over seeds (paired where the runs are paired), the number of values
  ``n``, and one of three verdicts: *holds*, *does not hold*, or *not resolved* when the interval
  contains the decision boundary, or when a named precondition (e.g. "the full-resolution model reaches
  a useful accuracy") is not met. Build one with :func:`decide`.
* A :class:`Check` is a fact true by construction or by mathematics (KnOTS-TA equals TA, states stay on
  SO(3)): it passes or fails, and is reported apart from the claims.

Claims are a pure function of loaded tables, so a pipeline's ``report.py`` can be unit-tested on
constructed numbers. The report is saved as ``report.json`` + ``report.md`` (with the run's PNG figures
inline) and published to MLflow and as a Prefect table artifact.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal
from urllib.parse import quote

from components.io import save_json, save_text
from components.metrics.stats import Interval, mean_ci, paired_ci

Verdict = Literal["holds", "does not hold", "not resolved"]
VERDICTS: tuple[Verdict, ...] = ("holds", "does not hold", "not resolved")
Direction = Literal["greater", "less"]


@dataclass(frozen=True)
class Precondition:
    """What must be true of the experiment for its claim to be decidable (e.g. a baseline that learned)."""

    description: str
    met: bool
    value: float | None = None


@dataclass
class Claim:
    """A claim from the paper index, decided from measured numbers."""

    id: str
    claim: str
    statistic: str
    effect: float
    ci: tuple[float, float]
    n: int
    verdict: Verdict
    evidence: str
    threshold: float = 0.0
    direction: Direction = "greater"
    numbers: dict[str, float] = field(default_factory=dict)
    precondition: Precondition | None = None

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"claim {self.id}: verdict must be one of {VERDICTS}, got {self.verdict!r}")
        if not self.id.replace("_", "").isalnum():
            raise ValueError(f"claim id must be a snake_case name, got {self.id!r}")

    @property
    def holds(self) -> bool:
        return self.verdict == "holds"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ci"] = [_json_float(v) for v in self.ci]
        out["effect"] = _json_float(self.effect)
        return out


@dataclass
class Check:
    """A fact that holds by construction or by mathematics, verified on this run's numbers."""

    id: str
    check: str
    passed: bool
    evidence: str
    numbers: dict[str, float] = field(default_factory=dict)


def verdict_for(interval: Interval, threshold: float = 0.0, direction: Direction = "greater",
                precondition: Precondition | None = None) -> Verdict:
    """*holds* when the whole interval is on the claimed side of ``threshold``, *does not hold* when it is
    wholly on the other side, *not resolved* when it contains the threshold or a precondition is unmet."""
    if precondition is not None and not precondition.met:
        return "not resolved"
    low, high = interval.low, interval.high
    if direction == "greater":
        return "holds" if low > threshold else "does not hold" if high < threshold else "not resolved"
    return "holds" if high < threshold else "does not hold" if low > threshold else "not resolved"


def decide(id: str, claim: str, statistic: str, interval: Interval, *, threshold: float = 0.0,
           direction: Direction = "greater", evidence: str = "", numbers: dict[str, float] | None = None,
           precondition: Precondition | None = None) -> Claim:
    """A :class:`Claim` whose verdict follows from ``interval`` against ``threshold``."""
    verdict = verdict_for(interval, threshold, direction, precondition)
    side = ">" if direction == "greater" else "<"
    text = (f"{statistic} = {fmt_interval(interval)}; claimed {side} {threshold:g}")
    if precondition is not None and not precondition.met:
        text += f"; precondition not met: {precondition.description}"
    return Claim(id=id, claim=claim, statistic=statistic, effect=interval.estimate,
                 ci=(interval.low, interval.high), n=interval.n, verdict=verdict,
                 evidence=f"{text}. {evidence}".strip().rstrip(".") + "." if evidence else text + ".",
                 threshold=threshold, direction=direction, numbers=dict(numbers or {}),
                 precondition=precondition)


def decide_paired(id: str, claim: str, statistic: str, a: Sequence[float], b: Sequence[float], **kw: Any
                  ) -> Claim:
    """A claim "a > b" (or ``direction="less"``) on paired runs: the interval of the mean difference."""
    return decide(id, claim, statistic, paired_ci(a, b), **kw)


@dataclass
class Report:
    """What a pipeline's report stage writes: the paper-shaped table, claims, checks and notes."""

    slug: str
    title: str
    columns: list[str]
    rows: list[dict[str, Any]]
    claims: list[Claim]
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra_tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ids = [c.id for c in self.claims] + [c.id for c in self.checks]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{self.slug}: claim/check ids repeat: {ids}")

    def to_dict(self) -> dict[str, Any]:
        return {"slug": self.slug, "title": self.title, "columns": self.columns, "rows": self.rows,
                "claims": [c.to_dict() for c in self.claims], "checks": [asdict(c) for c in self.checks],
                "notes": self.notes, "extra_tables": self.extra_tables}

    def to_markdown(self, images: Sequence[str] = ()) -> str:
        """The report as GitHub-flavoured Markdown; ``images`` (figure paths relative to the report's folder)
        are shown inline in a last "Figures" section."""
        parts = [f"# {self.title}", "", markdown_table(self.columns, self.rows), ""]
        for name, rows in self.extra_tables.items():
            if rows:
                parts += [f"## {name}", "", markdown_table(list(rows[0]), rows), ""]
        parts += ["## Claims", "", markdown_table(["id", "verdict", "effect [95% CI]", "n", "claim"],
                                                  [claim_row(c.to_dict()) for c in self.claims]), ""]
        parts += [f"- **{c.id}** ({c.verdict}): {c.evidence}" for c in self.claims]
        if self.checks:
            parts += ["", "## Checks", ""]
            parts += [f"- **{c.id}** ({'passed' if c.passed else 'FAILED'}): {c.check} — {c.evidence}"
                      for c in self.checks]
        if self.notes:
            parts += ["", "## Notes", ""] + [f"- {n}" for n in self.notes]
        if images:
            parts += ["", "## Figures", ""]
            parts += [f"![{_escape_brackets(figure_caption(rel))}]({quote(rel)})\n" for rel in images]
        return "\n".join(parts).rstrip("\n") + "\n"

    def save(self, json_path: Path) -> None:
        """Write ``report.json`` and ``report.md`` beside it; report.md shows every PNG figure found under
        the folder at this moment (written by earlier stages), as relative image links."""
        root = json_path.parent
        save_json(self.to_dict(), json_path)
        shown = [p.relative_to(root).as_posix() for p in figures(root)]
        save_text(self.to_markdown(shown), json_path.with_suffix(".md"))


STAGING_SUFFIXES = (".partial", ".old")  # folders of a fan-out stage still being written, or being replaced


def figures(root: Path) -> list[Path]:
    """The PNG figures of a run: every ``*.png`` under ``root``, sorted by relative path, leaving out the
    staging folders of fan-out stages (``*.partial``, ``*.old``) and hidden files."""
    if not root.is_dir():
        return []
    found = []
    for path in root.rglob("*"):
        parts = path.relative_to(root).parts
        if (path.suffix.lower() == ".png" and path.is_file() and not any(p.startswith(".") for p in parts)
                and not any(p.endswith(STAGING_SUFFIXES) for p in parts[:-1])):
            found.append(path)
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def figure_caption(rel: str) -> str:
    """A figure's caption from its file name: ``plots/lambda_search.png`` -> ``lambda search``."""
    return PurePosixPath(rel).stem.replace("_", " ")


def claim_row(claim: dict[str, Any]) -> dict[str, Any]:
    """One line of a claims table from a claim as saved in report.json."""
    low, high = claim["ci"]  # an unbounded side (one seed) is saved as null
    low, high = -math.inf if low is None else low, math.inf if high is None else high
    return {"id": claim["id"], "verdict": claim["verdict"],
            "effect [95% CI]": f"{fmt(claim['effect'], 3)} [{fmt(low, 3)}, {fmt(high, 3)}]",
            "n": claim["n"], "claim": claim["claim"]}


# --------------------------------------------------------------------------------------------------
# helpers every report uses
# --------------------------------------------------------------------------------------------------
def rows_where(rows: Iterable[dict[str, Any]], **equal: Any) -> list[dict[str, Any]]:
    """The rows whose columns equal the given values: ``rows_where(rows, method="ties", seed=0)``."""
    return [r for r in rows if all(r.get(k) == v for k, v in equal.items())]


def values(rows: Iterable[dict[str, Any]], key: str, order_by: str = "seed", **equal: Any) -> list[float]:
    """``key`` of the matching rows, ordered by ``order_by`` (seed), so two series pair up by seed."""
    chosen = sorted(rows_where(rows, **equal), key=lambda r: r.get(order_by, 0))
    return [float("nan") if r[key] is None else float(r[key]) for r in chosen]  # Parquet keeps NaN as null


def pm(xs: Sequence[float], digits: int = 2) -> str:
    """``mean ± half-width of the 95% interval`` (``mean`` alone for one value)."""
    interval = mean_ci(xs)
    if interval.n < 2:
        return f"{interval.estimate:.{digits}f}"
    return f"{interval.estimate:.{digits}f} ± {interval.high - interval.estimate:.{digits}f}"


def mean(xs: Sequence[float]) -> float:
    return mean_ci(xs).estimate


def fmt_interval(interval: Interval, digits: int = 3) -> str:
    return f"{fmt(interval.estimate, digits)} [{fmt(interval.low, digits)}, {fmt(interval.high, digits)}], " \
           f"n={interval.n}"


def fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if math.isinf(value):
            return "∞" if value > 0 else "-∞"
        return f"{value:.{digits}f}" if abs(value) >= 10 ** -digits or value == 0 else f"{value:.2e}"
    return str(value)


def markdown_table(columns: list[str], rows: list[dict[str, Any]]) -> str:
    """A GitHub-flavoured Markdown table; every cell is escaped (:func:`markdown_cell`), so text holding
    ``|`` or line breaks stays in its cell."""
    head = "| " + " | ".join(markdown_cell(c) for c in columns) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(markdown_cell(fmt(r.get(c))) for c in columns) + " |" for r in rows]
    return "\n".join([head, sep, *body])


def markdown_cell(text: Any) -> str:
    r"""``text`` as the content of one Markdown table cell that renders as the literal text: backslashes and
    pipes escaped (``\``, ``\|``: CommonMark / GFM), line breaks joined by spaces."""
    escaped = str(text).replace("\\", "\\\\").replace("|", "\\|")
    return " ".join(line.strip() for line in escaped.splitlines())


def _escape_brackets(text: str) -> str:
    """Text for a Markdown link's label: backslashes and square brackets escaped."""
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def _json_float(value: float) -> float | None:
    return None if math.isinf(value) or math.isnan(value) else value

