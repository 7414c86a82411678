"""BC-PMI: diverse policy recovery from offline data with PMI-weighted behavioural cloning (arXiv 2410.15910).

The paper's card; the stages are in :mod:`pipelines.bc_pmi.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="bc_pmi",
    title="BC-PMI: diverse policy recovery from offline data with PMI-weighted behavioural cloning",
    arxiv="2410.15910",
    claim=(
        "BC-PMI > conditional BC on style accuracy at low data under greedy actions, both above a random policy, "
        "BC below the ceiling (corridor gridworld with random starts; MuJoCo Reacher-v5 with two sweep styles as "
        "data.env: reacher)"
    ),
)
