"""MM-Ego: egocentric QA synthesis, the EgoMemoria benchmark and Memory Pointer Prompting (arXiv 2410.07177).

The paper's card; the stages are in :mod:`pipelines.mm_ego.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="mm_ego",
    title="MM-Ego: egocentric QA synthesis, EgoMemoria, Memory Pointer Prompting",
    arxiv="2410.07177",
    claim="memory-pointer frame selection beats uniform sampling on mean debiased accuracy, with answer passes that "
    "read frames (both above chance on the de-biased questions)",
)
