"""Pyramidal flow matching for efficient video generative modeling (Pyramid Flow, arXiv 2410.05954).

The paper's card; the stages are in :mod:`pipelines.pyramid_flow.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="pyramid_flow",
    title="Pyramidal flow matching for efficient video generative modeling",
    arxiv="2410.05954",
    claim="pyramid matches full-resolution flow matching at a fraction of the training tokens/FLOPs; "
          "jump renoising matters",
)
