"""Towards hierarchical rectified flow (HRF, arXiv 2502.17436, ICLR 2025).

The paper's card; the stages are in :mod:`pipelines.hrf.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="hrf",
    title="Towards hierarchical rectified flow",
    arxiv="2502.17436",
    claim="HRF velocity is multi-modal and paths cross where RF's cannot; quality vs NFE curves against RF",
)
