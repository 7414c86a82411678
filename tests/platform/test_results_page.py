"""What a reader of the results sees: report.md tables that survive ``|`` in their text, report.md with the
run's figures, and the self-contained HTML page of ``paperflows report --html`` (escaped, nothing external,
an index over every paper, read without paper code or torch)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from components.io import save_json
from components.metrics.stats import Estimate
from paperflows import registry
from paperflows.__main__ import main
from paperflows.claims import ClaimSpec, decide, superiority
from paperflows.params import read_params_file
from paperflows.report import Check, Report, figures, markdown_table
from tests.conftest import REPO

SO3_CHECK = "states stay on SO(3) (||R^T R - I|| and |det R - 1| < 1e-05)"
HOSTILE = '<script>alert("x")</script> & "quoted" | piped'


def gfm() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def cells(markdown: str) -> list[list[str]]:
    """The source text of every table cell in ``markdown``, row by row (headers first)."""
    rows: list[list[str]] = []
    for token in gfm().parse(markdown):
        if token.type == "tr_open":
            rows.append([])
        elif token.type == "inline" and rows and token.level >= 4:  # the inline content of a th/td
            rows[-1].append(token.content.replace("\\|", "|"))
    return rows


def rendered_cells(markdown: str) -> list[str]:
    """The rendered text of every body cell of the tables in ``markdown``."""
    page = gfm().render(markdown)
    parser = _CellText()
    parser.feed(page)
    return parser.cells


class _CellText(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self._in = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "td":
            self._in, self.cells = True, [*self.cells, ""]

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._in = False

    def handle_data(self, data: str) -> None:
        if self._in:
            self.cells[-1] += data


def png(path: Path, width: int = 60, height: int = 40, colour: tuple[int, int, int] = (40, 90, 200)) -> Path:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (width, height), colour).save(path, format="PNG")
    return path


# --------------------------------------------------------------------------------------------------
# constructed runs (shared with tests/e2e/test_results_page.py)
# --------------------------------------------------------------------------------------------------
def constructed_report(
    slug: str, claim_text: str = "method beats the baseline on accuracy", title: str | None = None
) -> Report:
    """A report with one claim of each verdict but one, a check with pipes in its text, an extra table."""
    held = decide(
        ClaimSpec("beats_baseline", claim_text, "accuracy difference", superiority(0.05, "constructed"), headline=True),
        Estimate.of({0: 0.10, 1: 0.12, 2: 0.14}),
        evidence="paired over seeds",
    )
    unresolved = decide(
        ClaimSpec("gap_grows", "the gap grows with length", "slope", superiority(0.05, "constructed")),
        Estimate.of({0: 0.04, 1: -0.02, 2: 0.01}),
    )
    return Report(
        slug=slug,
        title=title or f"{slug}: a constructed report",
        columns=["method", "accuracy", "n"],
        rows=[
            {"method": "ours", "accuracy": 0.91234, "n": 3},
            {"method": "baseline | tuned", "accuracy": 0.7911, "n": 3},
        ],
        claims=[held, unresolved],
        checks=[Check("on_manifold", SO3_CHECK, True, "max ||R^T R - I|| = 2.0e-07")],
        notes=["numbers are means over 3 seeds"],
        extra_tables={"per length": [{"length": 32, "gap": 0.1}, {"length": 128, "gap": 0.2}]},
    )


def file_params(root: Path, slug: str) -> dict:
    return copy.deepcopy(read_params_file(root / "params.yaml")[slug])


def write_run(
    folder: Path, report: Report, params: dict, pngs: tuple[str, ...] = ("plots/accuracy.png",), entry: str = "dvc"
) -> Path:
    """A finished run folder: its PNG figures, run.json and report.json/md (saved as the report stage saves)."""
    for i, rel in enumerate(pngs):
        png(folder / rel, 80 + 20 * i, 50, (30 + 60 * i, 120, 200 - 40 * i))
    save_json(
        {
            "slug": report.slug,
            "entry": entry,
            "params": params,
            "mlflow_run_id": None,
            "started": "2025-05-01T10:00:00+00:00",
        },
        folder / "run.json",
    )
    report.save(folder / "report.json")
    return folder


@pytest.fixture()
def site(project: Path) -> Path:
    """A project with the repository's dvc.yaml, a workspace run of knots, an edited run of nsot (with a
    hostile claim text) and no run of the other papers."""
    shutil.copy(REPO / "dvc.yaml", project / "dvc.yaml")
    write_run(
        project / "outputs" / "knots",
        constructed_report("knots"),
        file_params(project, "knots"),
        pngs=("plots/lambda_search.png", "plots/accuracy.png"),
    )
    edited = file_params(project, "nsot")
    edited["train"]["steps"] = edited["train"]["steps"] + 7
    write_run(
        project / "runs" / "nsot" / "20250501-100000-edited",
        constructed_report("nsot", HOSTILE),
        edited,
        pngs=("plots/1nna_vs_steps.png",),
        entry="prefect",
    )
    return project


class Page(HTMLParser):
    """Tags, attributes and text of a page, and the text of elements with a given id."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


# --------------------------------------------------------------------------------------------------
def test_markdown_table_keeps_pipes_backslashes_and_line_breaks_in_their_cell() -> None:
    rows = [{"check": SO3_CHECK, "note": "two\nlines"}, {"check": r"C:\path\|x", "note": "a|b"}]
    table = markdown_table(["check", "note"], rows)
    parsed = cells(table)
    assert [len(r) for r in parsed] == [2, 2, 2], table
    assert rendered_cells(table) == [SO3_CHECK, "two lines", r"C:\path\|x", "a|b"]


def test_report_md_shows_the_run_figures_inline_in_sorted_order(tmp_path: Path) -> None:
    for rel in (
        "plots/z_last.png",
        "plots/a_first.png",
        "summary.png",
        "models/lora.partial/item.png",
        "models/lora.old/item.png",
        "plots/.tmp_partial.png",
    ):
        png(tmp_path / rel)
    (tmp_path / "plots" / "curve.csv").write_text("x,y\n")
    report = constructed_report("oc_flow")
    report.save(tmp_path / "report.json")

    assert [p.relative_to(tmp_path).as_posix() for p in figures(tmp_path)] == [
        "plots/a_first.png",
        "plots/z_last.png",
        "summary.png",
    ]
    text = (tmp_path / "report.md").read_text()
    assert "## Figures" in text
    images = [
        (t.attrs["src"], t.content)
        for tok in gfm().parse(text)
        if tok.type == "inline"
        for t in tok.children or []
        if t.type == "image"
    ]
    assert images == [("plots/a_first.png", "a first"), ("plots/z_last.png", "z last"), ("summary.png", "summary")]
    assert all((tmp_path / src).is_file() for src, _ in images)
    claims = cells(text[text.index("## Claims") :])
    assert claims[0] == ["id", "role", "verdict", "Holm", "effect [95% CI]", "n", "boundary / smallest effect", "claim"]
    assert [r[:3] for r in claims[1:]] == [
        ["beats_baseline", "headline", "holds"],
        ["gap_grows", "secondary", "not resolved"],
    ]


def test_html_page_escapes_every_text_and_links_nothing_outside(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = site / "page.html"
    assert main(["report", "--html", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {out}"
    text = out.read_text()
    page = Page(text)
    tags = [t for t, _ in page.tags]
    assert "script" not in tags and "link" not in tags and "iframe" not in tags
    assert HOSTILE in "".join(page.text)  # shown as text, exactly
    assert "://" not in text  # no URL of any scheme: no CDN, no font, no namespace
    refs = [(tag, a.get("src") or a.get("href")) for tag, a in page.tags if a.get("src") or a.get("href")]
    assert refs and all(ref.startswith(("data:image/png;base64,", "#")) for _, ref in refs), refs
    assert sum(tag == "img" for tag, _ in refs) == 3  # knots 2 + nsot 1
    assert sum(tag == "svg" for tag in tags) == len(registry.slugs())  # one pipeline graph per registered paper


def test_html_page_index_names_runs_their_parameters_and_papers_without_runs(site: Path) -> None:
    out = site / "outputs" / "report.html"
    assert main(["report", "--html"]) == 0  # default path: outputs/report.html under the project root
    page = Page(out.read_text())
    text = " ".join(" ".join(page.text).split())
    papers = len(registry.slugs())
    assert f"2 of {papers} pipelines have a run; 2 of 4 claims hold" in text
    assert "outputs/knots" in text and "params.yaml values" in text
    nsot_steps = file_params(site, "nsot")["train"]["steps"]
    assert f"edited: train.steps={nsot_steps + 7} (params.yaml: {nsot_steps})" in text
    assert "runs/nsot/20250501-100000-edited" in text
    assert text.count("no run yet") == 2 * (papers - 2)  # the index row and the section of each paper without a run
    ids = {a.get("id") for _, a in page.tags}
    assert {"index", "knots", "nsot", "hrf", "mm_ego"} <= ids
    badges = [a.get("class") for t, a in page.tags if t == "span" and "badge" in (a.get("class") or "")]
    assert "badge holds" in badges and "badge open" in badges and "badge passed" in badges
    assert "0.91" in text and "0.79" in text and "baseline | tuned" in text and "per length" in text


def test_html_page_says_when_params_yaml_changed_after_a_workspace_run(site: Path) -> None:
    params = read_params_file(site / "params.yaml")
    params["knots"]["lora"]["r"] = params["knots"]["lora"]["r"] * 2
    (site / "params.yaml").write_text(json.dumps(params))  # JSON is YAML
    assert main(["report", "--html", str(site / "p.html")]) == 0
    text = " ".join(" ".join(Page((site / "p.html").read_text()).text).split())
    assert "params.yaml changed since this run: lora.r=" in text


def test_html_page_is_built_from_files_only(site: Path) -> None:
    """No torch, MLflow, Prefect or paper module: the page is a function of the run's files (its time, at
    most 5 s over every paper, is measured in benchmarks/cli_startup.py)."""
    for slug in ("hrf", "mm_ego", "oc_flow", "pyramid_flow", "nutribench"):  # every paper with a run and figures
        write_run(
            site / "outputs" / slug,
            constructed_report(slug),
            file_params(site, slug),
            pngs=tuple(f"plots/figure_{i}.png" for i in range(6)),
        )
    probe = (
        "import sys, time; t = time.perf_counter(); from paperflows.__main__ import main; "
        "rc = main(['report', '--html']); seconds = time.perf_counter() - t; "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'mlflow', 'prefect') "
        "or m.endswith(('.pipeline', '.params')) and m.startswith('pipelines.')); "
        "print(rc, round(seconds, 2), heavy)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=site,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PAPERFLOWS_ROOT": str(site)},
    )
    assert result.returncode == 0, result.stderr
    rc, _, heavy = result.stdout.strip().splitlines()[-1].split(" ", 2)
    assert rc == "0" and heavy == "[]", result.stdout
    assert f"7 of {len(registry.slugs())} pipelines have a run" in (site / "outputs" / "report.html").read_text()
