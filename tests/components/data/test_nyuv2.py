"""The preprocessed NYUv2 layout: a tiny folder is read; each malformed file or folder is named before any work."""

import pickle
from pathlib import Path

import numpy as np
import pytest

from components.data.npy_files import npy_header
from components.data.nyuv2 import check_nyuv2, label_grid, read_nyuv2, subsample


def write_nyuv2(root: Path, n: dict[str, int] | None = None, h: int = 6, w: int = 8, seed: int = 0) -> Path:
    """A tiny NYUv2 folder in the MTAN layout: n[split] indices per split."""
    rng = np.random.default_rng(seed)
    for split, count in (n or {"train": 3, "val": 2}).items():
        for idx in range(count):
            label = rng.integers(-1, 13, size=(h, w)).astype(np.float32)
            depth = rng.uniform(0.5, 8, size=(h, w, 1)).astype(np.float32)
            depth[0, 0] = 0.0
            normal = rng.normal(size=(h, w, 3))
            normal = (normal / np.linalg.norm(normal, axis=-1, keepdims=True)).astype(np.float32)
            for kind, array in (
                ("image", rng.uniform(size=(h, w, 3)).astype(np.float32)),
                ("label", label),
                ("depth", depth),
                ("normal", normal),
            ):
                (root / split / kind).mkdir(parents=True, exist_ok=True)
                np.save(root / split / kind / f"{idx}.npy", array)
    return root


def test_a_tiny_folder_is_checked_and_read(tmp_path):
    root = write_nyuv2(tmp_path / "nyu")
    summary = check_nyuv2(root)
    assert (summary.counts, summary.height, summary.width) == ({"train": 3, "val": 2}, 6, 8)
    items = list(read_nyuv2(root, "train", limit=2))
    assert [idx for idx, _ in items] == [0, 1]
    item = items[0][1]
    assert item["image"].shape == (6, 8, 3) and item["label"].dtype == np.int64
    assert item["depth"].shape == (6, 8, 1) and item["normal"].shape == (6, 8, 3)
    np.testing.assert_array_equal(item["label"], np.load(root / "train" / "label" / "0.npy").astype(np.int64))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda r: __import__("shutil").rmtree(r / "val"), r"val: missing split folder"),
        (lambda r: (r / "train" / "normal" / "1.npy").unlink(), r"train/normal/1\.npy: missing"),
        (
            lambda r: np.save(r / "train" / "depth" / "2.npy", np.ones((6, 8, 2), np.float32)),
            r"train/depth/2\.npy: depth must be \[H, W, 1\] floats, got shape \(6, 8, 2\)",
        ),
        (
            lambda r: np.save(r / "val" / "image" / "1.npy", np.ones((5, 8, 3), np.float32)),
            r"index 1 has different spatial sizes per kind",
        ),
        (
            lambda r: np.save(r / "train" / "label" / "0.npy", np.full((6, 8), 13.0, np.float32)),
            r"train/label/0\.npy: label values must be whole numbers in \[-1, 12\]",
        ),
        (
            lambda r: (r / "train" / "image" / "x.npy").write_bytes(b""),
            r"train/image/x\.npy: file name is not an integer",
        ),
        (
            lambda r: (r / "train" / "image" / "0.npy").write_bytes(pickle.dumps({"a": 1})),
            r"image/0\.npy: not a \.npy file",
        ),
        (
            lambda r: np.save(
                r / "train" / "normal" / "0.npy", np.array([{"a": 1}] * 3, dtype=object), allow_pickle=True
            ),
            r"normal/0\.npy: holds Python objects",
        ),
    ],
)
def test_malformed_folders_are_named(tmp_path, damage, message):
    root = write_nyuv2(tmp_path / "nyu")
    damage(root)
    with pytest.raises(ValueError, match=message):
        check_nyuv2(root)


def test_values_of_every_file_are_checked_up_front_and_when_read(tmp_path):
    root = write_nyuv2(tmp_path / "nyu")
    np.save(root / "train" / "image" / "2.npy", np.full((6, 8, 3), 255.0, np.float32))
    with pytest.raises(ValueError, match=r"train/image/2\.npy: image values must lie in \[0, 1\]"):
        check_nyuv2(root)  # every index, not only the first (review mt01, mt02)
    with pytest.raises(ValueError, match=r"train/image/2\.npy: image values must lie in \[0, 1\]"):
        list(read_nyuv2(root, "train"))
    root = write_nyuv2(tmp_path / "nan")
    label = np.zeros((6, 8), np.float32)
    label[3, 3] = 40
    np.save(root / "val" / "label" / "1.npy", label)
    with pytest.raises(ValueError, match=r"val/label/1\.npy: label values must be whole numbers in \[-1, 12\]"):
        check_nyuv2(root)


def test_one_image_size_for_every_index_and_split(tmp_path):
    root = write_nyuv2(tmp_path / "mixed")
    for kind, channels in (("image", 3), ("label", 0), ("depth", 1), ("normal", 3)):
        shape = (8, 6, channels) if channels else (8, 6)
        np.save(root / "train" / kind / "1.npy", np.zeros(shape, np.float32))
    with pytest.raises(ValueError, match=r"train/image/1\.npy: 8x6, but index 0 is 6x8; every index must have"):
        check_nyuv2(root)
    with pytest.raises(ValueError, match=r"every index must have the same size"):
        list(read_nyuv2(root, "train"))
    other = write_nyuv2(tmp_path / "splits", n={"train": 2}, h=6, w=8)
    write_nyuv2(other, n={"val": 2}, h=10, w=8)
    with pytest.raises(ValueError, match=r"val: images of 10x8, but train/ holds 6x8"):
        check_nyuv2(other)


def test_label_grid_needs_a_pixel_at_the_stride():
    assert label_grid(288, 384, 8) == (36, 48) and label_grid(5, 5, 8) == (1, 1)
    with pytest.raises(ValueError, match=r"images of 4x4 leave no label pixel at stride 8"):
        label_grid(4, 4, 8)
    assert subsample(np.arange(64).reshape(8, 8), 4).tolist() == [[18, 22], [50, 54]]


def test_npy_header_refuses_truncated_files(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.zeros((4, 4), np.float32))
    assert npy_header(path) == ((4, 4), np.dtype("float32"))
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(ValueError, match="truncated"):
        npy_header(path)
