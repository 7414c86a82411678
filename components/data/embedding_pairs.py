"""Row-aligned embedding pairs from a folder of ``.npy`` files, checked before any work (numpy only).

Layout (the format CSA's experiment scripts load after ``get_embeddings``: two float arrays and the labels):

- ``image.npy``: float [N, d1], the first modality's embeddings (e.g. image features);
- ``text.npy``: float [N, d2], the second modality's embeddings, row i paired with row i of image.npy;
- ``labels.npy``: integer [N], class labels >= 0 (any values: they are re-indexed; every class present at least
  twice).

Embedding values must be finite and at most 1e30 in magnitude (they are stored and partly computed on in float32).

:func:`check_embedding_pairs` reads the headers, then the values, and raises ``ValueError`` naming the file and
the field (shape, dtype, row count, the first bad row) without quoting any content; nothing is unpickled.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from components.data.npy_files import first_unusable_row, npy_header

EMBEDDING_FILES = ("image.npy", "text.npy", "labels.npy")


def check_embedding_pairs(folder: str | Path) -> dict[str, int]:
    """Validate the folder; returns ``{"rows", "image_dim", "text_dim", "classes"}``."""
    folder = Path(folder)
    headers = {}
    for name in EMBEDDING_FILES:
        path = folder / name
        if not path.is_file():
            raise ValueError(f"{path}: missing (the folder must hold {', '.join(EMBEDDING_FILES)})")
        headers[name] = npy_header(path)
    for name in ("image.npy", "text.npy"):
        shape, dtype = headers[name]
        if len(shape) != 2 or shape[1] < 1:
            raise ValueError(f"{folder / name}: shape must be [N, d] (2-D), got {list(shape)}")
        if dtype.kind != "f":
            raise ValueError(f"{folder / name}: dtype must be floating point, got {dtype}")
    shape, dtype = headers["labels.npy"]
    if len(shape) != 1:
        raise ValueError(f"{folder / 'labels.npy'}: shape must be [N] (1-D), got {list(shape)}")
    if dtype.kind not in "iu":
        raise ValueError(f"{folder / 'labels.npy'}: dtype must be integer, got {dtype}")
    rows = {name: headers[name][0][0] for name in EMBEDDING_FILES}
    if len(set(rows.values())) != 1:
        raise ValueError(
            f"{folder}: row counts differ (image.npy {rows['image.npy']}, text.npy {rows['text.npy']}, "
            f"labels.npy {rows['labels.npy']}); the rows must be aligned"
        )
    n = rows["image.npy"]
    if n < 8:
        raise ValueError(f"{folder / 'image.npy'}: {n} rows; at least 8 pairs are needed")
    for name in ("image.npy", "text.npy"):
        bad = first_unusable_row(np.load(folder / name, mmap_mode="r", allow_pickle=False))
        if bad is not None:
            raise ValueError(f"{folder / name}: row {bad[0]} holds {bad[1]}")
    labels = np.load(folder / "labels.npy", allow_pickle=False)
    if labels.min() < 0:
        raise ValueError(f"{folder / 'labels.npy'}: row {int(np.argmin(labels))} has a negative label")
    # classes by their values (np.unique), never by a table as long as the largest label (np.bincount would
    # allocate 8 TiB for one label of 2**40)
    classes, counts = np.unique(labels, return_counts=True)
    if len(classes) < 2:
        raise ValueError(f"{folder / 'labels.npy'}: only one class; at least 2 are needed")
    if (counts < 2).any():
        raise ValueError(
            f"{folder / 'labels.npy'}: class {int(classes[np.argmin(counts)])} has a single row; "
            "every class needs at least 2"
        )
    return {
        "rows": int(n),
        "image_dim": int(headers["image.npy"][0][1]),
        "text_dim": int(headers["text.npy"][0][1]),
        "classes": int(len(classes)),
    }


def read_embedding_pairs(folder: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(image [N, d1] float32, text [N, d2] float32, labels [N] int64)`` after :func:`check_embedding_pairs`;
    labels are re-indexed to 0..C-1 in increasing order of the original values."""
    folder = Path(folder)
    check_embedding_pairs(folder)
    image = np.load(folder / "image.npy", allow_pickle=False).astype(np.float32)
    text = np.load(folder / "text.npy", allow_pickle=False).astype(np.float32)
    _, labels = np.unique(np.load(folder / "labels.npy", allow_pickle=False), return_inverse=True)
    return image, text, labels.astype(np.int64)
