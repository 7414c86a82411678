"""MotherNet: a foundational hypernetwork for tabular classification (arXiv 2312.08598).

The paper's card; the stages are in :mod:`pipelines.mothernet.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="mothernet",
    title="MotherNet: a foundational hypernetwork for tabular classification",
    arxiv="2312.08598",
    claim=(
        "the child MLP written in one forward pass is not worse than an MLP trained by gradient descent in ROC "
        "AUC (within 0.05; the MLP baseline is still to be added)"
    ),
)
