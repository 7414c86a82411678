"""Towards hierarchical rectified flow (HRF, arXiv 2502.17436, ICLR 2025).

The paper's card; the stages are in :mod:`pipelines.hrf.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="hrf",
    title="Towards hierarchical rectified flow",
    arxiv="2502.17436",
    claim="HRF2 beats RF at matched low NFE (<= 5) on the 1-D mixture and 2-D moons (paired log-ratio of W1 / "
    "sliced W2), each arm gated on a fitted field",
)
