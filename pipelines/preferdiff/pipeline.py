"""PreferDiff: preference-based diffusion for sequential recommendation (arXiv 2410.13117).

Reproduces <the paper's table> at CPU scale. Replace the two placeholder stages by the method's stages in
paper order, each one short: load, call components, save.
"""

from __future__ import annotations

import torch

from components.io import load_table, save_table
from paperflows import Pipeline, StageContext, derive_seed, stage
from pipelines.preferdiff import ABOUT
from pipelines.preferdiff.params import METHODS, PreferdiffParams
from pipelines.preferdiff.report import build_report

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


# --------------------------------------------------------------------------------------------------
# stage 2: the paper-shaped table and the claims
# --------------------------------------------------------------------------------------------------
@stage(params=("seeds",), deps=(SCORES,), outs=("report.json", "report.md"))
def report(ctx: StageContext) -> None:
    """The results table and the claim, decided from the measured scores."""
    build_report(load_table(ctx.path(SCORES))).save(ctx.path("report.json"))


PIPELINE = Pipeline(paper=ABOUT, params_model=PreferdiffParams, stages=(experiment, report))
