"""DeCapBench: DCScore for detailed image captions, and FeedQuill preference tuning (arXiv 2503.07906).

The paper's card; the stages are in :mod:`pipelines.decapbench.pipeline`."""

from paperflows.paper import Paper

ABOUT = Paper(
    slug="decapbench",
    title="DeCapBench: DCScore for detailed image captions, and FeedQuill preference tuning",
    arxiv="2503.07906",
    claim="DCScore correlates with the human score better than BLEU-4/ROUGE-L/TF-IDF (decided with a judge that "
    "knows no caption grammar, against simulated raters)",
)
