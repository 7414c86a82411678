"""STAR: stability-inducing weight perturbation for continual learning (arXiv 2503.01595).

The paper's card; the stages are in :mod:`pipelines.star.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="star",
    title="STAR: stability-inducing weight perturbation for continual learning",
    arxiv="2503.01595",
    claim="ER+STAR and DER+++STAR >= their bases on final average accuracy over paired seeds; perturbation "
          "invariants exact",
)
