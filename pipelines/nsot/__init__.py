"""Not-so-optimal transport flows for 3-D point clouds (NSOT, arXiv 2502.12456).

The paper's card; the stages are in :mod:`pipelines.nsot.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="nsot",
    title="Not-so-optimal transport flows for 3-D point clouds",
    arxiv="2502.12456",
    claim="offline superset OT pairs cost near exact OT at the online cost of random pairing; OT couplings "
          "beat independent at 1-5 steps on 1-NNA (CD and EMD, one model per category); small hybrid beta helps",
)
