"""Sequential recommenders: a SASRec encoder of item histories (`sasrec`), its cross-entropy next-item model, and
a diffusion recommender over item embeddings conditioned on it (`diffrec`: DreamRec's and PreferDiff's
denoiser, per-row reconstruction errors, guided DDIM sampling and full-catalogue scores), and frozen item tables
from item text (`items`: whitened text embeddings, PreferDiff's default item representation)."""

from components.recsys.diffrec import DiffRecConfig, DiffusionRecommender, error_scores, in_batch_centroids
from components.recsys.items import text_item_table, whiten
from components.recsys.sasrec import SASRecConfig, SASRecEncoder, SASRecNextItem

__all__ = [
    "DiffRecConfig",
    "DiffusionRecommender",
    "SASRecConfig",
    "SASRecEncoder",
    "SASRecNextItem",
    "error_scores",
    "in_batch_centroids",
    "text_item_table",
    "whiten",
]
