"""MTSAM: multi-task fine-tuning for the Segment Anything Model, with ToRA (ICLR 2025; arXiv 2403.10971 is its
preprint, "Task-Aware Low-Rank Adaptation of Segment Anything Model", OpenReview 6N4QMbeVaO).

The paper's card; the stages are in :mod:`pipelines.mtsam.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="mtsam",
    title="MTSAM: multi-task fine-tuning of a frozen foundation model with ToRA (tensorized low-rank adaptation)",
    arxiv="2403.10971",
    claim="ToRA >= per-task LoRA on Δm over the single-task baseline, paired by seed, gated on beating decoders only",
)
