"""Paper-shaped result tables and claims evaluated from measured numbers.

A pipeline's last stage builds a :class:`Report`: a table shaped like the paper's (method rows, metric
columns, the paper's numbers beside ours where the brief gives them) and a list of :class:`Claim` whose
``holds`` is computed from the measured numbers by the stage, never written by hand. The report is
saved as ``report.json`` + ``report.md`` and published to MLflow and as a Prefect table artifact.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from components.io import load_json, save_json, save_text
from pipelines.settings import Settings


@dataclass
class Claim:
    """A claim from the paper index, with the numbers it was decided on."""

    claim: str
    holds: bool
    evidence: str
    numbers: dict[str, float] = field(default_factory=dict)


@dataclass
class Report:
    slug: str
    title: str
    columns: list[str]
    rows: list[dict[str, Any]]
    claims: list[Claim]
    notes: list[str] = field(default_factory=list)
    extra_tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"slug": self.slug, "title": self.title, "columns": self.columns, "rows": self.rows,
                "claims": [asdict(c) for c in self.claims], "notes": self.notes,
                "extra_tables": self.extra_tables}

    def to_markdown(self) -> str:
        parts = [f"# {self.title}", "", markdown_table(self.columns, self.rows), ""]
        for name, rows in self.extra_tables.items():
            if rows:
                parts += [f"## {name}", "", markdown_table(list(rows[0]), rows), ""]
        parts += ["## Claims", ""]
        for c in self.claims:
            parts.append(f"- **{'holds' if c.holds else 'does not hold'}**: {c.claim} — {c.evidence}")
        if self.notes:
            parts += ["", "## Notes", ""] + [f"- {n}" for n in self.notes]
        return "\n".join(parts) + "\n"

    def save(self, json_path: Path) -> None:
        save_json(self.to_dict(), json_path)
        save_text(self.to_markdown(), json_path.with_suffix(".md"))


def fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        return f"{value:.{digits}f}" if abs(value) >= 10 ** -digits or value == 0 else f"{value:.2e}"
    return str(value)


def markdown_table(columns: list[str], rows: list[dict[str, Any]]) -> str:
    head = "| " + " | ".join(columns) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(fmt(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join([head, sep, *body])


def mean_std(values: list[float]) -> tuple[float, float]:
    n = len(values)
    if n == 0:
        return float("nan"), float("nan")
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return mean, math.sqrt(var)


# --------------------------------------------------------------------------------------------------
# reading reports back (paperflows report)
# --------------------------------------------------------------------------------------------------
def latest_report(settings: Settings, slug: str, report_name: str = "report.json") -> tuple[Path, dict] | None:
    """The newest report of ``slug``: the DVC workspace's or a run folder's, whichever is newer."""
    candidates = [settings.workspace(slug) / report_name]
    runs = settings.runs(slug)
    if runs.is_dir():
        candidates += list(runs.glob(f"*/{report_name}"))
    found = [p for p in candidates if p.is_file()]
    if not found:
        return None
    newest = max(found, key=lambda p: p.stat().st_mtime)
    return newest, load_json(newest)


def claims_table(reports: dict[str, tuple[Path, dict] | None], root: Path) -> list[dict[str, Any]]:
    rows = []
    for slug, found in reports.items():
        if found is None:
            rows.append({"slug": slug, "claim": "(no run yet)", "holds": None, "numbers": "", "source": ""})
            continue
        path, report = found
        try:
            source = str(path.parent.relative_to(root))
        except ValueError:
            source = str(path.parent)
        for claim in report.get("claims", []):
            numbers = ", ".join(f"{k}={fmt(v, 3)}" for k, v in claim.get("numbers", {}).items())
            rows.append({"slug": slug, "claim": claim["claim"], "holds": claim["holds"], "numbers": numbers,
                         "source": source})
    return rows
