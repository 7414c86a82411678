"""Frozen item tables from item text: PreferDiff's default item representation.

The official code (its ``embedding`` option, the mode that is not ``--ab=iids``) encodes every item's text with a
pretrained text encoder, whitens the vectors and keeps them frozen: the diffusion model then generates in a space
where items already sit by meaning, and no loss can move (or shrink) the table. Here:

* :func:`whiten`: centre the vectors, rotate them onto the eigenvectors of their covariance and scale every
  direction to unit variance (the official ``diagonalize_and_scale``); keeping only the ``dims`` directions of
  largest variance makes the table as wide as the model (PCA whitening). Each direction's sign is fixed so that
  its largest-magnitude loading is positive, so the table does not depend on the eigen-solver's sign choice;
* :func:`text_item_table`: the ``[n_items + 1, dims]`` table of item texts (row 0, the padding id, is zero; it is
  never scored and never read by the causal encoder), from any :class:`~components.llm.SentenceEncoder`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["text_item_table", "whiten"]


def whiten(vectors: np.ndarray, dims: int | None = None, eps: float = 1e-7) -> np.ndarray:
    """``(x - mean) @ V_k / sqrt(lambda_k + eps)`` over the ``dims`` largest eigenpairs of the covariance of
    ``vectors [N, D]`` (all D when None); the result has zero mean and (up to eps) identity covariance."""
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"whiten needs a [N, D] array with N >= 2, got shape {x.shape}")
    k = x.shape[1] if dims is None else dims
    if not 1 <= k <= x.shape[1]:
        raise ValueError(f"dims must lie in 1..{x.shape[1]}, got {dims}")
    centred = x - x.mean(axis=0)
    values, vecs = np.linalg.eigh(np.cov(centred, rowvar=False))
    order = np.argsort(values)[::-1][:k]
    values, vecs = values[order], vecs[:, order]
    vecs = vecs * np.sign(vecs[np.abs(vecs).argmax(axis=0), np.arange(k)])
    return centred @ vecs / np.sqrt(np.clip(values, 0.0, None) + eps)


def text_item_table(texts: Sequence[str], dims: int, encoder: Any) -> torch.Tensor:
    """Whitened text embeddings of items ``1..len(texts)`` (``texts[i]`` describes item ``i + 1``), float32
    ``[len(texts) + 1, dims]`` with a zero padding row 0; ``encoder.encode(list[str]) -> [N, D]``."""
    vectors = encoder.encode(list(texts))
    if dims > vectors.shape[1] or dims > len(texts) - 1:
        raise ValueError(
            f"a table of width {dims} needs at least {dims + 1} items and a text encoder of width >= {dims}; "
            f"got {len(texts)} items and width {vectors.shape[1]}"
        )
    table = np.zeros((len(texts) + 1, dims), dtype=np.float32)
    table[1:] = whiten(vectors, dims)
    return torch.from_numpy(table)
