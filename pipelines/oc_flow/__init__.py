"""OC-Flow: training-free guided flow matching via optimal control (arXiv 2410.18070).

The paper's card; the stages are in :mod:`pipelines.oc_flow.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="oc_flow",
    title="OC-Flow: training-free guided flow matching via optimal control",
    arxiv="2410.18070",
    claim="OC-Flow reaches FlowGrad/D-Flow reward while staying closer to the data; γ trades reward vs "
          "fidelity; lower QM9 property MAE than D-Flow/FlowGrad; SO(3) states stay on the manifold",
)
