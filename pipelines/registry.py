"""The registered pipelines, by slug. A slug is the one name used everywhere: the module
``pipelines/<slug>.py``, the ``params.yaml`` section, the DVC stage prefix, the MLflow experiment and
the Prefect flow/deployment."""

from __future__ import annotations

import importlib

from pipelines.runtime import Pipeline

PIPELINE_MODULES: dict[str, str] = {
    "knots": "pipelines.knots",
    "nsot": "pipelines.nsot",
    "hrf": "pipelines.hrf",
    "oc_flow": "pipelines.oc_flow",
    "pyramid_flow": "pipelines.pyramid_flow",
    "nutribench": "pipelines.nutribench",
    "mm_ego": "pipelines.mm_ego",
}


class UnknownPipelineError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return self.args[0]


def slugs() -> list[str]:
    return list(PIPELINE_MODULES)


def get(slug: str) -> Pipeline:
    if slug not in PIPELINE_MODULES:
        raise UnknownPipelineError(f"unknown pipeline '{slug}'; known: {', '.join(PIPELINE_MODULES)}")
    module = importlib.import_module(PIPELINE_MODULES[slug])
    return module.PIPELINE


def all_pipelines() -> list[Pipeline]:
    return [get(s) for s in PIPELINE_MODULES]
