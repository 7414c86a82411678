"""CSA: canonical similarity analysis for data-efficient multimodal alignment (arXiv 2410.07610).

The paper's card; the stages are in :mod:`pipelines.csa.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="csa",
    title="CSA: canonical similarity analysis for data-efficient multimodal alignment",
    arxiv="2410.07610",
    claim="with <= 200 pairs CSA beats a contrastive model trained on the same pairs on zero-shot accuracy and mislabel AUC; rho-weighting beats plain cosine",
)
