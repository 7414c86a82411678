"""Reading Your Heart: Learning ECG Words and Sentences via Pre-training ECG Language Model (arXiv 2502.10707).

The paper's card; the stages are in :mod:`pipelines.heartlang.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="heartlang",
    title="Reading Your Heart: Learning ECG Words and Sentences via Pre-training ECG Language Model",
    arxiv="2502.10707",
    claim="HeartLang's pretrained features > the same transformer at random init on linear-probe macro AUC, "
    "paired by seed, gated on VQ codes that carry content beyond lead and time",
)
