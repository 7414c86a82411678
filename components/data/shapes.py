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
:func:`check_pc15k` checks a folder against it (headers of every file) before any work. The files are
read with numpy alone in :mod:`components.data.pc15k` (``PC15K_SYNSETS`` and ``check_pc15k`` are
re-exported here); the family names are :data:`components.data.names.SHAPE_FAMILY_NAMES`. Parameter
validation imports those two modules, never this one (torch, trimesh).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import trimesh
from torch import Tensor

from components.data.pc15k import PC15K_SYNSETS, check_pc15k, read_pc15k_arrays

__all__ = [
    "SHAPE_FAMILIES",
    "NORMALIZATIONS",
    "PC15K_SYNSETS",
    "ROTATIONS",
    "make_shape_mesh",
    "sample_shapes",
    "normalize_clouds",
    "random_rotations",
    "read_pc15k",
    "check_pc15k",
    "shape_classes",
]


def _ellipsoid(rng: np.random.Generator) -> trimesh.Trimesh:
    mesh = trimesh.creation.icosphere(subdivisions=3, radius=1.0)
    mesh.apply_scale(rng.uniform(0.5, 1.5, size=3))
    return mesh


def _torus(rng: np.random.Generator) -> trimesh.Trimesh:
    return trimesh.creation.torus(
        major_radius=rng.uniform(0.8, 1.2), minor_radius=rng.uniform(0.15, 0.45), major_sections=48, minor_sections=24
    )


def _cylinder(rng: np.random.Generator) -> trimesh.Trimesh:
    return trimesh.creation.cylinder(radius=rng.uniform(0.3, 0.8), height=rng.uniform(0.8, 2.0), sections=48)


def _box(extents: tuple[float, float, float], center: tuple[float, float, float]) -> trimesh.Trimesh:
    return trimesh.creation.box(extents=extents, transform=trimesh.transformations.translation_matrix(center))


def _legs(width: float, depth: float, height: float, thickness: float) -> list[trimesh.Trimesh]:
    dx, dy = width / 2 - thickness / 2, depth / 2 - thickness / 2
    return [_box((thickness, thickness, height), (sx * dx, sy * dy, height / 2)) for sx in (-1, 1) for sy in (-1, 1)]


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
    base = trimesh.creation.cylinder(
        radius=base_r,
        height=base_h,
        sections=32,
        transform=trimesh.transformations.translation_matrix((0, 0, base_h / 2)),
    )
    pole = trimesh.creation.cylinder(
        radius=0.04,
        height=pole_h,
        sections=16,
        transform=trimesh.transformations.translation_matrix((0, 0, base_h + pole_h / 2)),
    )
    shade = trimesh.creation.cone(
        radius=shade_r,
        height=shade_h,
        sections=32,
        transform=trimesh.transformations.translation_matrix((0, 0, base_h + pole_h - shade_h / 2)),
    )
    return trimesh.util.concatenate([base, pole, shade])


#: family name -> builder ``rng -> mesh`` with random shape parameters; keyed by
#: :data:`components.data.names.SHAPE_FAMILY_NAMES`, in that order.
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


def sample_shapes(category: str, n_shapes: int, n_points: int, seed: int, normalization: str = "per_shape") -> Tensor:
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


#: how :func:`shape_classes` turns each cloud: not at all, about the vertical (z) axis, or uniformly in SO(3).
ROTATIONS = ("none", "z", "so3")


def random_rotations(n: int, kind: str, rng: np.random.Generator) -> np.ndarray:
    """``n`` random rotation matrices [n, 3, 3]: uniform angle about z (``"z"``), Haar-uniform on SO(3) (``"so3"``:
    QR of a Gaussian matrix with the signs fixed and the determinant made +1), identities (``"none"``)."""
    if kind not in ROTATIONS:
        raise ValueError(f"unknown rotation {kind!r}; expected one of {ROTATIONS}")
    if kind == "none":
        return np.broadcast_to(np.eye(3), (n, 3, 3)).copy()
    if kind == "z":
        a = rng.uniform(0.0, 2 * np.pi, n)
        c, s = np.cos(a), np.sin(a)
        out = np.zeros((n, 3, 3))
        out[:, 0, 0], out[:, 0, 1], out[:, 1, 0], out[:, 1, 1], out[:, 2, 2] = c, -s, s, c, 1.0
        return out
    q, r = np.linalg.qr(rng.standard_normal((n, 3, 3)))
    q = q * np.sign(np.diagonal(r, axis1=1, axis2=2))[:, None, :]
    q[np.linalg.det(q) < 0, :, 0] *= -1.0
    return q


def shape_classes(
    families: list[str] | tuple[str, ...], n_per_class: int, n_points: int, seed: int, rotation: str = "so3"
) -> tuple[Tensor, Tensor]:
    """A shape-classification set: ``n_per_class`` random instances of each family (label = its index in
    ``families``), ``n_points`` surface points each, normalised per shape and turned by ``rotation`` (a key of
    :data:`ROTATIONS`). Returns ``(points float32 [S, n_points, 3], labels int64 [S])``, classes in blocks."""
    clouds = [sample_shapes(f, n_per_class, n_points, seed + 7919 * i) for i, f in enumerate(families)]
    points = torch.cat(clouds)
    rot = torch.from_numpy(random_rotations(len(points), rotation, np.random.default_rng(seed))).float()
    labels = torch.arange(len(families)).repeat_interleave(n_per_class)
    return points @ rot.transpose(1, 2), labels


def read_pc15k(
    root: str | Path,
    category: str,
    split: str,
    n_points: int,
    seed: int,
    normalization: str = "per_shape",
    max_shapes: int | None = None,
) -> Tensor:
    """ShapeNetCore.v2.PC15k clouds subsampled to ``n_points`` (:func:`components.data.pc15k.read_pc15k_arrays`,
    which names the arguments and the errors), normalised by ``normalization`` (a key of
    :data:`NORMALIZATIONS`): float32 ``[S, n_points, 3]``."""
    clouds = read_pc15k_arrays(root, category, split, n_points, seed, max_shapes)
    return normalize_clouds(torch.from_numpy(clouds), normalization).float()
