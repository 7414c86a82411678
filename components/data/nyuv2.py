"""NYUv2 as preprocessed by MTAN / LibMTL (the layout MTSAM's ``create_dataset.NYUv2`` reads), numpy only.

Layout: ``root/{train,val}/{image,label,depth,normal}/{idx}.npy`` with, per index,

    image   [H, W, 3] float, values in [0, 1]
    label   [H, W] (float or int): 13 classes 0..12, -1 = not labelled
    depth   [H, W, 1] (or [H, W]) float metres, 0 = no measurement
    normal  [H, W, 3] float unit vectors, 0 = no normal

(288 x 384 in the release). MTSAM trains on ``train/`` (795 images) and tests on ``val/`` (654).

:func:`check_nyuv2` checks a folder before any work: both splits with their four sub-folders, the same
integer indices in each, every file's header (via :func:`~components.data.npy_files.npy_header`: never a
pickle, never a truncated file), the shapes and dtypes above, one spatial size for every index of both splits,
and every file's values. :func:`read_nyuv2` loads a split and checks every value it returns the same way;
:func:`label_grid` / :func:`subsample` read the label maps at a stride. Errors name the file and the field.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from components.data.npy_files import npy_header

NYUV2_SPLITS = ("train", "val")
NYUV2_KINDS = ("image", "label", "depth", "normal")
NYUV2_CLASSES = 13
LAYOUT_HINT = "root/{train,val}/{image,label,depth,normal}/{idx}.npy"


def _indices(folder: Path) -> list[int]:
    names = sorted(p.name for p in folder.iterdir() if p.suffix == ".npy")
    bad = [n for n in names if not n[:-4].isdigit()]
    if bad:
        raise ValueError(f"{folder / bad[0]}: file name is not an integer index (expected {{idx}}.npy)")
    return sorted(int(n[:-4]) for n in names)


def _check_header(path: Path, kind: str) -> tuple[int, int]:
    """(H, W) of one file after checking its kind's shape and dtype from the header alone."""
    shape, dtype = npy_header(path)
    numeric = np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.integer)
    if kind == "label":
        ok = len(shape) == 2 and numeric
        expected = "[H, W] numbers"
    elif kind == "depth":
        ok = (len(shape) == 2 or (len(shape) == 3 and shape[2] == 1)) and np.issubdtype(dtype, np.floating)
        expected = "[H, W, 1] floats"
    else:
        ok = len(shape) == 3 and shape[2] == 3 and np.issubdtype(dtype, np.floating)
        expected = "[H, W, 3] floats"
    if not ok:
        raise ValueError(f"{path}: {kind} must be {expected}, got shape {tuple(shape)} dtype {dtype}")
    if shape[0] < 1 or shape[1] < 1:
        raise ValueError(f"{path}: {kind} is empty (shape {tuple(shape)})")
    return int(shape[0]), int(shape[1])


def _check_values(path: Path, kind: str, array: np.ndarray) -> None:
    if not np.isfinite(array).all():
        raise ValueError(f"{path}: {kind} holds non-finite values")
    if kind == "image" and (array.min() < 0 or array.max() > 1):
        raise ValueError(
            f"{path}: image values must lie in [0, 1] (MTAN's preprocessing), found "
            f"[{float(array.min()):.3g}, {float(array.max()):.3g}]"
        )
    if kind == "label":
        if not np.array_equal(array, np.round(array)) or array.min() < -1 or array.max() >= NYUV2_CLASSES:
            raise ValueError(
                f"{path}: label values must be whole numbers in [-1, {NYUV2_CLASSES - 1}] (-1 = not labelled)"
            )
    if kind == "depth" and array.min() < 0:
        raise ValueError(f"{path}: depth holds negative values (0 marks a missing measurement)")


def _split_layout(root: Path, split: str) -> tuple[list[int], tuple[int, int]]:
    """The indices of one split and their one spatial size ``(H, W)``, from the headers alone."""
    folder = root / split
    if not folder.is_dir():
        raise ValueError(f"{folder}: missing split folder (expected {LAYOUT_HINT})")
    indices: dict[str, list[int]] = {}
    for kind in NYUV2_KINDS:
        sub = folder / kind
        if not sub.is_dir():
            raise ValueError(f"{sub}: missing folder (expected {LAYOUT_HINT})")
        indices[kind] = _indices(sub)
    reference = indices["image"]
    if not reference:
        raise ValueError(f"{folder / 'image'}: no {{idx}}.npy files")
    for kind in NYUV2_KINDS[1:]:
        missing = sorted(set(reference) - set(indices[kind]))
        extra = sorted(set(indices[kind]) - set(reference))
        if missing:
            raise ValueError(
                f"{folder / kind / f'{missing[0]}.npy'}: missing ({len(missing)} index(es) of "
                f"image/ have no {kind} file)"
            )
        if extra:
            raise ValueError(
                f"{folder / 'image' / f'{extra[0]}.npy'}: missing ({kind}/ has {len(extra)} index(es) without an image)"
            )
    size = None
    for idx in reference:
        seen = {kind: _check_header(folder / kind / f"{idx}.npy", kind) for kind in NYUV2_KINDS}
        if len(set(seen.values())) != 1:
            raise ValueError(
                f"{folder}: index {idx} has different spatial sizes per kind: "
                + ", ".join(f"{k} {h}x{w}" for k, (h, w) in seen.items())
            )
        size = size or seen["image"]
        if seen["image"] != size:  # images are stacked into one batch: one size per split (288x384 in the release)
            raise ValueError(
                f"{folder / 'image' / f'{idx}.npy'}: {seen['image'][0]}x{seen['image'][1]}, but index "
                f"{reference[0]} is {size[0]}x{size[1]}; every index must have the same size"
            )
    return reference, size


def label_grid(height: int, width: int, stride: int) -> tuple[int, int]:
    """The size of the label, depth and normal maps of ``height`` x ``width`` images read with ``stride`` (rows
    and columns ``stride // 2``, ``stride // 2 + stride``, ...). ``ValueError`` when no pixel is left: the up-front
    check of a run and :func:`subsample` both call this."""
    rows, cols = len(range(stride // 2, height, stride)), len(range(stride // 2, width, stride))
    if rows < 1 or cols < 1:
        raise ValueError(
            f"images of {height}x{width} leave no label pixel at stride {stride} (rows and columns "
            f"{stride // 2}, {stride // 2 + stride}, ... are read; the images must be larger than "
            f"{stride // 2} pixels each way)"
        )
    return rows, cols


def subsample(array: np.ndarray, stride: int) -> np.ndarray:
    """``array`` [H, W, ...] at the pixels :func:`label_grid` names (exact values, never interpolated)."""
    label_grid(array.shape[0], array.shape[1], stride)
    return array[stride // 2 :: stride, stride // 2 :: stride]


@dataclass(frozen=True)
class Nyuv2Summary:
    """What :func:`check_nyuv2` found: images per split and their one size."""

    counts: dict[str, int]
    height: int
    width: int


def check_nyuv2(root: str | Path) -> Nyuv2Summary:
    """Check a preprocessed NYUv2 folder before any work: the layout, every file's header and every file's values
    (the checks :func:`read_nyuv2` makes on what it reads), and one spatial size for every index of both splits.

    Raises ``ValueError`` naming the folder or file and the field (see the module docstring)."""
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"{root}: not a folder (expected {LAYOUT_HINT})")
    counts, sizes = {}, {}
    for split in NYUV2_SPLITS:
        indices, sizes[split] = _split_layout(root, split)
        for idx in indices:
            for kind in NYUV2_KINDS:
                path = root / split / kind / f"{idx}.npy"
                _check_values(path, kind, np.load(path, allow_pickle=False))
        counts[split] = len(indices)
    (first, size), *rest = sizes.items()
    for split, other in rest:
        if other != size:
            raise ValueError(
                f"{root / split}: images of {other[0]}x{other[1]}, but {first}/ holds "
                f"{size[0]}x{size[1]}; both splits must have the same size"
            )
    return Nyuv2Summary(counts, size[0], size[1])


def read_nyuv2(root: str | Path, split: str, limit: int | None = None) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """``(idx, {"image" [H, W, 3], "label" [H, W] int64, "depth" [H, W, 1], "normal" [H, W, 3]})`` for the
    first ``limit`` indices of ``split`` in numeric order (all when None), float32 except the label; every
    file checked as :func:`check_nyuv2` checks the first one."""
    root = Path(root)
    indices, _ = _split_layout(root, split)
    for idx in indices[:limit]:
        item = {}
        for kind in NYUV2_KINDS:
            path = root / split / kind / f"{idx}.npy"
            array = np.load(path, allow_pickle=False)
            _check_values(path, kind, array)
            item[kind] = array
        item["label"] = item["label"].astype(np.int64)
        item["depth"] = item["depth"].reshape(*item["depth"].shape[:2], 1).astype(np.float32)
        item["image"], item["normal"] = item["image"].astype(np.float32), item["normal"].astype(np.float32)
        yield idx, item
