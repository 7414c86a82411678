"""PreferDiff: preference-based diffusion for sequential recommendation: the paper-shaped table and the claims, as pure functions of loaded tables."""

from __future__ import annotations

from typing import Any

from paperflows.report import Claim, Report, decide_paired, pm, values
from pipelines.preferdiff.params import METHODS


def method_beats_baseline(rows: list[dict[str, Any]]) -> Claim:
    method, baseline = values(rows, "score", method="method"), values(rows, "score", method="baseline")
    return decide_paired("method_beats_baseline", "the method scores above the baseline",
                         "mean over seeds of (method − baseline) score", method, baseline)


def build_report(rows: list[dict[str, Any]]) -> Report:
    table = [{"method": m, "score": pm(values(rows, "score", method=m)), "paper": None} for m in METHODS]
    return Report(slug="preferdiff", title="PreferDiff: preference-based diffusion for sequential recommendation", columns=["method", "score", "paper"], rows=table,
                  claims=[method_beats_baseline(rows)])
