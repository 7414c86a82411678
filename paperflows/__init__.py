"""paperflows: published ML methods as Prefect flows, DVC stages and MLflow runs.

The platform lives here; each paper is a package ``pipelines/<slug>/`` that declares its stages with the
names below (``from paperflows import Stage, Pipeline, ...``). The names load on first use, so importing
``paperflows`` (the CLI's ``--help``, ``list``, ``report``) never pulls in torch or a paper.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> module that defines it: the paper-facing API
_API = {
    "Paper": "paperflows.paper",
    "Pipeline": "paperflows.contract",
    "Stage": "paperflows.contract",
    "stage": "paperflows.contract",
    "Plot": "paperflows.contract",
    "StageContext": "paperflows.contract",
    "StageInputError": "paperflows.errors",
    "PipelineParams": "paperflows.params",
    "Section": "paperflows.params",
    "DataFile": "paperflows.params",
    "Report": "paperflows.report",
    "Claim": "paperflows.claims",
    "ClaimSpec": "paperflows.claims",
    "Check": "paperflows.report",
    "Estimate": "components.metrics.stats",
    "Gate": "paperflows.claims",
    "decide": "paperflows.claims",
    "gate": "paperflows.claims",
    "superiority": "paperflows.claims",
    "non_inferiority": "paperflows.claims",
    "equivalence": "paperflows.claims",
    "by_unit": "paperflows.rows",
    "rows_where": "paperflows.rows",
    "values": "paperflows.rows",
    "mean": "paperflows.rows",
    "pm": "paperflows.rows",
    "derive_seed": "paperflows.seeds",
    "figure": "paperflows.plots",
    "save_csv": "components.io",
}

__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    if name in _API:
        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'paperflows' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
