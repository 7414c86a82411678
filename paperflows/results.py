"""Reading results back: the newest report of each paper, and one table of every claim (``paperflows report``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.io import load_json
from paperflows.report import claim_row, fmt, read_report
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
    return newest, read_report(newest)


CLAIM_COLUMNS = ["slug", "id", "role", "verdict", "Holm", "effect [95% CI]", "n", "source"]


def claims_table(reports: dict[str, tuple[Path, dict[str, Any]] | None], root: Path) -> list[dict[str, Any]]:
    """One row per claim (and per failed check) of every paper; a paper without a run says so."""
    rows = []
    for slug, found in reports.items():
        if found is None:
            rows.append(
                {
                    "slug": slug,
                    "id": "(no run yet)",
                    "role": "",
                    "verdict": None,
                    "Holm": None,
                    "effect [95% CI]": "",
                    "n": None,
                    "source": "",
                }
            )
            continue
        path, report = found
        try:
            source = str(path.parent.relative_to(root))
        except ValueError:
            source = str(path.parent)
        for claim in report.get("claims", []):
            if "verdict" not in claim:  # a report written before verdicts had intervals
                rows.append(
                    {
                        "slug": slug,
                        "id": "(old report: rerun)",
                        "role": "",
                        "verdict": None,
                        "Holm": None,
                        "effect [95% CI]": "",
                        "n": None,
                        "source": source,
                    }
                )
                break
            row = claim_row(claim)
            rows.append(
                {
                    "slug": slug,
                    **{k: row[k] for k in ("id", "role", "verdict", "Holm", "effect [95% CI]", "n")},
                    "source": source,
                }
            )
        for check in report.get("checks", []):
            rows.append(
                {
                    "slug": slug,
                    "id": check["id"],
                    "role": "check",
                    "verdict": "check passed" if check["passed"] else "CHECK FAILED",
                    "Holm": None,
                    "effect [95% CI]": "",
                    "n": None,
                    "source": source,
                }
            )
    return rows


RUN_FILE = "run.json"  # written by the engine beside a run's outputs: slug, entry, params, MLflow run id, start


@dataclass(frozen=True)
class RunSource:
    """Where a report came from: its run folder, whether that run used the ``params.yaml`` values, and the run's
    record (how it was started, its commit and the MLflow and Prefect runs) when ``run.json`` describes these
    results (see :mod:`paperflows.provenance`)."""

    folder: str  # relative to the project root when inside it
    workspace: bool  # the DVC workspace ``outputs/<slug>/`` (runs at the params.yaml values)
    params: str  # "params.yaml values", or what differs from params.yaml
    started: str | None = None
    entry: str | None = None  # prefect, dvc, deployment, ...
    scale: str = "cpu"  # the run's params.scale (cpu, evidence, paper)
    commit: str | None = None  # the checkout the run ran (``<sha>`` or ``<sha>-dirty``)
    finished: str | None = None
    mlflow_url: str | None = None  # the MLflow parent run in the model-training view
    prefect_url: str | None = None  # the Prefect flow run
    mlflow_run_id: str | None = None
    how: str | None = None  # how it was started, in words: "paperflows run (Prefect)", "dvc exp run (sim8)"
    unmatched: str | None = None  # why run.json does not describe these results (they came from elsewhere)


def run_source(settings: Settings, slug: str, report_path: Path) -> RunSource:
    """Describe the run that wrote ``report_path`` from its ``run.json`` and the current ``params.yaml``.

    Only the values ``params.yaml`` sets for ``slug`` are compared (the raw section against the run's
    parameters; no params model is imported). A workspace run differing from them means params.yaml was
    edited after the run; a run folder under ``runs/`` is a run with edited values, and the differing keys
    are named when params.yaml sets them.

    ``run.json`` names the run only when it describes these results (its digest of ``report.json``; see
    :func:`paperflows.provenance.describes`). Otherwise, as after ``dvc exp run`` or ``dvc exp apply`` over an
    older record, the results are attributed to a DVC run, with the parameter values ``dvc.lock`` holds for
    them when it holds these results, and never to the run of the stale record.
    """
    from paperflows import provenance

    folder = report_path.parent
    try:
        shown = str(folder.relative_to(settings.root))
    except ValueError:
        shown = str(folder)
    workspace = folder.resolve() == settings.workspace(slug).resolve()
    run_file = folder / RUN_FILE
    run: Any = None
    problem = f"no {RUN_FILE} in {shown}"
    if run_file.is_file():
        try:
            run = load_json(run_file)
            problem = "" if isinstance(run, dict) else f"{run_file.name} is not an object"
        except ValueError as err:
            problem = str(err)
    lock = provenance.lock_record(settings, slug) if workspace else None
    if isinstance(run, dict):
        matched, why = provenance.describes(run, report_path, lock, workspace)
        if not matched:
            return _unrecorded_source(settings, slug, report_path, shown, workspace, lock, why)
    elif workspace and lock is not None:
        return _unrecorded_source(settings, slug, report_path, shown, workspace, lock, problem)
    else:
        return RunSource(shown, workspace, f"unknown ({problem})")
    ran = run.get("params")
    if not isinstance(ran, dict):
        return RunSource(shown, workspace, f"unknown ({run_file.name} holds no params)")
    differing = params_differences(ran, _file_section(settings.params_file, slug))
    if workspace:
        params = (
            "params.yaml values" if not differing else f"params.yaml changed since this run: {'; '.join(differing)}"
        )
    else:
        params = f"edited: {'; '.join(differing)}" if differing else "edited (keys params.yaml does not set)"
    facts = {}
    if run.get("mlflow_run_id") and not (run.get("mlflow_experiment_id") and run.get("prefect_flow_run_id")):
        facts = provenance.mlflow_run_facts(settings, run.get("mlflow_run_id"))  # a record older than its links
    return RunSource(
        shown,
        workspace,
        params,
        started=run.get("started"),
        entry=run.get("entry"),
        scale=str(run.get("scale") or ran.get("scale", "cpu")),
        commit=run.get("commit"),
        finished=run.get("finished"),
        mlflow_url=provenance.mlflow_link(settings, run, facts),
        prefect_url=provenance.prefect_link(run, facts),
        mlflow_run_id=run.get("mlflow_run_id"),
        how=_how(run),
    )


def _how(run: dict[str, Any]) -> str:
    entry = str(run.get("entry") or "")
    if entry == "dvc":
        return str(run.get("dvc_command") or "dvc repro")
    if entry == "prefect":
        return "a Prefect flow run (paperflows run or a deployment)"
    return entry or "unknown"


def _unrecorded_source(
    settings: Settings, slug: str, report_path: Path, shown: str, workspace: bool, lock: Any, why: str
) -> RunSource:
    """Results no ``run.json`` describes: in the workspace, written by DVC stages (``dvc repro``, ``dvc exp
    run``, ``dvc exp apply`` / ``checkout``); ``dvc.lock`` gives their parameters when it holds them."""
    from paperflows import provenance

    note = f"no run record for these results ({why})" if why else "no run record for these results"
    if not workspace:
        return RunSource(shown, workspace, f"unknown: {note}", unmatched=why or "no record")
    if lock is None or not lock.report_md5 or lock.report_md5 != provenance.report_md5(report_path):
        return RunSource(
            shown,
            workspace,
            f"unknown: {note}; dvc.lock does not hold them either (run `dvc repro {slug}` or `paperflows run {slug}`)",
            entry="dvc",
            how="a DVC stage run (dvc repro / dvc exp run / dvc checkout)",
            unmatched=why or "no record",
        )
    from paperflows.params import flatten

    locked = flatten(lock.params)
    differing = [
        f"{key}={locked[key]} (params.yaml: {filed})"
        for key, filed in flatten(_file_section(settings.params_file, slug)).items()
        if key in locked and locked[key] != filed
    ]
    params = (
        "params.yaml values (from dvc.lock)"
        if not differing
        else f"from dvc.lock, differing from params.yaml: {'; '.join(differing)}"
    )
    return RunSource(
        shown,
        workspace,
        params,
        entry="dvc",
        scale=str(lock.params.get("scale", "cpu")),
        how=f"a DVC stage run (dvc repro / dvc exp run / dvc exp apply); {note}",
        unmatched=why or "no record",
    )


HISTORY_LENGTH = 5  # run folders per paper in the results page's history


@dataclass(frozen=True)
class HistoryEntry:
    """One run folder of a paper, as the history lists it: newest first."""

    source: RunSource
    when: str  # when the results were written, in UTC
    held: tuple[int, int]  # claims held, claims
    headline: tuple[tuple[str, str | None], ...]  # (claim id, verdict) of each headline claim


def run_history(settings: Settings, slug: str, limit: int = HISTORY_LENGTH) -> list[HistoryEntry]:
    """The newest ``limit`` run folders of ``slug`` that hold a report (the workspace and ``runs/<slug>/*``), newest
    first by when their report was written; each with its run (:func:`run_source`), scale, headline verdicts and
    commit. A folder whose report is unreadable is left out."""
    from datetime import UTC, datetime

    candidates = [settings.workspace(slug) / REPORT_FILE]
    if settings.runs(slug).is_dir():
        candidates += list(settings.runs(slug).glob(f"*/{REPORT_FILE}"))
    found = []
    for path in candidates:
        try:
            found.append((path.stat().st_mtime, path))
        except OSError:
            continue
    entries = []
    for mtime, path in sorted(found, reverse=True)[:limit]:
        try:
            report = read_report(path)
        except ValueError:
            continue
        claims = [c for c in report.get("claims", []) if isinstance(c, dict)]
        entries.append(
            HistoryEntry(
                source=run_source(settings, slug, path),
                when=datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%d %H:%M UTC"),
                held=(sum(c.get("verdict") == "holds" for c in claims), len(claims)),
                headline=tuple((str(c.get("id")), c.get("verdict")) for c in claims if c.get("headline")),
            )
        )
    return entries


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
    return [
        f"{key}={values.get(key, '(unset)')} (params.yaml: {filed})"
        for key, filed in flatten(section).items()
        if values.get(key, missing) != filed
    ]


# --------------------------------------------------------------------------------------------------
# the headline table (first thing `paperflows report` prints) and the results record (RESULTS.md)
# --------------------------------------------------------------------------------------------------
HEADLINE_COLUMNS = ["slug", "headline claim", "verdict", "effect [95% CI]", "n", "scale", "run"]


def headline_table(reports: dict[str, tuple[Path, dict[str, Any]] | None], settings: Settings) -> list[dict[str, Any]]:
    """One row per headline claim of every paper (one or two per paper): verdict, effect [CI], n, the scale
    and the run folder it comes from."""
    rows = []
    for slug, found in reports.items():
        if found is None:
            rows.append(
                {
                    "slug": slug,
                    "headline claim": "(no run yet)",
                    "verdict": None,
                    "effect [95% CI]": "",
                    "n": None,
                    "scale": "",
                    "run": "",
                }
            )
            continue
        path, report = found
        source = run_source(settings, slug, path)
        heads = [c for c in report.get("claims", []) if c.get("headline")]
        if not heads:
            rows.append(
                {
                    "slug": slug,
                    "headline claim": "(report without a headline claim: rerun)",
                    "verdict": None,
                    "effect [95% CI]": "",
                    "n": None,
                    "scale": source.scale,
                    "run": source.folder,
                }
            )
        for claim in heads:
            row = claim_row(claim)
            rows.append(
                {
                    "slug": slug,
                    "headline claim": claim["id"],
                    "verdict": claim["verdict"],
                    "effect [95% CI]": row["effect [95% CI]"],
                    "n": claim.get("n"),
                    "scale": source.scale,
                    "run": source.folder,
                }
            )
    return rows


RESULTS_FILE = "RESULTS.md"
RECORD_COLUMNS = [
    "paper",
    "scale",
    "headline claim",
    "verdict",
    "effect [95% CI]",
    "n",
    "wall time",
    "commit",
    "params",
]
_RECORD_HEAD = """# Results

Generated by `paperflows report --markdown` from the run folders of complete runs (`outputs/<slug>/` and
`runs/<slug>/*/`, each with its `report.json` and `run.json`); never edited by hand. One row per paper, scale and
headline claim: the newest complete run at that scale. `cpu` is what `make main` runs, `evidence` the smallest budget
that decides the headline claim on 2 CPU cores (`make evidence`), `paper` the official settings. Wall time is the
whole run on 2 cores; `commit` the checkout it ran (`-dirty`: with uncommitted changes); `params` a digest of the
resolved parameters (`run.json`). A row of a (paper, scale) that has no run folder here is kept from the record it
was generated into before.

"""


@dataclass(frozen=True)
class CompleteRun:
    """A finished run folder: its report and the record the engine wrote beside it."""

    slug: str
    folder: Path
    report: dict[str, Any]
    run: dict[str, Any]

    @property
    def scale(self) -> str:
        return str(self.run.get("scale") or (self.run.get("params") or {}).get("scale", "cpu"))

    @property
    def finished(self) -> str:
        return str(self.run.get("finished", ""))


def complete_runs(settings: Settings, slug: str) -> list[CompleteRun]:
    """Every run folder of ``slug`` whose run finished (``run.json`` with ``seconds``) and wrote a report
    with claims, oldest first."""
    folders = [settings.workspace(slug)]
    if settings.runs(slug).is_dir():
        folders += sorted(p for p in settings.runs(slug).iterdir() if p.is_dir())
    found = []
    for folder in folders:
        report_file, run_file = folder / REPORT_FILE, folder / RUN_FILE
        if not (report_file.is_file() and run_file.is_file()):
            continue
        try:
            report, run = read_report(report_file), load_json(run_file)
        except ValueError:
            continue
        if isinstance(run, dict) and "seconds" in run and isinstance(report, dict) and report.get("claims"):
            from paperflows.provenance import describes

            if describes(run, report_file, None, workspace=False)[0]:  # not a record of other results
                found.append(CompleteRun(slug, folder, report, run))
    return sorted(found, key=lambda r: r.finished)


def record_rows(runs: list[CompleteRun]) -> list[dict[str, Any]]:
    """The RESULTS.md rows of the newest complete run per scale."""
    newest: dict[str, CompleteRun] = {}
    for run in runs:
        newest[run.scale] = run
    rows = []
    for scale in sorted(
        newest, key=lambda s: ("cpu", "evidence", "paper").index(s) if s in ("cpu", "evidence", "paper") else 9
    ):
        run = newest[scale]
        for claim in (c for c in run.report.get("claims", []) if c.get("headline")):
            row = claim_row(claim)
            commit = str(run.run.get("commit", "unknown"))
            short = commit[:10] + ("-dirty" if commit.endswith("-dirty") else "")
            rows.append(
                {
                    "paper": run.slug,
                    "scale": scale,
                    "headline claim": claim["id"],
                    "verdict": claim["verdict"],
                    "effect [95% CI]": row["effect [95% CI]"],
                    "n": claim.get("n"),
                    "wall time": _duration(float(run.run["seconds"])) if "seconds" in run.run else "partial rerun",
                    "commit": short,
                    "params": str(run.run.get("params_digest", "")),
                }
            )
    return rows


def read_record(path: Path) -> list[dict[str, Any]]:
    """The rows of an existing RESULTS.md (its one table), as text cells."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        if not line.startswith("| ") or line.startswith("| paper |"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == len(RECORD_COLUMNS):
            rows.append(dict(zip(RECORD_COLUMNS, cells)))
    return rows


def results_markdown(settings: Settings, slugs: list[str], previous: list[dict[str, Any]]) -> str:
    """RESULTS.md: the record of every paper and scale, from the run folders, keeping the rows of ``previous``
    for a (paper, scale) without a run folder here."""
    from paperflows.report import markdown_table

    measured = {slug: record_rows(complete_runs(settings, slug)) for slug in slugs}
    rows = []
    for slug in slugs:
        have = {r["scale"] for r in measured[slug]}
        kept = [r for r in previous if r["paper"] == slug and r["scale"] not in have]
        rows += sorted(
            measured[slug] + kept,
            key=lambda r: (
                ("cpu", "evidence", "paper").index(r["scale"]) if r["scale"] in ("cpu", "evidence", "paper") else 9
            ),
        )
    return _RECORD_HEAD + markdown_table(RECORD_COLUMNS, rows) + "\n"


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


__all__ = [
    "CLAIM_COLUMNS",
    "HEADLINE_COLUMNS",
    "RECORD_COLUMNS",
    "RESULTS_FILE",
    "HistoryEntry",
    "RunSource",
    "claims_table",
    "complete_runs",
    "fmt",
    "headline_table",
    "latest_report",
    "params_differences",
    "read_record",
    "record_rows",
    "results_markdown",
    "run_history",
    "run_source",
]
