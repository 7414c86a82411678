"""CSA: canonical similarity analysis for data-efficient multimodal alignment (arXiv 2410.07610).

The paper's card; the stages are in :mod:`pipelines.csa.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="csa",
    title="CSA: canonical similarity analysis for data-efficient multimodal alignment",
    arxiv="2410.07610",
    claim="with few pairs (N <= 200) CSA beats a CLIP-like InfoNCE model trained on the same pairs on zero-shot "
    "accuracy, paired by seed",
)
