"""Pyramidal flow matching for efficient video generative modeling (Pyramid Flow, arXiv 2410.05954).

The paper's card; the stages are in :mod:`pipelines.pyramid_flow.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="pyramid_flow",
    title="Pyramidal flow matching for efficient video generative modeling",
    arxiv="2410.05954",
    claim="the pyramid matches full-resolution flow matching on pixel FD (non-inferior within 10 %, paired "
    "log-ratio) at a fraction of the training tokens/FLOPs; arms gated at 0.8 x real-frame accuracy",
)
