"""Reading results back: the newest report of each paper, and one table of every claim (``paperflows report``)."""

from __future__ import annotations

from dataclasses import dataclass
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


RUN_FILE = "run.json"  # written by the engine beside a run's outputs: slug, entry, params, MLflow run id, start


@dataclass(frozen=True)
class RunSource:
    """Where a report came from: its run folder, and whether that run used the ``params.yaml`` values."""

    folder: str                # relative to the project root when inside it
    workspace: bool            # the DVC workspace ``outputs/<slug>/`` (runs at the params.yaml values)
    params: str                # "params.yaml values", or what differs from params.yaml
    started: str | None = None
    entry: str | None = None   # prefect, dvc, deployment, ...


def run_source(settings: Settings, slug: str, report_path: Path) -> RunSource:
    """Describe the run that wrote ``report_path`` from its ``run.json`` and the current ``params.yaml``.

    Only the values ``params.yaml`` sets for ``slug`` are compared (the raw section against the run's
    parameters; no params model is imported). A workspace run differing from them means params.yaml was
    edited after the run; a run folder under ``runs/`` is a run with edited values, and the differing keys
    are named when params.yaml sets them.
    """
    folder = report_path.parent
    try:
        shown = str(folder.relative_to(settings.root))
    except ValueError:
        shown = str(folder)
    workspace = folder.resolve() == settings.workspace(slug).resolve()
    run_file = folder / RUN_FILE
    if not run_file.is_file():
        return RunSource(shown, workspace, f"unknown (no {RUN_FILE} in {shown})")
    try:
        run = load_json(run_file)
    except ValueError as err:
        return RunSource(shown, workspace, f"unknown ({err})")
    ran = run.get("params") if isinstance(run, dict) else None
    if not isinstance(ran, dict):
        return RunSource(shown, workspace, f"unknown ({run_file.name} holds no params)")
    differing = params_differences(ran, _file_section(settings.params_file, slug))
    if workspace:
        params = "params.yaml values" if not differing else \
            f"params.yaml changed since this run: {'; '.join(differing)}"
    else:
        params = f"edited: {'; '.join(differing)}" if differing else "edited (keys params.yaml does not set)"
    return RunSource(shown, workspace, params, started=run.get("started"), entry=run.get("entry"))


def _file_section(params_file: Path, slug: str) -> dict[str, Any]:
    from paperflows.params import ParamsError, read_params_file

    try:
        section = read_params_file(params_file).get(slug) or {}
    except ParamsError:
        return {}
    return section if isinstance(section, dict) else {}


def params_differences(ran: dict[str, Any], section: dict[str, Any]) -> list[str]:
    """``key=run value (params.yaml: file value)`` for every key the params.yaml section sets differently."""
    from paperflows.params import flatten

    values = flatten(ran)
    missing = object()
    return [f"{key}={values.get(key, '(unset)')} (params.yaml: {filed})" for key, filed in flatten(section).items()
            if values.get(key, missing) != filed]


__all__ = ["CLAIM_COLUMNS", "RunSource", "claims_table", "fmt", "latest_report", "params_differences",
           "run_source"]
