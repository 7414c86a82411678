"""Reading Your Heart: Learning ECG Words and Sentences via Pre-training ECG Language Model (arXiv 2502.10707).

The paper's card; the stages are in :mod:`pipelines.heartlang.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="heartlang",
    title="Reading Your Heart: Learning ECG Words and Sentences via Pre-training ECG Language Model",
    arxiv="2502.10707",
    claim="pretrained features > random init on macro-AUC; QRS tokens >= fixed windows at 10 % labels",
)
