"""Not-so-optimal transport flows for 3-D point clouds (NSOT, arXiv 2502.12456).

The paper's card; the stages are in :mod:`pipelines.nsot.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="nsot",
    title="Not-so-optimal transport flows for 3-D point clouds",
    arxiv="2502.12456",
    claim="at 1-5 Euler steps NSOT (offline superset OT pairs) beats independent coupling on 1-NNA-CD, paired by "
    "(category, seed); both arms gated on beating the 100 % 1-NNA worst case",
)
