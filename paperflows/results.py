"""Reading results back: the newest report of each paper, and one table of every claim (``paperflows report``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from components.io import load_json
from paperflows.report import claim_row, fmt
from paperflows.settings import Settings

REPORT_FILE = "report.json"


def latest_report(settings: Settings, slug: str) -> tuple[Path, dict[str, Any]] | None:
    """The newest report of ``slug``: the DVC workspace's or a run folder's, whichever is newer."""
    candidates = [settings.workspace(slug) / REPORT_FILE]
    runs = settings.runs(slug)
    if runs.is_dir():
        candidates += list(runs.glob(f"*/{REPORT_FILE}"))
    found = [p for p in candidates if p.is_file()]
    if not found:
        return None
    newest = max(found, key=lambda p: p.stat().st_mtime)
    return newest, load_json(newest)


CLAIM_COLUMNS = ["slug", "id", "verdict", "effect [95% CI]", "n", "source"]


def claims_table(reports: dict[str, tuple[Path, dict[str, Any]] | None], root: Path) -> list[dict[str, Any]]:
    """One row per claim (and per failed check) of every paper; a paper without a run says so."""
    rows = []
    for slug, found in reports.items():
        if found is None:
            rows.append({"slug": slug, "id": "(no run yet)", "verdict": None, "effect [95% CI]": "", "n": None,
                         "source": ""})
            continue
        path, report = found
        try:
            source = str(path.parent.relative_to(root))
        except ValueError:
            source = str(path.parent)
        for claim in report.get("claims", []):
            if "verdict" not in claim:  # a report written before verdicts had intervals
                rows.append({"slug": slug, "id": "(old report: rerun)", "verdict": None, "effect [95% CI]": "",
                             "n": None, "source": source})
                break
            row = claim_row(claim)
            rows.append({"slug": slug, **{k: row[k] for k in ("id", "verdict", "effect [95% CI]", "n")},
                         "source": source})
        for check in report.get("checks", []):
            rows.append({"slug": slug, "id": check["id"], "verdict": "check passed" if check["passed"]
                         else "CHECK FAILED", "effect [95% CI]": "", "n": None, "source": source})
    return rows


__all__ = ["CLAIM_COLUMNS", "claims_table", "fmt", "latest_report"]
