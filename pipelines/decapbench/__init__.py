"""DeCapBench: DCScore for detailed image captions, and FeedQuill preference tuning (arXiv 2503.07906).

The paper's card; the stages are in :mod:`pipelines.decapbench.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="decapbench",
    title="DeCapBench: DCScore for detailed image captions, and FeedQuill preference tuning",
    arxiv="2503.07906",
    claim="DCScore correlates with ground-truth quality better than BLEU/ROUGE/TF-IDF; DPO on DCScore preferences lowers hallucination",
)
