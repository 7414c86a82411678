"""Captions generated from class labels and two measured image attributes, for image-text pairs without a
captioning model.

Each image gets the caption ``TEMPLATES[t].format(attr=..., name=...)`` with

- ``name``: its class name (:data:`CLASS_NAMES`);
- ``attr``: two words measured from its pixels, relative to the medians over the images given together:
  tone, "dark" or "bright" (mean intensity of the ink pixels, those > 0.1, below or above the median), and
  size, "slim" or "wide" (fraction of ink pixels below or above the median); attribute code
  ``2 * bright + wide`` in 0..3;
- ``t``: a template index drawn at random per image.

So the captions say more than the label (the text side is not a class embedding in disguise), and the
distinct captions form a small table [T, C, 4], encoded once. Zero-shot prompts: ``PROMPT.format(name=...)``.
numpy only.
"""

from __future__ import annotations

import numpy as np

CLASS_NAMES = {
    "fashion": (
        "T-shirt",
        "pair of trousers",
        "pullover",
        "dress",
        "coat",
        "sandal",
        "shirt",
        "sneaker",
        "bag",
        "ankle boot",
    ),
    "mnist": (
        "digit zero",
        "digit one",
        "digit two",
        "digit three",
        "digit four",
        "digit five",
        "digit six",
        "digit seven",
        "digit eight",
        "digit nine",
    ),
}
TEMPLATES = (
    "a photo of a {attr} {name}.",
    "a black and white picture of a {attr} {name}.",
    "a small grayscale image showing a {attr} {name}.",
    "this is a {attr} {name}.",
)
TONE, SIZE = ("dark", "bright"), ("slim", "wide")
PROMPT = "a photo of a {name}."
INK = 0.1


def attribute_codes(images: np.ndarray) -> np.ndarray:
    """Attribute code per image [N] int64 in 0..3 (see the module docstring); images [N, H, W] in [0, 1]."""
    x = np.asarray(images, dtype=np.float64).reshape(len(images), -1)
    ink = x > INK
    area = ink.mean(1)
    tone = np.where(ink.any(1), (x * ink).sum(1) / np.maximum(ink.sum(1), 1), 0.0)
    bright = tone > np.median(tone)
    wide = area > np.median(area)
    return (2 * bright + wide).astype(np.int64)


def attribute_words(code: int) -> str:
    return f"{TONE[code // 2]}, {SIZE[code % 2]}"


def caption_table(dataset: str) -> list[str]:
    """Every distinct caption, flattened from [T, C, 4] (index ``(t * C + c) * 4 + code``)."""
    names = CLASS_NAMES[dataset]
    return [
        template.format(attr=attribute_words(code), name=name)
        for template in TEMPLATES
        for name in names
        for code in range(4)
    ]


def caption_index(template: np.ndarray, label: np.ndarray, code: np.ndarray, n_classes: int) -> np.ndarray:
    """Row of each image's caption in :func:`caption_table`."""
    return (np.asarray(template) * n_classes + np.asarray(label)) * 4 + np.asarray(code)


def prompts(dataset: str) -> list[str]:
    """One zero-shot prompt per class."""
    return [PROMPT.format(name=name) for name in CLASS_NAMES[dataset]]
