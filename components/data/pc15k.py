"""ShapeNetCore.v2.PC15k point clouds as stored, read with numpy alone (no torch, no trimesh).

Layout (PointFlow's preprocessing): ``root/<synset_id>/<split>/*.npy``, each ``[15000, 3]``.
:func:`check_pc15k` checks a folder against it (headers of every file) before any work;
:func:`read_pc15k_arrays` reads and subsamples the clouds (:func:`components.data.shapes.read_pc15k`
normalises them into a tensor). Files are only ever loaded with ``allow_pickle=False``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from components.data.npy_files import first_unusable_row, npy_header

__all__ = ["PC15K_SYNSETS", "check_pc15k", "read_pc15k_arrays"]

#: ShapeNetCore.v2 synset ids of the categories used by PointFlow / PVD / NSOT.
PC15K_SYNSETS: dict[str, str] = {"airplane": "02691156", "chair": "03001627", "car": "02958343"}


def read_pc15k_arrays(
    root: str | Path, category: str, split: str, n_points: int, seed: int, max_shapes: int | None = None
) -> np.ndarray:
    """Read ShapeNetCore.v2.PC15k clouds and subsample each to ``n_points`` (not normalised).

    Files are read in sorted name order; each cloud keeps a random subset of ``n_points`` of its
    points, drawn without replacement from ``numpy.random.default_rng(seed)``.

    Args:
        root: folder holding ``<synset_id>/<split>/*.npy``.
        category: "airplane", "chair", "car" (see :data:`PC15K_SYNSETS`) or a synset id.
        split: "train", "val" or "test" (any sub-folder name).
        n_points: points kept per shape (<= points stored per file).
        seed: subsampling seed.
        max_shapes: read only the first ``max_shapes`` files (sorted), or all if None.

    Returns:
        float64 ``[S, n_points, 3]``.

    Raises:
        ValueError: unknown category, or an array that is not ``[K, 3]`` with ``K >= n_points``
            (the message names the file).
        FileNotFoundError: the split folder is missing or has no ``.npy`` files.
    """
    synset = PC15K_SYNSETS.get(category, category)
    if synset not in PC15K_SYNSETS.values() and not (synset.isdigit() and len(synset) == 8):
        raise ValueError(
            f"unknown PC15k category {category!r}; expected one of {sorted(PC15K_SYNSETS)} or an 8-digit synset id"
        )
    folder = Path(root) / synset / split
    if not folder.is_dir():
        raise FileNotFoundError(f"PC15k folder not found: {folder} (expected root/<synset_id>/<split>/*.npy)")
    files = sorted(folder.glob("*.npy"))
    if not files:
        raise FileNotFoundError(f"no .npy files in PC15k folder {folder}")
    if max_shapes is not None:
        files = files[:max_shapes]
    rng = np.random.default_rng(seed)
    clouds = []
    for path in files:
        _pc15k_header(path, n_points)
        arr = _pc15k_values(path, np.load(path, allow_pickle=False))
        keep = rng.choice(arr.shape[0], size=n_points, replace=False)
        clouds.append(arr[keep].astype(np.float64))
    return np.stack(clouds)


def _pc15k_values(path: Path, cloud: np.ndarray) -> np.ndarray:
    """``cloud`` after checking its coordinates are finite and within float32's reach (the check before any work
    reads the first file of each split this way, the reader every file it returns)."""
    bad = first_unusable_row(cloud)
    if bad is not None:
        raise ValueError(f"{path}: point {bad[0]} holds {bad[1]}")
    return cloud


def _pc15k_header(path: Path, n_points: int = 1) -> tuple[int, ...]:
    """Shape of one PC15k ``.npy`` file from its header alone, after checking it is a plain float
    ``[K, 3]`` array with ``K >= n_points`` that ``np.load(..., allow_pickle=False)`` reads in full.

    Raises ``ValueError`` naming the file and the offending field (magic, header, dtype, shape, size).
    """
    shape, dtype = npy_header(path)
    if not np.issubdtype(dtype, np.floating):
        raise ValueError(f"{path}: expected float coordinates, got dtype {dtype}")
    if len(shape) != 2 or shape[1] != 3 or shape[0] < n_points:
        raise ValueError(
            f"{path}: expected an array of shape [K, 3] with K >= {n_points} "
            f"(PC15k files are [15000, 3]), got {tuple(shape)}"
        )
    return tuple(shape)


def check_pc15k(root: str | Path, splits: tuple[str, ...] = ("train", "test")) -> dict[str, dict[str, int]]:
    """Check a ShapeNetCore.v2.PC15k folder before any work: ``{synset: {split: number of files}}``.

    ``root`` must hold at least one ``<8-digit synset id>/`` folder, each with every split in ``splits``
    holding ``.npy`` files. Every file's header is read (dtype, shape, size: see
    :func:`read_pc15k_arrays` for what a file must be) and the first file of each split is loaded in full
    with ``allow_pickle=False`` and must hold finite coordinates.

    Raises:
        ValueError: the layout is wrong (names the folder) or a file is malformed (names the file).
    """
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"{root}: not a folder (expected <synset_id>/<split>/*.npy)")
    synsets = sorted(p for p in root.iterdir() if p.is_dir() and p.name.isdigit() and len(p.name) == 8)
    if not synsets:
        raise ValueError(
            f"{root}: no <synset_id>/ folders (8-digit ShapeNet ids such as "
            f"{PC15K_SYNSETS['airplane']}); expected <synset_id>/<split>/*.npy"
        )
    found: dict[str, dict[str, int]] = {}
    for synset in synsets:
        found[synset.name] = {}
        for split in splits:
            files = sorted((synset / split).glob("*.npy")) if (synset / split).is_dir() else []
            if not files:
                raise ValueError(
                    f"{synset / split}: missing or without .npy files (expected <synset_id>/<split>/*.npy)"
                )
            for path in files:
                _pc15k_header(path)
            _pc15k_values(files[0], np.load(files[0], allow_pickle=False))
            found[synset.name][split] = len(files)
    return found
