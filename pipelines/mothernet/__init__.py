"""MotherNet: a foundational hypernetwork for tabular classification (arXiv 2312.08598).

The paper's card; the stages are in :mod:`pipelines.mothernet.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="mothernet",
    title="MotherNet: a foundational hypernetwork for tabular classification",
    arxiv="2312.08598",
    claim=("the child MLP written in one forward pass beats an untrained hypernetwork by far, is near logistic "
           "regression and gradient boosting in ROC AUC, and predicts >= 10x faster than the hypernetwork pass"),
)
