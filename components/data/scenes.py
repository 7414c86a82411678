"""Procedural indoor scenes rendered by exact ray casting, with per-pixel segmentation, depth and normals.

Each scene is a room (floor, back wall, two side walls) holding 2-5 primitives standing on the floor
(boxes turned about the vertical, spheres, upright cylinders), seen by a pinhole camera 1.2-1.7 m above
the floor, pitched down 5-25 degrees. Every pixel's ray (through the pixel centre) is intersected
analytically with every surface; the nearest hit gives

    label   the surface's class (:data:`SCENE_CLASSES`), -1 where the ray leaves through a window
    depth   z-depth in the camera frame (metres, as NYUv2 stores it), 0 where there is no measurement
    normal  the unit surface normal in the camera frame (x right, y down, z forward), turned towards the
            camera; 0 where there is no measurement

A back-wall window (with probability ``window_prob``) shows a bright sky and, like the glass a Kinect
cannot measure, has no label, depth or normal: it exercises the ignore index and the validity masks.
The image is Lambertian shading of per-surface colours (object colours are drawn independently of the
class, the floor is a two-colour checker) under one light from above, plus pixel noise. Labels are
rendered at ``label_size`` and the image at ``image_size`` from the same scene, so the labels are exact at
their own resolution. The arrays come in NYUv2's layout (image [N, S, S, 3] in [0, 1], label [N, s, s],
depth [N, s, s, 1], normal [N, s, s, 3]).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SCENE_CLASSES = ("floor", "wall", "box", "sphere", "cylinder")
FLOOR, WALL, BOX, SPHERE, CYLINDER = range(len(SCENE_CLASSES))
NO_LABEL = -1


@dataclass(frozen=True)
class SceneConfig:
    """Ranges of the random scene parameters."""

    objects: tuple[int, int] = (2, 5)
    fov_deg: float = 60.0
    window_prob: float = 0.5
    noise: float = 0.02

    def __post_init__(self) -> None:
        if not 1 <= self.objects[0] <= self.objects[1]:
            raise ValueError(f"objects must be (low, high) with 1 <= low <= high, got {self.objects}")
        if not 10 <= self.fov_deg <= 120:
            raise ValueError(f"fov_deg must be in [10, 120], got {self.fov_deg}")


def _rays(size: int, fov_deg: float) -> np.ndarray:
    """Unit ray directions in the camera frame (x right, y down, z forward) through the pixel centres:
    [size * size, 3], row-major."""
    focal = 0.5 * size / np.tan(np.radians(fov_deg) / 2)
    centres = np.arange(size) + 0.5 - size / 2
    v, u = np.meshgrid(centres, centres, indexing="ij")
    d = np.stack([u, v, np.full_like(u, focal)], axis=-1).reshape(-1, 3)
    return d / np.linalg.norm(d, axis=1, keepdims=True)


@dataclass(frozen=True)
class _Scene:
    height: float  # camera height above the floor
    pitch: float  # radians, looking down
    depth: float  # distance of the back wall
    half_width: float  # side walls at x = +-half_width
    window: tuple[float, float, float, float] | None  # back-wall window: x0, x1, y0, y1 (world)
    objects: tuple[tuple, ...]  # (class, params, colour)
    floor_colours: tuple[np.ndarray, np.ndarray]
    wall_colour: np.ndarray
    light: np.ndarray  # unit direction towards the light (world)


def _draw_scene(rng: np.random.Generator, cfg: SceneConfig) -> _Scene:
    depth, half_width = rng.uniform(4.5, 7.0), rng.uniform(2.2, 3.5)
    objects = []
    for _ in range(rng.integers(cfg.objects[0], cfg.objects[1] + 1)):
        kind = int(rng.integers(BOX, CYLINDER + 1))
        x, z = rng.uniform(-half_width + 0.8, half_width - 0.8), rng.uniform(1.8, depth - 1.0)
        colour = rng.uniform(0.15, 0.95, size=3)
        if kind == BOX:
            half = rng.uniform([0.3, 0.25, 0.3], [0.8, 0.9, 0.8])
            params = (np.array([x, half[1], z]), half, rng.uniform(0, np.pi / 2))
        elif kind == SPHERE:
            r = rng.uniform(0.3, 0.7)
            params = (np.array([x, r, z]), r)
        else:
            params = (np.array([x, 0.0, z]), rng.uniform(0.2, 0.55), rng.uniform(0.5, 1.8))
        objects.append((kind, params, colour))
    window = None
    if rng.random() < cfg.window_prob:
        x0 = rng.uniform(-half_width + 0.3, half_width - 1.5)
        y0 = rng.uniform(1.0, 1.6)
        window = (x0, x0 + rng.uniform(0.8, 1.6), y0, y0 + rng.uniform(0.6, 1.2))
    light = np.array([rng.uniform(-0.5, 0.5), 1.0, rng.uniform(-0.8, -0.1)])
    return _Scene(
        height=rng.uniform(1.2, 1.7),
        pitch=np.radians(rng.uniform(5, 25)),
        depth=depth,
        half_width=half_width,
        window=window,
        objects=tuple(objects),
        floor_colours=(rng.uniform(0.3, 0.8, 3), rng.uniform(0.1, 0.5, 3)),
        wall_colour=rng.uniform(0.5, 0.95, 3),
        light=light / np.linalg.norm(light),
    )


def _camera_to_world(pitch: float) -> np.ndarray:
    """Orthogonal map taking camera-frame vectors (x right, y down, z forward) to the world (x right, y up,
    z ahead; a left-handed frame, hence determinant -1) for a camera pitched down by ``pitch``."""
    c, s = np.cos(pitch), np.sin(pitch)
    # its columns are the camera axes in the world: x (1, 0, 0), y down (0, -c, -s), z forward (0, -s, c)
    return np.array([[1.0, 0.0, 0.0], [0.0, -c, -s], [0.0, -s, c]])


def _plane(o: np.ndarray, d: np.ndarray, axis: int, value: float) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (value - o[axis]) / d[:, axis]
    return np.where(t > 1e-6, t, np.inf)


def _hit_sphere(o: np.ndarray, d: np.ndarray, centre: np.ndarray, r: float) -> tuple[np.ndarray, np.ndarray]:
    oc = o - centre
    b = d @ oc
    disc = b * b - (oc @ oc - r * r)
    root = np.sqrt(np.maximum(disc, 0))
    t = np.where(disc >= 0, -b - root, np.inf)
    t = np.where(t > 1e-6, t, np.inf)
    normal = (o + np.where(np.isfinite(t), t, 0)[:, None] * d - centre) / r
    return t, normal


def _hit_box(
    o: np.ndarray, d: np.ndarray, centre: np.ndarray, half: np.ndarray, yaw: float
) -> tuple[np.ndarray, np.ndarray]:
    c, s = np.cos(yaw), np.sin(yaw)
    rot = np.array([[c, 0, -s], [0, 1, 0], [s, 0, c]])  # world -> box frame (rotation about y)
    ol, dl = rot @ (o - centre), d @ rot.T
    with np.errstate(divide="ignore", invalid="ignore"):
        t1, t2 = (-half - ol) / dl, (half - ol) / dl
    t_near, t_far = np.minimum(t1, t2), np.maximum(t1, t2)
    entry_axis = np.argmax(t_near, axis=1)
    t_in, t_out = t_near.max(axis=1), t_far.min(axis=1)
    t = np.where((t_in <= t_out) & (t_in > 1e-6), t_in, np.inf)
    local = np.zeros_like(dl)
    local[np.arange(len(d)), entry_axis] = -np.sign(dl[np.arange(len(d)), entry_axis])
    return t, local @ rot


def _hit_cylinder(
    o: np.ndarray, d: np.ndarray, base: np.ndarray, r: float, height: float
) -> tuple[np.ndarray, np.ndarray]:
    oc = (o - base)[[0, 2]]
    dxz = d[:, [0, 2]]
    a = (dxz**2).sum(axis=1)
    b = dxz @ oc
    disc = b * b - a * (oc @ oc - r * r)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_side = np.where(disc >= 0, (-b - np.sqrt(np.maximum(disc, 0))) / a, np.inf)
    y_side = o[1] + t_side * d[:, 1]
    t_side = np.where((t_side > 1e-6) & (y_side >= base[1]) & (y_side <= base[1] + height), t_side, np.inf)
    t_cap = _plane(o, d, 1, base[1] + height)
    p_cap = o + np.where(np.isfinite(t_cap), t_cap, 0)[:, None] * d
    inside = ((p_cap[:, [0, 2]] - base[[0, 2]]) ** 2).sum(axis=1) <= r * r
    t_cap = np.where(inside, t_cap, np.inf)
    side_normal = o + np.where(np.isfinite(t_side), t_side, 0)[:, None] * d - base
    side_normal[:, 1] = 0
    side_normal /= np.maximum(np.linalg.norm(side_normal, axis=1, keepdims=True), 1e-12)
    use_cap = t_cap < t_side
    normal = np.where(use_cap[:, None], np.array([0.0, 1.0, 0.0]), side_normal)
    return np.minimum(t_side, t_cap), normal


def _render(scene: _Scene, size: int, fov_deg: float) -> dict[str, np.ndarray]:
    """Cast one ray per pixel: label [S, S], depth [S, S, 1], normal (camera frame) [S, S, 3], colour [S, S, 3]."""
    cam_rays = _rays(size, fov_deg)
    to_world = _camera_to_world(scene.pitch)
    d = cam_rays @ to_world.T
    o = np.array([0.0, scene.height, 0.0])
    n = len(d)
    best_t = np.full(n, np.inf)
    label = np.full(n, FLOOR)
    normal = np.zeros((n, 3))
    colour = np.zeros((n, 3))

    def take(t: np.ndarray, cls: int, surf_normal: np.ndarray, surf_colour: np.ndarray) -> None:
        closer = t < best_t
        best_t[closer] = t[closer]
        label[closer] = cls
        normal[closer] = np.broadcast_to(surf_normal, (n, 3))[closer]
        colour[closer] = np.broadcast_to(surf_colour, (n, 3))[closer]

    t_floor = _plane(o, d, 1, 0.0)
    hit = o + np.where(np.isfinite(t_floor), t_floor, 0)[:, None] * d
    checker = ((np.floor(hit[:, 0] / 0.5) + np.floor(hit[:, 2] / 0.5)) % 2)[:, None]
    take(
        t_floor,
        FLOOR,
        np.array([0.0, 1.0, 0.0]),
        checker * scene.floor_colours[0] + (1 - checker) * scene.floor_colours[1],
    )
    take(_plane(o, d, 2, scene.depth), WALL, np.array([0.0, 0.0, -1.0]), scene.wall_colour)
    take(_plane(o, d, 0, -scene.half_width), WALL, np.array([1.0, 0.0, 0.0]), 0.9 * scene.wall_colour)
    take(_plane(o, d, 0, scene.half_width), WALL, np.array([-1.0, 0.0, 0.0]), 0.9 * scene.wall_colour)
    for kind, params, obj_colour in scene.objects:
        t, surf = (
            _hit_box(o, d, *params)
            if kind == BOX
            else _hit_sphere(o, d, *params)
            if kind == SPHERE
            else _hit_cylinder(o, d, *params)
        )
        take(t, kind, surf, obj_colour)

    world_hit = o + best_t[:, None] * d
    shade = 0.35 + 0.65 * np.clip(normal @ scene.light, 0, None)
    rgb = colour * shade[:, None]
    cam_normal = normal @ to_world  # world -> camera: R^T n
    cam_normal *= -np.sign((cam_normal * cam_rays).sum(axis=1, keepdims=True) + 1e-12)  # face the camera
    depth = best_t * cam_rays[:, 2]  # z-depth: t (d_cam . z)
    if scene.window is not None:
        x0, x1, y0, y1 = scene.window
        glass = (
            (label == WALL)
            & (np.abs(world_hit[:, 2] - scene.depth) < 1e-6)
            & (world_hit[:, 0] > x0)
            & (world_hit[:, 0] < x1)
            & (world_hit[:, 1] > y0)
            & (world_hit[:, 1] < y1)
        )
        label[glass], depth[glass], cam_normal[glass] = NO_LABEL, 0.0, 0.0
        rgb[glass] = np.array([0.75, 0.85, 1.0])
    return {
        "label": label.reshape(size, size),
        "depth": depth.reshape(size, size, 1),
        "normal": cam_normal.reshape(size, size, 3),
        "colour": rgb.reshape(size, size, 3),
    }


def render_scenes(
    n: int, image_size: int, label_size: int, seed: int, cfg: SceneConfig = SceneConfig()
) -> dict[str, np.ndarray]:
    """``n`` scenes from ``numpy.random.default_rng(seed)``: image [n, S, S, 3] float32 in [0, 1] (S =
    ``image_size``), label [n, s, s] int64, depth [n, s, s, 1] and normal [n, s, s, 3] float32 (s =
    ``label_size``). The same seed gives the same scenes, whatever the sizes."""
    scene_seed, noise_seed = np.random.SeedSequence(seed).spawn(2)  # scenes drawn apart from the pixel noise
    rng, noise_rng = np.random.default_rng(scene_seed), np.random.default_rng(noise_seed)
    out: dict[str, list[np.ndarray]] = {"image": [], "label": [], "depth": [], "normal": []}
    for _ in range(n):
        scene = _draw_scene(rng, cfg)
        noise = noise_rng.normal(0, cfg.noise, size=(image_size, image_size, 3))
        pixels = _render(scene, image_size, cfg.fov_deg)
        labels = pixels if label_size == image_size else _render(scene, label_size, cfg.fov_deg)
        out["image"].append(np.clip(pixels["colour"] + noise, 0, 1))
        for key in ("label", "depth", "normal"):
            out[key].append(labels[key])
    return {
        "image": np.stack(out["image"]).astype(np.float32),
        "label": np.stack(out["label"]).astype(np.int64),
        "depth": np.stack(out["depth"]).astype(np.float32),
        "normal": np.stack(out["normal"]).astype(np.float32),
    }
