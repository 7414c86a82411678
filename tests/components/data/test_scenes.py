"""Rendered scenes: exact depth and normals of hand-placed surfaces, windows without labels, determinism."""

import numpy as np
import pytest

from components.data.scenes import FLOOR, NO_LABEL, SPHERE, WALL, SceneConfig, _render, _Scene, render_scenes

FOV = 60.0


def _scene(objects=(), window=None, pitch=0.0) -> _Scene:
    grey = np.full(3, 0.5)
    return _Scene(
        height=1.5,
        pitch=pitch,
        depth=5.0,
        half_width=3.0,
        window=window,
        objects=tuple(objects),
        floor_colours=(grey, grey),
        wall_colour=grey,
        light=np.array([0.0, 1.0, 0.0]),
    )


def test_centre_ray_hits_the_back_wall_and_the_bottom_row_the_floor_at_the_pinhole_depth():
    out = _render(_scene(), 5, FOV)
    assert out["label"][2, 2] == WALL
    assert out["depth"][2, 2, 0] == pytest.approx(5.0)
    np.testing.assert_allclose(out["normal"][2, 2], [0.0, 0.0, -1.0], atol=1e-12)
    focal = 0.5 * 5 / np.tan(np.radians(FOV) / 2)
    assert out["label"][4, 2] == FLOOR  # 2 pixels below the centre: depth = height * focal / 2
    assert out["depth"][4, 2, 0] == pytest.approx(1.5 * focal / 2)
    np.testing.assert_allclose(out["normal"][4, 2], [0.0, -1.0, 0.0], atol=1e-12)  # up in the world = -y (y down)


def test_a_sphere_straight_ahead_is_hit_at_its_front_and_a_window_has_no_label_depth_or_normal():
    sphere = (SPHERE, (np.array([0.0, 1.5, 3.0]), 0.5), np.full(3, 0.7))
    out = _render(_scene(objects=[sphere]), 5, FOV)
    assert out["label"][2, 2] == SPHERE and out["depth"][2, 2, 0] == pytest.approx(2.5)
    np.testing.assert_allclose(out["normal"][2, 2], [0.0, 0.0, -1.0], atol=1e-9)
    glass = _render(_scene(window=(-1.0, 1.0, 1.0, 2.0)), 5, FOV)
    assert glass["label"][2, 2] == NO_LABEL and glass["depth"][2, 2, 0] == 0.0
    assert not glass["normal"][2, 2].any()


def test_pitch_keeps_normals_unit_and_facing_the_camera():
    out = _render(_scene(pitch=np.radians(20)), 9, FOV)
    norms = np.linalg.norm(out["normal"], axis=-1)
    np.testing.assert_allclose(norms, 1.0, atol=1e-9)
    floor = out["label"] == FLOOR
    # the floor normal is up in the world; in a camera pitched down by 20 degrees it is (0, -cos 20, -sin 20)
    np.testing.assert_allclose(
        out["normal"][floor],
        np.tile([0, -np.cos(np.radians(20)), -np.sin(np.radians(20))], (int(floor.sum()), 1)),
        atol=1e-9,
    )


def test_render_scenes_layout_validity_and_determinism():
    a = render_scenes(6, 28, 14, seed=3, cfg=SceneConfig(window_prob=1.0))
    assert a["image"].shape == (6, 28, 28, 3) and a["label"].shape == (6, 14, 14)
    assert a["depth"].shape == (6, 14, 14, 1) and a["normal"].shape == (6, 14, 14, 3)
    assert a["image"].dtype == np.float32 and a["label"].dtype == np.int64
    assert 0 <= a["image"].min() and a["image"].max() <= 1
    unlabelled = a["label"] == NO_LABEL
    assert unlabelled.any()  # every scene has a window
    assert (a["depth"][..., 0][unlabelled] == 0).all() and (a["depth"][..., 0][~unlabelled] > 0).all()
    norms = np.linalg.norm(a["normal"], axis=-1)
    np.testing.assert_allclose(norms[~unlabelled], 1.0, atol=1e-5)
    assert (norms[unlabelled] == 0).all()
    b = render_scenes(6, 28, 14, seed=3, cfg=SceneConfig(window_prob=1.0))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    c = render_scenes(6, 14, 14, seed=3, cfg=SceneConfig(window_prob=1.0))  # the same scenes at another size
    assert np.array_equal(c["label"], a["label"])
    with pytest.raises(ValueError, match="objects"):
        SceneConfig(objects=(3, 2))
