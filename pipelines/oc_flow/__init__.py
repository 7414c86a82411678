"""OC-Flow: training-free guided flow matching via optimal control (arXiv 2410.18070).

The paper's card; the stages are in :mod:`pipelines.oc_flow.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="oc_flow",
    title="OC-Flow: training-free guided flow matching via optimal control",
    arxiv="2410.18070",
    claim="on the 2-D target reward OC-Flow ends closer to the data than FlowGrad (sliced-W2 log-ratio) at no less "
    "reward (gated on its reward being above FlowGrad's and both beating unguided)",
)
