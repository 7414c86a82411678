"""Linear transformer topological masking with graph random features (arXiv 2410.03462).

The paper's card; the stages are in :mod:`pipelines.grf_masking.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="grf_masking",
    title="Linear transformer topological masking with graph random features",
    arxiv="2410.03462",
    claim=(
        "GRF-masked linear attention beats unmasked linear attention on test accuracy (MNIST ViT; point clouds "
        "on kNN graphs), both arms above chance"
    ),
)
