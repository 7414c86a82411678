"""Attention with topological masks: graphs over tokens, the power-series mask and its graph-random-feature
estimate, and linear / masked-linear / GRF-masked-linear / softmax attention with one signature
(``ATTENTIONS``); ``TopoViT`` puts them into the tiny ViT, ``TopoPointNet`` into a transformer over the points of
a cloud on its kNN graph."""

from components.attention.graphs import (
    Graph,
    GraphBatch,
    grid_edge_index,
    knn_edge_index,
    knn_neighbours,
    random_grid_graph,
)
from components.attention.linear import (
    ATTENTIONS,
    GrfMask,
    PerformerFeatures,
    ReluFeatures,
    exact_masked_linear_attention,
    grf_masked_linear_attention,
    linear_attention,
    softmax_attention,
)
from components.attention.masks import GrfFeatures, exact_mask, exact_masks, modulation_alpha, sample_grf

__all__ = [
    "ATTENTIONS",
    "Graph",
    "GraphBatch",
    "GrfFeatures",
    "GrfMask",
    "PerformerFeatures",
    "ReluFeatures",
    "exact_mask",
    "exact_masks",
    "exact_masked_linear_attention",
    "grf_masked_linear_attention",
    "grid_edge_index",
    "knn_edge_index",
    "knn_neighbours",
    "linear_attention",
    "modulation_alpha",
    "random_grid_graph",
    "sample_grf",
    "softmax_attention",
]
