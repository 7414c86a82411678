"""Activity cliffs as node classification: learning with activity cliff (LAC), on MoleculeACE (ICLR 2025).

The paper has no arXiv id that we found (ICLR 2025, HKUST and Tsinghua; no official code), so ``arxiv`` is
empty. The paper's card; the stages are in :mod:`pipelines.activity_cliff.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="activity_cliff",
    title="Activity cliffs as node classification: learning with activity cliff (LAC) on MoleculeACE",
    arxiv="",
    claim="LAC (node + edge tasks, a reconstruction) lowers RMSE_cliff against plain MSE, per encoder (ECFP-MLP, GIN), "
    "each arm beating the training-mean predictor",
)
