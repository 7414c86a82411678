"""Evaluation metrics shared by the papers: statistics over repeated runs and the verdict rule's estimates
(:mod:`.stats`), classification, dense prediction, distribution distances, generation, point clouds, ranking,
retrieval and video quality."""
