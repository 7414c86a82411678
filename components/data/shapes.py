"""3-D point clouds: procedural ShapeNet-like shapes (offline default) and a ShapeNetCore.v2.PC15k reader.

Procedural families (NSOT CPU reduction): each instance is a trimesh mesh with random parameters,
and its surface is sampled uniformly by area (``trimesh.sample.sample_surface``):

    ellipsoid  unit sphere scaled by radii ~ U[0.5, 1.5]^3
    torus      major radius R ~ U[0.8, 1.2], minor radius r ~ U[0.15, 0.45]
    cylinder   radius ~ U[0.3, 0.8], height ~ U[0.8, 2.0] (with caps)
    chair      seat box + 4 legs + backrest box, random proportions
    table      top box + 4 legs, random proportions
    lamp       base cylinder + thin pole + cone shade

Normalisation (``NORMALIZATIONS``): "per_shape" (default) centres each cloud and divides it by the
std of all its coordinates, so every cloud has zero mean and unit std over its points;
"dataset" is PVD/PointFlow's choice (one mean [3] and one scalar std over all points of all
clouds returned by the call); "none" keeps mesh units.

PC15k layout (PointFlow's preprocessing): ``root/<synset_id>/<split>/*.npy``, each ``[15000, 3]``;
:func:`check_pc15k` checks a folder against it (headers of every file) before any work.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import trimesh
from torch import Tensor

__all__ = ["SHAPE_FAMILIES", "NORMALIZATIONS", "PC15K_SYNSETS", "make_shape_mesh", "sample_shapes",
           "normalize_clouds", "read_pc15k", "check_pc15k"]


def _ellipsoid(rng: np.random.Generator) -> trimesh.Trimesh:
    mesh = trimesh.creation.icosphere(subdivisions=3, radius=1.0)
    mesh.apply_scale(rng.uniform(0.5, 1.5, size=3))
    return mesh


def _torus(rng: np.random.Generator) -> trimesh.Trimesh:
    return trimesh.creation.torus(major_radius=rng.uniform(0.8, 1.2), minor_radius=rng.uniform(0.15, 0.45),
                                  major_sections=48, minor_sections=24)


def _cylinder(rng: np.random.Generator) -> trimesh.Trimesh:
    return trimesh.creation.cylinder(radius=rng.uniform(0.3, 0.8), height=rng.uniform(0.8, 2.0), sections=48)


def _box(extents: tuple[float, float, float], center: tuple[float, float, float]) -> trimesh.Trimesh:
    return trimesh.creation.box(extents=extents, transform=trimesh.transformations.translation_matrix(center))


def _legs(width: float, depth: float, height: float, thickness: float) -> list[trimesh.Trimesh]:
    dx, dy = width / 2 - thickness / 2, depth / 2 - thickness / 2
    return [_box((thickness, thickness, height), (sx * dx, sy * dy, height / 2))
            for sx in (-1, 1) for sy in (-1, 1)]


def _chair(rng: np.random.Generator) -> trimesh.Trimesh:
    width, depth = rng.uniform(0.8, 1.2), rng.uniform(0.8, 1.2)
    leg_h, back_h = rng.uniform(0.7, 1.1), rng.uniform(0.8, 1.4)
    seat_t, leg_t = rng.uniform(0.08, 0.15), rng.uniform(0.06, 0.12)
    parts = _legs(width, depth, leg_h, leg_t)
    parts.append(_box((width, depth, seat_t), (0.0, 0.0, leg_h + seat_t / 2)))
    parts.append(_box((width, seat_t, back_h), (0.0, -depth / 2 + seat_t / 2, leg_h + seat_t + back_h / 2)))
    return trimesh.util.concatenate(parts)


def _table(rng: np.random.Generator) -> trimesh.Trimesh:
    width, depth = rng.uniform(1.2, 2.0), rng.uniform(0.7, 1.2)
    leg_h, top_t, leg_t = rng.uniform(0.6, 1.0), rng.uniform(0.05, 0.12), rng.uniform(0.06, 0.12)
    parts = _legs(width, depth, leg_h, leg_t)
    parts.append(_box((width, depth, top_t), (0.0, 0.0, leg_h + top_t / 2)))
    return trimesh.util.concatenate(parts)


def _lamp(rng: np.random.Generator) -> trimesh.Trimesh:
    base_r, base_h = rng.uniform(0.3, 0.5), rng.uniform(0.05, 0.15)
    pole_h, shade_r, shade_h = rng.uniform(1.0, 1.8), rng.uniform(0.3, 0.6), rng.uniform(0.3, 0.6)
    base = trimesh.creation.cylinder(radius=base_r, height=base_h, sections=32,
                                     transform=trimesh.transformations.translation_matrix((0, 0, base_h / 2)))
    pole = trimesh.creation.cylinder(radius=0.04, height=pole_h, sections=16,
                                     transform=trimesh.transformations.translation_matrix(
                                         (0, 0, base_h + pole_h / 2)))
    shade = trimesh.creation.cone(radius=shade_r, height=shade_h, sections=32,
                                  transform=trimesh.transformations.translation_matrix(
                                      (0, 0, base_h + pole_h - shade_h / 2)))
    return trimesh.util.concatenate([base, pole, shade])


#: family name -> builder ``rng -> mesh`` with random shape parameters.
SHAPE_FAMILIES: dict[str, Callable[[np.random.Generator], trimesh.Trimesh]] = {
    "ellipsoid": _ellipsoid,
    "torus": _torus,
    "cylinder": _cylinder,
    "chair": _chair,
    "table": _table,
    "lamp": _lamp,
}


def _per_shape(x: Tensor) -> Tensor:
    centred = x - x.mean(dim=1, keepdim=True)
    return centred / centred.flatten(1).std(dim=1, correction=0).clamp_min(1e-12)[:, None, None]


def _dataset(x: Tensor) -> Tensor:
    centred = x - x.reshape(-1, x.shape[-1]).mean(dim=0)
    return centred / centred.std(correction=0).clamp_min(1e-12)


#: name -> ``[S, N, 3] -> [S, N, 3]``.
NORMALIZATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "per_shape": _per_shape,
    "dataset": _dataset,
    "none": lambda x: x,
}


def normalize_clouds(x: Tensor, normalization: str = "per_shape") -> Tensor:
    """Apply the normalisation registered as ``normalization`` to clouds ``[S, N, 3]``."""
    try:
        fn = NORMALIZATIONS[normalization]
    except KeyError:
        raise ValueError(f"unknown normalization {normalization!r}; expected one of {sorted(NORMALIZATIONS)}") from None
    return fn(x)


def make_shape_mesh(category: str, rng: np.random.Generator) -> trimesh.Trimesh:
    """One random mesh of a procedural family (key of :data:`SHAPE_FAMILIES`)."""
    try:
        build = SHAPE_FAMILIES[category]
    except KeyError:
        raise ValueError(f"unknown shape category {category!r}; expected one of {sorted(SHAPE_FAMILIES)}") from None
    return build(rng)


def sample_shapes(category: str, n_shapes: int, n_points: int, seed: int,
                  normalization: str = "per_shape") -> Tensor:
    """Random instances of a procedural family, each sampled uniformly on its surface.

    Deterministic given ``seed``: one ``numpy.random.default_rng(seed)`` drives both the shape
    parameters and the surface sampling.

    Args:
        category: key of :data:`SHAPE_FAMILIES`.
        n_shapes: S.
        n_points: N points per shape.
        seed: random seed.
        normalization: key of :data:`NORMALIZATIONS`.

    Returns:
        float32 ``[S, N, 3]``.
    """
    if n_shapes < 1 or n_points < 1:
        raise ValueError(f"n_shapes and n_points must be >= 1, got {n_shapes} and {n_points}")
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"unknown normalization {normalization!r}; expected one of {sorted(NORMALIZATIONS)}")
    rng = np.random.default_rng(seed)
    clouds = np.empty((n_shapes, n_points, 3), dtype=np.float64)
    for s in range(n_shapes):
        mesh = make_shape_mesh(category, rng)
        points, _ = trimesh.sample.sample_surface(mesh, n_points, seed=rng)
        clouds[s] = points
    return normalize_clouds(torch.from_numpy(clouds), normalization).float()


#: ShapeNetCore.v2 synset ids of the categories used by PointFlow / PVD / NSOT.
PC15K_SYNSETS: dict[str, str] = {
    "airplane": "02691156",
    "chair": "03001627",
    "car": "02958343",
}


def read_pc15k(root: str | Path, category: str, split: str, n_points: int, seed: int,
               normalization: str = "per_shape", max_shapes: int | None = None) -> Tensor:
    """Read ShapeNetCore.v2.PC15k clouds and subsample each to ``n_points``.

    Files are read in sorted name order; each cloud keeps a random subset of ``n_points`` of its
    points, drawn without replacement from ``numpy.random.default_rng(seed)``.

    Args:
        root: folder holding ``<synset_id>/<split>/*.npy``.
        category: "airplane", "chair", "car" (see :data:`PC15K_SYNSETS`) or a synset id.
        split: "train", "val" or "test" (any sub-folder name).
        n_points: points kept per shape (<= points stored per file).
        seed: subsampling seed.
        normalization: key of :data:`NORMALIZATIONS` applied to the returned clouds.
        max_shapes: read only the first ``max_shapes`` files (sorted), or all if None.

    Returns:
        float32 ``[S, n_points, 3]``.

    Raises:
        ValueError: unknown category, or an array that is not ``[K, 3]`` with ``K >= n_points``
            (the message names the file).
        FileNotFoundError: the split folder is missing or has no ``.npy`` files.
    """
    synset = PC15K_SYNSETS.get(category, category)
    if synset not in PC15K_SYNSETS.values() and not (synset.isdigit() and len(synset) == 8):
        raise ValueError(f"unknown PC15k category {category!r}; expected one of {sorted(PC15K_SYNSETS)} "
                         "or an 8-digit synset id")
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
        arr = np.load(path, allow_pickle=False)
        keep = rng.choice(arr.shape[0], size=n_points, replace=False)
        clouds.append(arr[keep].astype(np.float64))
    return normalize_clouds(torch.from_numpy(np.stack(clouds)), normalization).float()


def _pc15k_header(path: Path, n_points: int = 1) -> tuple[int, ...]:
    """Shape of one PC15k ``.npy`` file from its header alone, after checking it is a plain float
    ``[K, 3]`` array with ``K >= n_points`` that ``np.load(..., allow_pickle=False)`` reads in full.

    Raises ``ValueError`` naming the file and the offending field (magic, header, dtype, shape, size).
    """
    with open(path, "rb") as handle:
        try:
            version = np.lib.format.read_magic(handle)
        except ValueError:
            raise ValueError(f"{path}: not a .npy file (no NumPy magic string)") from None
        reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        try:
            shape, _, dtype = reader(handle)
        except (ValueError, SyntaxError):
            raise ValueError(f"{path}: unreadable .npy header (format version {version})") from None
        offset = handle.tell()
    if dtype.hasobject:
        raise ValueError(f"{path}: holds Python objects (dtype {dtype}), so it cannot be loaded with "
                         "allow_pickle=False; PC15k files are float arrays")
    if not np.issubdtype(dtype, np.floating):
        raise ValueError(f"{path}: expected float coordinates, got dtype {dtype}")
    if len(shape) != 2 or shape[1] != 3 or shape[0] < n_points:
        raise ValueError(f"{path}: expected an array of shape [K, 3] with K >= {n_points} "
                         f"(PC15k files are [15000, 3]), got {tuple(shape)}")
    expected = offset + int(np.prod(shape)) * dtype.itemsize
    if path.stat().st_size < expected:
        raise ValueError(f"{path}: truncated ({path.stat().st_size} bytes, the header needs {expected})")
    return tuple(shape)


def check_pc15k(root: str | Path, splits: tuple[str, ...] = ("train", "test")) -> dict[str, dict[str, int]]:
    """Check a ShapeNetCore.v2.PC15k folder before any work: ``{synset: {split: number of files}}``.

    ``root`` must hold at least one ``<8-digit synset id>/`` folder, each with every split in ``splits``
    holding ``.npy`` files. Every file's header is read (dtype, shape, size: see :func:`read_pc15k` for
    what a file must be) and the first file of each split is loaded in full with ``allow_pickle=False``
    and must hold finite coordinates.

    Raises:
        ValueError: the layout is wrong (names the folder) or a file is malformed (names the file).
    """
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"{root}: not a folder (expected <synset_id>/<split>/*.npy)")
    synsets = sorted(p for p in root.iterdir() if p.is_dir() and p.name.isdigit() and len(p.name) == 8)
    if not synsets:
        raise ValueError(f"{root}: no <synset_id>/ folders (8-digit ShapeNet ids such as "
                         f"{PC15K_SYNSETS['airplane']}); expected <synset_id>/<split>/*.npy")
    found: dict[str, dict[str, int]] = {}
    for synset in synsets:
        found[synset.name] = {}
        for split in splits:
            files = sorted((synset / split).glob("*.npy")) if (synset / split).is_dir() else []
            if not files:
                raise ValueError(f"{synset / split}: missing or without .npy files (expected "
                                 "<synset_id>/<split>/*.npy)")
            for path in files:
                _pc15k_header(path)
            if not np.isfinite(np.load(files[0], allow_pickle=False)).all():
                raise ValueError(f"{files[0]}: non-finite coordinates")
            found[synset.name][split] = len(files)
    return found
