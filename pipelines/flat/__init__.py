"""FLAT: LLM unlearning with forget data only, via f-divergence loss adjustment (arXiv 2410.11143).

The paper's card; the stages are in :mod:`pipelines.flat.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="flat",
    title="FLAT: LLM unlearning with forget data only, via f-divergence loss adjustment",
    arxiv="2410.11143",
    claim="FLAT (KL) reaches the retain-only oracle's forget level (KS p > 0.05) and, there, keeps >= 90 % of the "
    "original's retain accuracy",
)
