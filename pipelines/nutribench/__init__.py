"""NutriBench: evaluating LLMs on carbohydrate estimation from meal descriptions (ICLR 2025, arXiv 2407.12843).

The paper's card; the stages are in :mod:`pipelines.nutribench.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="nutribench",
    title="NutriBench: LLM carbohydrate estimation from meal descriptions",
    arxiv="2407.12843",
    claim="RAG >= CoT >= base on Acc@7.5 for the same LLM, some arm beating the training-mean predictor",
)
