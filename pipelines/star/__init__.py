"""STAR: stability-inducing weight perturbation for continual learning (arXiv 2503.01595).

The paper's card; the stages are in :mod:`pipelines.star.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="star",
    title="STAR: stability-inducing weight perturbation for continual learning",
    arxiv="2503.01595",
    claim="ER+STAR >= ER on final average Class-IL accuracy at buffer 200 on seq-MNIST, paired by seed",
)
