"""PreferDiff: preference-based diffusion for sequential recommendation: the parameter form, the paper-scale preset and the paper's vocabulary."""

from __future__ import annotations

from pydantic import Field

from paperflows.params import PipelineParams, Section

METHODS = ("baseline", "method")


class DataParams(Section):
    n: int = Field(64, ge=2, le=1_000_000, description="Number of samples per seed.")


class PreferdiffParams(PipelineParams):
    data: DataParams = Field(default_factory=DataParams, description="The data.")

    PAPER_SCALE = {"data.n": 10_000, "seeds": [0, 1, 2, 3, 4]}
    PAPER_SOURCE = "Replace with the paper's settings and where they come from (section, table, config file)."
