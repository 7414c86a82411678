"""TVM: token-supervised value models for tree search in math reasoning (arXiv 2407.12863).

The paper's card; the stages are in :mod:`pipelines.tvm.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="tvm",
    title="TVM: token-supervised value models for tree search in math reasoning",
    arxiv="2407.12863",
    claim="TVM-guided step beam search is not less accurate than ORM-guided (margin 2.3 points), both verifiers' "
    "Best-of-N beating a single sample",
)
