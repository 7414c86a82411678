"""``paperflows new <slug>``: a new paper package that runs from the first minute, and everything it needs.

Writes ``pipelines/<slug>/`` (card, params, a one-stage pipeline, the report with its stage, plots), its tests
``tests/pipelines/<slug>/``, its ``params.yaml`` section and its row in the README's pipelines table, then
regenerates ``dvc.yaml`` and ``prefect.yaml``. Nothing is overwritten: an existing package, test folder,
section or row is an error named before anything is written. The steps that follow are in
``pipelines/README.md``.
"""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

from components.io import save_text

README_TABLE_HEAD = "| slug | paper | stages | headline claim |"


class ScaffoldError(ValueError):
    """The new paper cannot be added as asked (the message says what is in the way)."""


def camel(slug: str) -> str:
    return "".join(part.capitalize() for part in slug.split("_"))


FILES: dict[str, str] = {
    "pipelines/$slug/__init__.py": '''"""$title (arXiv $arxiv).

The paper's card; the stages are in :mod:`pipelines.$slug.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="$slug",
    title="$title",
    arxiv="$arxiv",
    claim="$claim",
)
''',
    "pipelines/$slug/params.py": '''"""$title: the parameter form, the paper-scale preset and the paper's vocabulary."""

from __future__ import annotations

from pydantic import Field

from paperflows.params import PipelineParams, Section

METHODS = ("baseline", "method")


class DataParams(Section):
    n: int = Field(64, ge=2, le=1_000_000, description="Number of samples per seed.")


class ${Camel}Params(PipelineParams):
    data: DataParams = Field(default_factory=DataParams, description="The data.")

    PAPER_SCALE = {"data.n": 10_000, "seeds": [0, 1, 2, 3, 4]}
    PAPER_SOURCE = "Replace with the paper's settings and where they come from (section, table, config file)."
''',
    "pipelines/$slug/pipeline.py": '''"""$title (arXiv $arxiv).

Reproduces <the paper's table> at CPU scale. Replace the placeholder stage by the method's stages in paper
order, each one short: load, call components, save. The last stage, which writes the report, is declared in
:mod:`pipelines.$slug.report` and named here by reference: computing a result never imports its report.
"""

from __future__ import annotations

import torch

from components.io import save_table
from paperflows import Pipeline, StageContext, derive_seed, stage
from pipelines.$slug import ABOUT
from pipelines.$slug.params import METHODS, ${Camel}Params

SCORES = "tables/scores.parquet"


# --------------------------------------------------------------------------------------------------
# stage 1: the experiment (§ <section>)
# --------------------------------------------------------------------------------------------------
@stage(params=("seeds", "data"), outs=(SCORES,))
def experiment(ctx: StageContext) -> None:
    """Score every method on every seed."""
    rows = []
    for seed in ctx.params.seeds:
        gen = torch.Generator().manual_seed(derive_seed(seed, "data"))
        x = torch.randn(ctx.params.data.n, generator=gen)
        for method in METHODS:
            rows.append({"seed": seed, "method": method, "score": float(x.mean())})
    save_table(rows, ctx.path(SCORES))


PIPELINE = Pipeline(paper=ABOUT, params_model=${Camel}Params, stages=(experiment,),
                    report="pipelines.$slug.report:report")
''',
    "pipelines/$slug/report.py": '''"""$title: the paper-shaped table and the claims as pure functions of loaded tables.

The report stage, the pipeline's last, is declared at the end of this module: it may import from
:mod:`pipelines.$slug.pipeline`, never the other way round.
"""

from __future__ import annotations

from typing import Any

from components.io import load_table
from components.metrics.stats import Estimate
from paperflows.claims import Claim, ClaimSpec, decide, gate, superiority
from paperflows.contract import StageContext, stage
from paperflows.report import REPORT_TIMINGS, Report
from paperflows.rows import by_unit, pm, values
from pipelines.$slug.params import METHODS
from pipelines.$slug.pipeline import SCORES

CHANCE = 0.0  # the trivial reference every compared arm must beat (chance, popularity, the training mean, ...)

METHOD_BEATS_BASELINE = ClaimSpec(
    "method_beats_baseline", "the method scores above the baseline", "method − baseline score, paired by seed",
    superiority(0.1, "replace with the paper's gap (table, row) or the brief's margin"), headline=True)
HEADLINE = (METHOD_BEATS_BASELINE,)


def method_beats_baseline(rows: list[dict[str, Any]]) -> Claim:
    method, baseline = by_unit(rows, "score", method="method"), by_unit(rows, "score", method="baseline")
    gates = [gate(arm, "chance", Estimate.of({k: v - CHANCE for k, v in arm_rows.items()}),
                  statistic="score − chance") for arm, arm_rows in (("method", method), ("baseline", baseline))]
    return decide(METHOD_BEATS_BASELINE, Estimate.paired(method, baseline), gates=gates)


def build_report(rows: list[dict[str, Any]]) -> Report:
    table = [{"method": m, "score": pm(values(rows, "score", method=m)), "paper": None} for m in METHODS]
    return Report(slug="$slug", title="$title", columns=["method", "score", "paper"], rows=table,
                  claims=[method_beats_baseline(rows)])


# --------------------------------------------------------------------------------------------------
# stage 2: the paper-shaped table and the claims
# --------------------------------------------------------------------------------------------------
@stage(params=("seeds",), deps=(SCORES,), outs=("report.json",), timings=REPORT_TIMINGS)
def report(ctx: StageContext) -> None:
    """The results table and the claim, decided from the measured scores."""
    build_report(load_table(ctx.path(SCORES))).save(ctx.path("report.json"))
''',
    "pipelines/$slug/plots.py": '''\
"""$title: the figures (paperflows.plots.figure, components.io.save_figure / save_csv)."""
''',
    "tests/pipelines/$slug/test_report.py": '''\
"""$slug report functions on constructed numbers: each verdict is reachable."""

from __future__ import annotations

from pipelines.$slug.report import method_beats_baseline


def _rows(method: list[float], baseline: list[float]) -> list[dict]:
    return [row for seed, (m, b) in enumerate(zip(method, baseline))
            for row in ({"seed": seed, "method": "method", "score": m},
                        {"seed": seed, "method": "baseline", "score": b})]


def test_each_verdict_is_reachable() -> None:
    assert method_beats_baseline(_rows([2.0, 2.1, 2.2], [1.0, 1.0, 1.1])).verdict == "holds"
    assert method_beats_baseline(_rows([1.0, 1.0, 1.1], [2.0, 2.1, 2.2])).verdict == "does not hold"
    assert method_beats_baseline(_rows([3.0, 1.0, 3.0], [2.0, 2.0, 2.0])).verdict == "not resolved"


def test_an_arm_that_did_not_learn_decides_nothing() -> None:
    claim = method_beats_baseline(_rows([0.5, 0.6, 0.4], [-0.1, 0.1, 0.0]))
    assert claim.verdict == "not resolved" and "gate failed" in claim.reason
''',
    "tests/pipelines/$slug/test_pipeline.py": '''"""$slug: one tiny Prefect run end to end."""

from __future__ import annotations

from pathlib import Path

from pipelines.$slug.params import ${Camel}Params
from pipelines.$slug.pipeline import PIPELINE

TINY = {"seeds": [0, 1], "data": {"n": 8}}


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    report = run_flow_and_check(PIPELINE, ${Camel}Params.model_validate(TINY), project, expect_weights=False)
    assert [c["id"] for c in report["claims"]] == ["method_beats_baseline"]
''',
}


def scaffold(root: Path, slug: str, title: str, arxiv: str, claim: str) -> list[Path]:
    """Write the new paper's files under ``root``; returns what was written. Refuses to overwrite."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", slug):
        raise ScaffoldError(f"slug '{slug}' must be lower-case letters, digits and _ (a Python identifier)")
    for name, value in (("title", title), ("arxiv", arxiv), ("claim", claim)):
        if not value.strip() or any(c in value for c in '"\\\n'):
            raise ScaffoldError(f"--{name} must be one line of text without quotes or backslashes")
    words = {"slug": slug, "title": title, "arxiv": arxiv, "claim": claim, "Camel": camel(slug)}
    targets = {root / Template(rel).substitute(words): Template(text).substitute(words) for rel, text in FILES.items()}
    for folder in (root / "pipelines" / slug, root / "tests" / "pipelines" / slug):
        if folder.exists():
            raise ScaffoldError(f"{folder} already exists")
    params_file, readme = root / "params.yaml", root / "README.md"
    import yaml

    if slug in (yaml.safe_load(params_file.read_text()) or {}):
        raise ScaffoldError(f"{params_file} already has a section '{slug}'")
    readme_text = readme.read_text()
    if f"| `{slug}` |" in readme_text:
        raise ScaffoldError(f"{readme} already has a row for '{slug}'")
    if README_TABLE_HEAD not in readme_text:
        raise ScaffoldError(f"{readme} has no pipelines table (a line '{README_TABLE_HEAD}')")
    for path, text in targets.items():
        save_text(text, path)
    section = {slug: {"scale": "cpu", "seeds": [0, 1, 2], "data": {"n": 64}}}
    save_text(params_file.read_text().rstrip("\n") + "\n" + yaml.safe_dump(section, sort_keys=False), params_file)
    save_text(
        _add_readme_row(readme_text, f"| `{slug}` | {title} (arXiv {arxiv}) | experiment → report | {claim} |"), readme
    )
    return [*targets, params_file, readme]


def _add_readme_row(text: str, row: str) -> str:
    lines = text.split("\n")
    start = lines.index(README_TABLE_HEAD)
    end = start + 2
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join(lines[:end] + [row] + lines[end:])
