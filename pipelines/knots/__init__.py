"""KnOTS: model merging with SVD to tie the KnOTS (arXiv 2410.19735).

The paper's card; the stages are in :mod:`pipelines.knots.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="knots",
    title="KnOTS: model merging with SVD to tie the KnOTS",
    arxiv="2410.19735",
    claim="KnOTS-TIES > TIES on average normalised accuracy (paired by seed; gated on each merge beating no merge, "
    "the better by >= 3 points, and lambda inside its grid)",
)
