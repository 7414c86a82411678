"""PreferDiff: preference-based diffusion for sequential recommendation (arXiv 2410.13117).

The paper's card; the stages are in :mod:`pipelines.preferdiff.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="preferdiff",
    title="PreferDiff: preference-based diffusion for sequential recommendation",
    arxiv="2410.13117",
    claim="PreferDiff > MSE-x0 diffusion on test Recall@5, both above a popularity ranker",
)
