"""The results page: one self-contained HTML file over every pipeline (``paperflows report --html``).

For each paper the page shows the newest report (the DVC workspace's or a run folder's, as
``paperflows report`` picks it): the paper-shaped table, the extra tables, every claim with its verdict,
effect and 95% interval, the checks, the notes, the run's PNG figures and the pipeline's graph (the SVG of
:mod:`paperflows.graph`). An index on top lists the papers with their claims held, the run folder and
whether that run used the ``params.yaml`` values.

Each paper's section names the run its results come from (:func:`paperflows.results.run_source`: the record in
``run.json`` only when its digest matches the results, else the DVC run ``dvc.lock`` witnesses), with the commit
and links to the run's MLflow parent run and Prefect flow run (on the UIs ``paperflows ui`` serves), and a short
history: the newest few run folders of the paper with their scale, headline verdicts, time and commit.

The file needs nothing else to be read: the style sheet is inline, figures are ``data:`` URIs, the graph
is inline SVG and there is no script. The only links that leave the page are those to the run's MLflow and
Prefect pages on the local UIs. It is built from ``report.json``, ``run.json``, ``dvc.lock``, the PNG files and
``dvc.yaml`` alone (no paper code, no torch), and every text from them is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from components.io import save_text
from paperflows import graph as pipeline_graph
from paperflows import registry
from paperflows.provenance import short_time
from paperflows.report import claim_row, figure_caption, figures, fmt
from paperflows.results import HistoryEntry, RunSource, latest_report, run_history, run_source
from paperflows.settings import WORKSPACE_DIR, Settings

DEFAULT_FILE = "report.html"  # under the workspace folder: outputs/report.html

VERDICT_CLASS = {"holds": "holds", "does not hold": "fails", "not resolved": "open"}

STYLE = """
:root { --holds: #1f7a3d; --fails: #b3261e; --open: #9a6700; --line: #d8dde3; --muted: #5f6b7a; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif;
       color: #1b1f24; background: #f6f7f9; }
header, main { max-width: 1280px; margin: 0 auto; padding: 0 20px; }
header { padding-top: 18px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 0 0 6px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.muted { color: var(--muted); }
section.paper { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 16px 20px;
                margin: 18px 0; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: 4px 0 8px; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #eef1f5; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.text { min-width: 16em; max-width: 44em; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600;
         color: #fff; white-space: nowrap; margin: 1px 2px 1px 0; }
.badge.holds, .badge.passed { background: var(--holds); }
.badge.fails, .badge.failed { background: var(--fails); }
.badge.open { background: var(--open); }
.badge.none { background: #8a94a0; }
.meta { margin: 2px 0 8px; }
.meta span { margin-right: 14px; }
figure { display: inline-block; margin: 6px 12px 6px 0; vertical-align: top; max-width: 100%; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); background: #fff; }
figcaption { font-size: 12px; color: var(--muted); }
summary { cursor: pointer; }
summary h3 { display: inline-block; }
.graph { overflow-x: auto; border: 1px solid var(--line); border-radius: 6px; background: #fff; }
.norun { font-size: 15px; color: var(--muted); }
.warn { color: var(--fails); }
code.commit { font-size: 12px; }
ul { margin: 4px 0; padding-left: 22px; }
a { color: #2a5db0; }
"""


def esc(value: Any) -> str:
    """Text as HTML (quotes included, so the result is safe in attributes too)."""
    return html.escape(str(value), quote=True)


@dataclass
class PaperResult:
    """What the page shows of one pipeline."""

    slug: str
    title: str
    arxiv: str
    claim: str
    report: dict[str, Any] | None = None
    source: RunSource | None = None
    figures: list[tuple[str, bytes]] = field(default_factory=list)  # (path relative to the run folder, PNG)
    graph: pipeline_graph.Graph | None = None
    problem: str | None = None  # the card does not import, or report.json is unreadable
    history: list[HistoryEntry] = field(default_factory=list)  # the newest run folders, newest first


def collect(settings: Settings, slugs: list[str] | None = None) -> list[PaperResult]:
    """Every pipeline's newest report, run source, figures and graph, read from files only."""
    graphs = pipeline_graph.all_from_dvc(settings.dvc_file)
    papers = []
    for slug in slugs if slugs is not None else registry.slugs():
        try:
            card = registry.paper(slug)
            paper = PaperResult(slug, card.title, card.arxiv, card.claim)
        except registry.PipelineImportError as err:
            paper = PaperResult(slug, slug, "", "", problem=str(err))
        paper.graph = graphs.get(slug)
        try:
            found = latest_report(settings, slug)
        except ValueError as err:  # a report.json that is not JSON
            paper.problem = str(err)
            found = None
        if found is not None:
            path, paper.report = found
            paper.title = paper.report.get("title") or paper.title
            paper.source = run_source(settings, slug, path)
            paper.figures = [(p.relative_to(path.parent).as_posix(), p.read_bytes()) for p in figures(path.parent)]
            paper.history = run_history(settings, slug)
        papers.append(paper)
    return papers


# --------------------------------------------------------------------------------------------------
# pieces
# --------------------------------------------------------------------------------------------------
def badge(verdict: str | None) -> str:
    """A coloured verdict badge (holds / does not hold / not resolved)."""
    if verdict is None:
        return '<span class="badge none">no verdict</span>'
    return f'<span class="badge {VERDICT_CLASS.get(verdict, "none")}">{esc(verdict)}</span>'


def _cell(value: Any) -> str:
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    return f'<td class="num">{esc(fmt(value))}</td>' if numeric else f"<td>{esc(fmt(value))}</td>"


def table(columns: list[str], rows: list[dict[str, Any]]) -> str:
    """An HTML table of ``rows`` (values formatted as in report.md; numbers right-aligned)."""
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(_cell(r.get(c)) for c in columns) + "</tr>" for r in rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _held(report: dict[str, Any]) -> tuple[int, int]:
    claims = report.get("claims", [])
    return sum(c.get("verdict") == "holds" for c in claims), len(claims)


def claims_table(claims: list[dict[str, Any]]) -> str:
    """Verdict badge, id, effect [95% CI], n, the claim and its evidence, one row per claim."""
    rows = []
    for claim in claims:
        if "verdict" not in claim or "ci" not in claim:
            rows.append(
                f"<tr><td>{badge(None)}</td><td>{esc(claim.get('id', '?'))}</td>"
                f'<td colspan="4">a report written before verdicts had intervals: rerun</td></tr>'
            )
            continue
        row = claim_row(claim)
        role = "<strong>headline</strong>" if claim.get("headline") else "secondary"
        rows.append(
            f"<tr><td>{badge(claim['verdict'])}</td><td><code>{esc(row['id'])}</code></td><td>{role}</td>"
            f"<td>{badge(row['Holm']) if not claim.get('headline') else ''}</td>"
            f'<td class="num">{esc(row["effect [95% CI]"])}</td><td class="num">{esc(fmt(row["n"]))}</td>'
            f'<td class="num">{esc(row["boundary / smallest effect"])}</td>'
            f'<td class="text">{esc(row["claim"])}</td>'
            f'<td class="text">{esc(claim.get("evidence", ""))}</td></tr>'
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "verdict",
            "id",
            "role",
            "Holm",
            "effect [95% CI]",
            "n",
            "boundary / smallest effect",
            "claim",
            "evidence",
        )
    )
    return (
        f'<div class="scroll"><table class="claims"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def checks_list(checks: list[dict[str, Any]]) -> str:
    items = []
    for check in checks:
        state = (
            '<span class="badge passed">passed</span>'
            if check.get("passed")
            else '<span class="badge failed">FAILED</span>'
        )
        items.append(
            f"<li>{state} <code>{esc(check.get('id', '?'))}</code> {esc(check.get('check', ''))}"
            f' <span class="muted">— {esc(check.get("evidence", ""))}</span></li>'
        )
    return f'<ul class="checks">{"".join(items)}</ul>'


def figure_html(rel: str, png: bytes) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (
        f'<figure><img alt="{esc(figure_caption(rel))}" src="data:image/png;base64,{data}">'
        f"<figcaption>{esc(rel)}</figcaption></figure>"
    )


def short_commit(commit: str | None) -> str:
    """``<sha>`` or ``<sha>-dirty`` shortened to 10 hex digits (``-dirty`` kept); empty when unknown."""
    if not commit or commit == "unknown":
        return ""
    return commit[:10] + ("-dirty" if commit.endswith("-dirty") else "")


def run_links(source: RunSource) -> str:
    """Links to the run's MLflow parent run and Prefect flow run (where the record names them)."""
    links = []
    if source.mlflow_url:
        links.append(
            f'<a href="{esc(source.mlflow_url)}" title="MLflow parent run {esc(source.mlflow_run_id)}">MLflow</a>'
        )
    if source.prefect_url:
        links.append(f'<a href="{esc(source.prefect_url)}">Prefect</a>')
    return " · ".join(links)


def run_meta(source: RunSource) -> str:
    """The line above a paper's results: which run wrote them, with what, when, at which commit, and its links."""
    meta = [f"run folder <code>{esc(source.folder)}</code>", f"parameters: {esc(source.params)}"]
    if source.how:
        meta.append(f"by {esc(source.how)}")
    when = source.finished or source.started
    if when:
        meta.append(f"{'finished' if source.finished else 'started'} {esc(short_time(when))}")
    commit = short_commit(source.commit)
    if commit:
        meta.append(f'commit <code class="commit">{esc(commit)}</code>')
    links = run_links(source)
    if links:
        meta.append(f'open: {links} <span class="muted">(<code>paperflows ui</code>)</span>')
    line = '<p class="meta muted">' + "".join(f"<span>{m}</span>" for m in meta) + "</p>"
    if source.unmatched:
        line += (
            '<p class="meta warn">These results were not written by the run <code>run.json</code> records '
            f"({esc(source.unmatched)}).</p>"
        )
    return line


def history_table(history: list[HistoryEntry]) -> str:
    """The paper's newest run folders: when, scale, headline verdicts, claims held, parameters, commit, links."""
    rows = []
    for entry in history:
        source = entry.source
        verdicts = "<br>".join(f"{badge(v)} <code>{esc(i)}</code>" for i, v in entry.headline) or (
            '<span class="muted">no headline claim</span>'
        )
        rows.append(
            f'<tr><td class="num">{esc(entry.when)}</td><td><code>{esc(source.folder)}</code></td>'
            f"<td>{esc(source.scale)}</td><td>{verdicts}</td>"
            f'<td class="num">{entry.held[0]} / {entry.held[1]}</td><td class="text">{esc(source.params)}</td>'
            f'<td><code class="commit">{esc(short_commit(source.commit))}</code></td><td>{run_links(source)}</td></tr>'
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("written", "run folder", "scale", "headline", "claims held", "parameters", "commit", "links")
    )
    return (
        f'<div class="scroll"><table class="history"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _index(papers: list[PaperResult]) -> str:
    rows = []
    for paper in papers:
        if paper.report is None:
            run = '<td colspan="6" class="muted">no run yet</td>'
        else:
            done, total = _held(paper.report)
            heads = [c for c in paper.report.get("claims", []) if c.get("headline")]
            headline = (
                "<br>".join(
                    f"{badge(c.get('verdict'))} <code>{esc(c['id'])}</code> "
                    f"{esc(claim_row(c)['effect [95% CI]'])}, n={esc(fmt(c.get('n')))}"
                    for c in heads
                )
                or '<span class="muted">no headline claim: rerun</span>'
            )
            scale = esc(paper.source.scale) if paper.source else ""
            verdicts = "".join(
                f'<span class="badge {VERDICT_CLASS.get(c.get("verdict"), "none")}" '
                f'title="{esc(c.get("verdict", "no verdict"))}">{esc(c.get("id", "?"))}</span>'
                for c in paper.report.get("claims", [])
            )
            source = f"<code>{esc(paper.source.folder)}</code>" if paper.source else ""
            params = esc(paper.source.params) if paper.source else ""
            run = (
                f'<td class="text">{headline}</td><td>{scale}</td><td class="num">{done} / {total}</td>'
                f'<td>{verdicts}</td><td>{source}</td><td class="text">{params}</td>'
            )
        rows.append(
            f'<tr><td><a href="#{esc(paper.slug)}"><code>{esc(paper.slug)}</code></a></td>'
            f'<td class="text">{esc(paper.title)}</td><td>{esc(paper.arxiv)}</td>{run}</tr>'
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "paper",
            "title",
            "arXiv",
            "headline claim: verdict, effect [95% CI]",
            "scale",
            "claims held",
            "verdicts",
            "run folder",
            "parameters",
        )
    )
    return (
        f'<section class="paper" id="index"><h2>Papers</h2><div class="scroll"><table class="index">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div></section>"
    )


def _paper(paper: PaperResult) -> str:
    parts = [
        f'<section class="paper" id="{esc(paper.slug)}">',
        f'<h2>{esc(paper.title)} <span class="muted">({esc(paper.slug)}'
        + (f", arXiv {esc(paper.arxiv)}" if paper.arxiv else "")
        + ")</span></h2>",
    ]
    if paper.claim:
        parts.append(f'<p class="meta muted">headline claim: {esc(paper.claim)}</p>')
    if paper.problem:
        parts.append(f'<p class="meta"><span class="badge failed">problem</span> {esc(paper.problem)}</p>')
    report = paper.report
    if report is None:
        parts.append(f'<p class="norun">no run yet: <code>paperflows run {esc(paper.slug)}</code></p>')
    else:
        if paper.source is not None:
            parts.append(run_meta(paper.source))
        parts += ["<h3>Results</h3>", table(list(report.get("columns", [])), list(report.get("rows", [])))]
        for name, rows in (report.get("extra_tables") or {}).items():
            if rows:
                parts += [f"<h3>{esc(name)}</h3>", table(list(rows[0]), rows)]
        done, total = _held(report)
        parts += [
            f'<h3>Claims <span class="muted">({done} of {total} hold)</span></h3>',
            claims_table(report.get("claims", [])),
        ]
        if report.get("checks"):
            parts += ["<h3>Checks</h3>", checks_list(report["checks"])]
        if report.get("notes"):
            parts += ["<h3>Notes</h3>", "<ul>" + "".join(f"<li>{esc(n)}</li>" for n in report["notes"]) + "</ul>"]
        if paper.figures:
            parts += [
                "<h3>Figures</h3>",
                '<div class="figures">' + "".join(figure_html(rel, png) for rel, png in paper.figures) + "</div>",
            ]
        if paper.history:
            parts += [
                f'<h3>Runs <span class="muted">(the newest {len(paper.history)} run folders)</span></h3>',
                history_table(paper.history),
            ]
    if paper.graph is None:
        parts.append('<h3>Pipeline</h3><p class="muted">not in dvc.yaml: run <code>paperflows dvc-yaml</code></p>')
    else:
        parts.append(
            f'<details open><summary><h3>Pipeline</h3></summary><div class="graph">'
            f"{pipeline_graph.to_svg(paper.graph, standalone=False)}</div></details>"
        )
    parts.append("</section>")
    return "\n".join(parts)


def render(papers: list[PaperResult], generated: datetime | None = None) -> str:
    """The whole page: a summary line, the index, then one section per paper."""
    when = (generated or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    ran = [p for p in papers if p.report is not None]
    held = sum(_held(p.report)[0] for p in ran)
    total = sum(_held(p.report)[1] for p in ran)
    summary = (
        f"{len(ran)} of {len(papers)} pipelines have a run; {held} of {total} claims hold. "
        f"Generated {when} by <code>paperflows report --html</code>."
    )
    body = "\n".join(_paper(p) for p in papers)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>paperflows results</title><style>{STYLE}</style></head><body>"
        f'<header><h1>paperflows results</h1><p class="muted">{summary}</p></header>'
        f"<main>{_index(papers)}\n{body}</main></body></html>\n"
    )


def default_path(settings: Settings) -> Path:
    """``outputs/report.html`` under the project root."""
    return settings.root / WORKSPACE_DIR / DEFAULT_FILE


def write(settings: Settings, path: Path | None = None) -> Path:
    """Build the page over every registered pipeline and write it atomically to ``path``."""
    target = path if path is not None else default_path(settings)
    return save_text(render(collect(settings)), target)
