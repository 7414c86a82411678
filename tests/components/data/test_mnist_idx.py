"""MNIST from a user folder of IDX files: read back, refused when malformed, never unpickled."""

import gzip
import inspect
import os
import pickle
import struct

import numpy as np
import pytest
import torch

from components.data.images import MNIST_IDX_FILES, check_mnist_idx, load_mnist, load_mnist_idx


def write_idx(path, array, code=0x08, compress=True, cut=0):
    raw = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()
    raw = raw[: len(raw) - cut]
    path.write_bytes(gzip.compress(raw) if compress else raw)
    return path


def mnist_folder(folder, n_train=3, n_test=2, compress=True, labels=None):
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("test", n_test)):
        images = (np.arange(n * 784) % 256).astype(np.uint8).reshape(n, 28, 28)
        ys = np.array(labels if labels is not None and split == "train" else np.arange(n) % 10, dtype=np.uint8)
        suffix = ".gz" if compress else ""
        write_idx(folder / (MNIST_IDX_FILES[split][0] + suffix), images, compress=compress)
        write_idx(folder / (MNIST_IDX_FILES[split][1] + suffix), ys, compress=compress)
    return folder


class Payload:
    """Unpickling this creates a folder: the test that nothing of it ever runs."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.mkdir, (self.marker,)


@pytest.mark.parametrize("compress", [True, False])
def test_a_valid_idx_folder_reads_back(tmp_path, compress):
    folder = mnist_folder(tmp_path / "mnist", compress=compress)
    assert check_mnist_idx(folder) == {"train": 3, "test": 2}
    x, y = load_mnist_idx(folder, "train")
    assert x.shape == (3, 28, 28) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert y.tolist() == [0, 1, 2] and float(x[0, 0, 1]) == pytest.approx(1 / 255) and float(x.max()) == 1.0
    assert load_mnist_idx(folder, "test")[0].shape == (2, 28, 28)
    with pytest.raises(ValueError, match="split must be one of"):
        load_mnist_idx(folder, "val")


def test_malformed_idx_files_are_refused_naming_the_problem(tmp_path):
    folder = mnist_folder(tmp_path / "labels", labels=[1, 12, 3])
    with pytest.raises(ValueError, match=r"train-labels-idx1-ubyte.gz: label 12 at row 1 is outside 0..9"):
        check_mnist_idx(folder)
    folder = mnist_folder(tmp_path / "short")
    write_idx(folder / "t10k-images-idx3-ubyte.gz", np.zeros((2, 28, 28), np.uint8), cut=5)
    with pytest.raises(ValueError, match="truncated IDX data"):
        check_mnist_idx(folder)
    folder = mnist_folder(tmp_path / "shape")
    write_idx(folder / "train-images-idx3-ubyte.gz", np.zeros((3, 8, 8), np.uint8))
    with pytest.raises(ValueError, match=r"expected uint8 images \[N, 28, 28\], got uint8 \[3, 8, 8\]"):
        check_mnist_idx(folder)
    folder = mnist_folder(tmp_path / "count")
    write_idx(folder / "train-labels-idx1-ubyte.gz", np.zeros(4, np.uint8))
    with pytest.raises(ValueError, match="4 labels for 3 images"):
        check_mnist_idx(folder)
    folder = mnist_folder(tmp_path / "missing")
    (folder / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(ValueError, match="missing t10k-labels-idx1-ubyte.gz"):
        check_mnist_idx(folder)
    with pytest.raises(ValueError, match="not a folder"):
        check_mnist_idx(tmp_path / "nowhere")


def test_a_pickle_in_place_of_an_idx_file_is_refused_and_never_run(tmp_path):
    folder = mnist_folder(tmp_path / "mnist")
    marker = tmp_path / "unpickled"
    (folder / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(pickle.dumps(Payload(marker))))
    with pytest.raises(ValueError, match="bad IDX magic"):
        check_mnist_idx(folder)
    with pytest.raises(ValueError, match="bad IDX magic"):
        load_mnist_idx(folder, "train")
    assert not marker.exists()


def test_the_pickle_reader_takes_no_user_path():
    assert list(inspect.signature(load_mnist).parameters) == ["split"]


def test_damaged_gzip_huge_headers_and_one_class_are_refused(tmp_path):
    folder = mnist_folder(tmp_path / "gz")
    (folder / "train-images-idx3-ubyte.gz").write_bytes(b"\x1f\x8b\x08\x00\0\0\0\0\0\x03" + b"\xff" * 64)
    with pytest.raises(ValueError, match=r"train-images-idx3-ubyte\.gz: corrupt gzip stream \(zlib\.error\)"):
        check_mnist_idx(folder)  # review gr01: a zlib.error escaped the check
    folder = mnist_folder(tmp_path / "huge")
    (folder / "train-images-idx3-ubyte.gz").write_bytes(
        gzip.compress(bytes([0, 0, 8, 3]) + struct.pack(">3I", 2**31, 28, 28))
    )
    with pytest.raises(ValueError, match=r"the IDX header announces dims \[2147483648, 28, 28\] .* more than"):
        check_mnist_idx(folder)
    folder = mnist_folder(tmp_path / "one", labels=[0, 0, 0])
    with pytest.raises(ValueError, match=r"train-labels-idx1-ubyte\.gz: every label is 0; the train split needs"):
        check_mnist_idx(folder)  # review gr07: a one-class task was trained
