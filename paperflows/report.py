"""Paper-shaped result tables, claims and checks: what a pipeline's report stage writes.

A pipeline's last stage builds a :class:`Report`: a table shaped like the paper's (method rows, metric
columns, the paper's numbers beside ours where the brief gives them), the paper's **claims** and the
pipeline's **checks**.

* A :class:`~paperflows.claims.Claim` is an empirical statement decided by the platform rule
  (:func:`paperflows.claims.decide`): an effect with its 95 % interval over independent units, a boundary and a
  smallest effect of interest with their source, learning gates, and one of *holds*, *does not hold* or *not
  resolved*. One or two claims per paper are its **headline** (the paper's main empirical contribution); the
  others are secondary and also get a Holm-adjusted verdict.
* A :class:`Check` is a fact true by construction, by mathematics or by the structure of the method (KnOTS-TA
  equals TA, states stay on SO(3)): it passes or fails, and is reported apart from the claims.

Claims are a pure function of loaded tables, so a pipeline's ``report.py`` can be unit-tested on
constructed numbers. The report is saved as ``report.json`` + ``report.md`` (with the run's PNG figures
inline) and published to MLflow and as a Prefect table artifact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from components.io import save_json, save_text
from components.metrics.stats import Interval
from paperflows.claims import Claim, holm
from paperflows.contract import CLAIM_METRICS
from paperflows.rows import by_unit, mean, pm, rows_where, values  # noqa: F401 - re-exported for reports


@dataclass
class Check:
    """A fact that holds by construction or by mathematics, verified on this run's numbers."""

    id: str
    check: str
    passed: bool
    evidence: str
    numbers: dict[str, float] = field(default_factory=dict)
    timed: bool = False  # judged on wall-clock measurements of this machine (kept out of the tracked report)


MAX_HEADLINE = 2


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
    timed_tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # wall-clock measurements

    def __post_init__(self) -> None:
        ids = [c.id for c in self.claims] + [c.id for c in self.checks]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{self.slug}: claim/check ids repeat: {ids}")
        if any(not isinstance(c, Claim) for c in self.claims):
            raise TypeError(f"{self.slug}: claims must be decided by paperflows.claims.decide")
        headline = [c.id for c in self.claims if c.headline]
        if self.claims and not 1 <= len(headline) <= MAX_HEADLINE:
            raise ValueError(f"{self.slug}: a report names one or two headline claims, got {headline or 'none'}")
        holm(self.claims)

    @property
    def headline(self) -> list[Claim]:
        return [c for c in self.claims if c.headline]

    def to_dict(self) -> dict[str, Any]:
        """The whole report (what readers load: :func:`read_report` joins the two files :meth:`save` writes)."""
        return {
            "slug": self.slug,
            "title": self.title,
            "columns": self.columns,
            "rows": self.rows,
            "claims": [c.to_dict() for c in self.claims],
            "checks": [asdict(c) for c in self.checks],
            "notes": self.notes,
            "extra_tables": {**self.extra_tables, **self.timed_tables},
        }

    def tracked(self) -> dict[str, Any]:
        """The part DVC tracks: the results, claims and checks decided from them. Byte-identical for equal
        results, so a rerun leaves ``dvc.lock`` still."""
        return {
            "slug": self.slug,
            "title": self.title,
            "columns": self.columns,
            "rows": self.rows,
            "claims": [c.to_dict() for c in self.claims if not c.timed],
            "checks": [asdict(c) for c in self.checks if not c.timed],
            "notes": self.notes,
            "extra_tables": self.extra_tables,
        }

    def claim_metrics(self) -> dict[str, Any]:
        """What ``dvc metrics show/diff`` and ``dvc exp show`` compare: per claim (timed ones left out: they are
        not results) its effect, interval, n and verdict (1 holds, 0 not resolved, -1 does not hold), the Holm
        verdict of the secondary claims, and the number of claims that hold."""
        code = {"holds": 1, "not resolved": 0, "does not hold": -1}
        claims: dict[str, Any] = {}
        for c in self.claims:
            if c.timed:
                continue
            low, high = c.ci
            claims[c.id] = {
                "headline": int(c.headline),
                "effect": _json_float(c.effect),
                "ci_low": _json_float(low),
                "ci_high": _json_float(high),
                "n": c.n,
                "verdict": code[c.verdict],
                "holm_verdict": code[c.holm_verdict or c.verdict],
            }
        held = sum(v["verdict"] == 1 for v in claims.values())
        heads = [c for c in self.claims if c.headline]
        return {
            "claims": claims,
            "held": held,
            "total": len(claims),
            "headline_verdict": code[heads[0].verdict] if heads else 0,
        }

    def timed_part(self) -> dict[str, Any]:
        """Claims, checks and tables measured in wall-clock time on this machine (``timings/report.json``)."""
        return {
            "claims": [c.to_dict() for c in self.claims if c.timed],
            "checks": [asdict(c) for c in self.checks if c.timed],
            "extra_tables": self.timed_tables,
        }

    def to_markdown(self, images: Sequence[str] = ()) -> str:
        """The report as GitHub-flavoured Markdown; ``images`` (figure paths relative to the report's folder)
        are shown inline in a last "Figures" section."""
        parts = [f"# {self.title}", "", markdown_table(self.columns, self.rows), ""]
        for name, rows in {**self.extra_tables, **self.timed_tables}.items():
            if rows:
                parts += [f"## {name}", "", markdown_table(list(rows[0]), rows), ""]
        rows = [claim_row(c.to_dict()) for c in self.claims]
        parts += ["## Claims", "", markdown_table(CLAIM_TABLE_COLUMNS, rows), ""]
        parts += [f"- **{c.id}** ({c.verdict}{', headline' if c.headline else ''}): {c.evidence}" for c in self.claims]
        if self.checks:
            parts += ["", "## Checks", ""]
            parts += [
                f"- **{c.id}** ({'passed' if c.passed else 'FAILED'}): {c.check} — {c.evidence}" for c in self.checks
            ]
        if self.notes:
            parts += ["", "## Notes", ""] + [f"- {n}" for n in self.notes]
        if images:
            parts += ["", "## Figures", ""]
            parts += [f"![{_escape_brackets(figure_caption(rel))}]({quote(rel)})\n" for rel in images]
        return "\n".join(parts).rstrip("\n") + "\n"

    def save(self, json_path: Path) -> None:
        """Write ``report.json`` (what DVC tracks: :meth:`tracked`), ``timings/report.json`` beside it (the
        wall-clock part, which DVC does not track) and ``report.md`` (everything; it shows every PNG figure
        found under the folder at this moment, written by earlier stages, as relative image links)."""
        root = json_path.parent
        save_json(self.tracked(), json_path)
        save_json(self.timed_part(), root / TIMED_REPORT)
        save_json(self.claim_metrics(), root / CLAIM_METRICS)
        shown = [p.relative_to(root).as_posix() for p in figures(root)]
        save_text(self.to_markdown(shown), json_path.with_suffix(".md"))


TIMED_REPORT = "timings/report.json"  # beside report.json: the claims, checks and tables measured in seconds
REPORT_OUTPUTS = ("report.json",)  # what a report stage gives DVC
REPORT_TIMINGS = ("report.md", TIMED_REPORT)  # what it writes beside them (machine-dependent, not tracked)


def read_report(json_path: Path) -> dict[str, Any]:
    """A saved report as one dict: ``report.json`` with the claims, checks and tables of ``timings/report.json``
    (when present) joined in."""
    from components.io import load_json

    report = load_json(json_path)
    timed_path = json_path.parent / TIMED_REPORT
    if isinstance(report, dict) and timed_path.is_file():
        timed = load_json(timed_path)
        if isinstance(timed, dict):
            report = {
                **report,
                "claims": [*report.get("claims", []), *timed.get("claims", [])],
                "checks": [*report.get("checks", []), *timed.get("checks", [])],
                "extra_tables": {**report.get("extra_tables", {}), **timed.get("extra_tables", {})},
            }
    return report


STAGING_SUFFIXES = (".partial", ".old")  # folders of a fan-out stage still being written, or being replaced


def figures(root: Path) -> list[Path]:
    """The PNG figures of a run: every ``*.png`` under ``root``, sorted by relative path, leaving out the
    staging folders of fan-out stages (``*.partial``, ``*.old``) and hidden files."""
    if not root.is_dir():
        return []
    found = []
    for path in root.rglob("*"):
        parts = path.relative_to(root).parts
        if (
            path.suffix.lower() == ".png"
            and path.is_file()
            and not any(p.startswith(".") for p in parts)
            and not any(p.endswith(STAGING_SUFFIXES) for p in parts[:-1])
        ):
            found.append(path)
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def figure_caption(rel: str) -> str:
    """A figure's caption from its file name: ``plots/lambda_search.png`` -> ``lambda search``."""
    return PurePosixPath(rel).stem.replace("_", " ")


CLAIM_TABLE_COLUMNS = ["id", "role", "verdict", "Holm", "effect [95% CI]", "n", "boundary / smallest effect", "claim"]


def claim_row(claim: dict[str, Any]) -> dict[str, Any]:
    """One line of a claims table from a claim as saved in report.json."""
    low, high = claim["ci"]  # an unbounded side (one seed) is saved as null
    low, high = -math.inf if low is None else low, math.inf if high is None else high
    effect = claim.get("effect")
    effect = math.nan if effect is None else effect
    boundary, smallest = claim.get("boundary", claim.get("threshold")), claim.get("smallest_effect")
    if smallest is None:
        rule = "–"
    else:
        unit = " %" if claim.get("scale") == "log-ratio" else ""
        smallest_shown = f"{100 * smallest:.3g}{unit}" if unit else f"{smallest:.3g}"
        rule = f"{fmt(boundary, 3)} / {smallest_shown}"
    return {
        "id": claim["id"],
        "role": "headline" if claim.get("headline") else "secondary",
        "verdict": claim["verdict"],
        "Holm": claim.get("holm_verdict", claim["verdict"]),
        "effect [95% CI]": f"{fmt(effect, 3)} [{fmt(low, 3)}, {fmt(high, 3)}]",
        "n": claim["n"],
        "boundary / smallest effect": rule,
        "claim": claim["claim"],
    }


# --------------------------------------------------------------------------------------------------
# helpers every report uses
# --------------------------------------------------------------------------------------------------
def fmt_interval(interval: Interval, digits: int = 3) -> str:
    return (
        f"{fmt(interval.estimate, digits)} [{fmt(interval.low, digits)}, {fmt(interval.high, digits)}], n={interval.n}"
    )


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
        return f"{value:.{digits}f}" if abs(value) >= 10**-digits or value == 0 else f"{value:.2e}"
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
