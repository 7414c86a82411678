"""Animal-MNIST loader, the pooled 28x28 datasets and the class-disjoint task / pretraining split."""

import gzip
import importlib.util
import pickle

import numpy as np
import pytest
import torch

from components.data.image_files import ANIMAL_MNIST_FILES, animal_mnist_arrays
from components.data.images import class_disjoint_split, load_animal_mnist, resize_images

HAS_ANIMAL = importlib.util.find_spec("animal_mnist") is not None


@pytest.mark.skipif(not HAS_ANIMAL, reason="animal-mnist is not installed")
def test_animal_mnist_has_ten_balanced_classes_in_unit_range():
    x, y = load_animal_mnist()
    assert x.shape == (10000, 28, 28) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert 0.0 <= float(x.min()) and float(x.max()) <= 1.0 and float(x.max()) > 0.9
    assert torch.bincount(y).tolist() == [1000] * 10


def _write(folder, images, labels):
    for name, obj in zip(ANIMAL_MNIST_FILES, (images, labels)):
        with gzip.open(folder / name, "wb") as fh:
            pickle.dump(obj, fh, protocol=4)


def test_animal_mnist_reader_checks_shapes_and_labels(tmp_path):
    images = np.arange(2 * 28 * 28, dtype=np.uint8).reshape(2, 28, 28)
    _write(tmp_path, images, np.array([3, 9]))
    x, y = animal_mnist_arrays(tmp_path)
    assert np.array_equal(x, images) and y.tolist() == [3, 9] and y.dtype == np.int64
    _write(tmp_path, images, np.array([3, 10]))
    with pytest.raises(ValueError, match="label 10 at row 1"):
        animal_mnist_arrays(tmp_path)
    _write(tmp_path, images[:, :14], np.array([3, 9]))
    with pytest.raises(ValueError, match=r"uint8 images \[N, 28, 28\]"):
        animal_mnist_arrays(tmp_path)


def test_animal_mnist_reader_refuses_a_pickle_that_runs_code(tmp_path):
    _write(tmp_path, np.zeros((1, 28, 28), np.uint8), np.array([0]))
    with gzip.open(tmp_path / ANIMAL_MNIST_FILES[0], "wb") as fh:
        pickle.dump(print, fh)  # a global that is not part of a numpy array
    with pytest.raises(pickle.UnpicklingError, match="refused global"):
        animal_mnist_arrays(tmp_path)


def test_resize_keeps_a_constant_image_and_the_size_it_has():
    x = torch.full((2, 8, 8), 0.25)
    assert torch.allclose(resize_images(x, 28), torch.full((2, 28, 28), 0.25))
    assert resize_images(x, 8) is x


def test_class_disjoint_split_sizes_relabelling_and_disjointness():
    labels = torch.arange(10).repeat(40)  # 400 images, 40 per class
    images = labels.float()[:, None, None] + torch.arange(400).float()[:, None, None] * 1e-3
    parts = class_disjoint_split(images, labels, [7, 2], n_train=1000, n_val=30, n_test=50, n_rest=100, seed=0)
    # 80 task images: test min(50, 20) = 20, val min(30, 16) = 16, train the other 44
    assert [len(parts[s][1]) for s in ("test", "val", "train")] == [20, 16, 44]
    for split in ("test", "val", "train"):
        x, y = parts[split]
        original = x[:, 0, 0].floor().long()
        assert set(y.tolist()) <= {0, 1} and torch.equal(torch.tensor([7, 2])[y], original)
    rest_x, rest_y = parts["rest"]
    original = rest_x[:, 0, 0].floor().long()
    assert len(rest_y) == 100 and not set(original.tolist()) & {2, 7}
    kept = [0, 1, 3, 4, 5, 6, 8, 9]
    assert torch.equal(torch.tensor(kept)[rest_y], original)  # relabelled in increasing class order
    ids = [set(parts[s][0][:, 0, 0].tolist()) for s in ("test", "val", "train", "rest")]
    assert sum(len(i) for i in ids) == len(set().union(*ids))  # no image in two parts
    again = class_disjoint_split(images, labels, [7, 2], n_train=1000, n_val=30, n_test=50, n_rest=100, seed=0)
    assert torch.equal(again["train"][0], parts["train"][0])
