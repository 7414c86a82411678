"""The three uses of an aligned similarity: zero-shot classification, mislabel detection, retrieval.

- zero-shot: image i gets argmax_c sim(a_i, t_c) over one text embedding t_c per class;
- mislabel detection: a fraction of the test pairs get the caption of a test item of another class
  (:func:`swap_captions`); each pair is scored by sim(a_i, shown caption_i) and the ROC AUC of that score
  separating clean (positive) from swapped pairs is reported;
- retrieval: image-to-caption recall@k over the clean test pairs.
numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from components.alignment.methods import Embedded
from components.metrics.ranking import roc_auc
from components.metrics.retrieval import recall_at_k, zero_shot_accuracy


def swap_captions(labels: np.ndarray, fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(source [n], swapped [n] bool)``: row i shows the caption of row source[i]; a ``fraction`` of rows
    (round(fraction * n), at least 1) take the caption of a random row with a different label."""
    labels = np.asarray(labels)
    n = len(labels)
    if len(np.unique(labels)) < 2:
        raise ValueError("swap_captions needs at least two classes")
    source, swapped = np.arange(n), np.zeros(n, dtype=bool)
    for i in rng.choice(n, size=max(1, round(fraction * n)), replace=False):
        others = np.flatnonzero(labels != labels[i])
        source[i], swapped[i] = rng.choice(others), True
    return source, swapped


def evaluate(
    fitted: Embedded,
    image: np.ndarray,
    text: np.ndarray,
    labels: np.ndarray,
    class_text: np.ndarray,
    source: np.ndarray,
    swapped: np.ndarray,
    ks: Sequence[int],
) -> dict[str, float]:
    """``{"zero_shot", "mislabel_auc", "recall@k" ...}`` of one fitted method on the test set: image [n, d1],
    its clean captions text [n, d2], labels [n], class_text [C, d2], and the swap from :func:`swap_captions`."""
    out = {
        "zero_shot": zero_shot_accuracy(fitted.similarity(image, class_text), labels),
        "mislabel_auc": roc_auc(fitted.paired(image, text[source]), ~swapped),
    }
    sim = fitted.similarity(image, text)
    for k in ks:
        out[f"recall@{k}"] = recall_at_k(sim, np.arange(len(image)), k)
    return out
