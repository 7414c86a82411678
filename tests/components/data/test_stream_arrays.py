"""The user's stream archive: a valid file reads back, and every malformed one is refused naming the array and
the problem, without unpickling anything and without repeating the file's contents."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from components.data.stream_arrays import check_stream_npz, read_stream_npz


def arrays(**override: np.ndarray) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    base = {
        "x_train": rng.integers(0, 256, (12, 5, 5), dtype=np.uint8),
        "y_train": np.arange(12) % 4,
        "x_test": rng.integers(0, 256, (8, 5, 5), dtype=np.uint8),
        "y_test": np.arange(8) % 4,
    }
    return {**base, **override}


def write(tmp_path: Path, **data: np.ndarray) -> Path:
    path = tmp_path / "stream.npz"
    np.savez(path, **data)
    return path


def test_valid_archive_reads_back(tmp_path: Path) -> None:
    data = arrays()
    path = write(tmp_path, **data, extra=np.zeros(3))  # extra arrays are ignored
    read = read_stream_npz(path)
    assert sorted(read) == ["x_test", "x_train", "y_test", "y_train"]
    assert all(np.array_equal(read[k], data[k]) for k in read)
    assert check_stream_npz(path) == 4
    colour = write(
        tmp_path, **arrays(x_train=np.zeros((12, 4, 4, 3), np.uint8), x_test=np.zeros((8, 4, 4, 3), np.uint8))
    )
    assert check_stream_npz(colour) == 4


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"x_train": np.zeros((12, 5, 5), np.float32)}, r"x_train: expected uint8 images .* got float32 \[12, 5, 5\]"),
        ({"x_test": np.zeros((8, 25), np.uint8)}, r"x_test: expected uint8 images .* got uint8 \[8, 25\]"),
        ({"y_train": np.arange(12) % 4 * 0.5}, r"y_train: expected integer labels \[N\], got float64"),
        ({"y_test": np.arange(7) % 4}, r"y_test: 7 labels for 8 images in x_test"),
        ({"y_train": np.r_[np.arange(11) % 4, -3]}, r"y_train: row 11: label -3 outside 0\.\.9999"),
        ({"x_test": np.zeros((8, 6, 5), np.uint8)}, r"x_test: images of shape \[6, 5\], but x_train has \[5, 5\]"),
        ({"y_test": np.arange(8) % 3}, r"y_test: class 3 has no image"),
        ({"y_train": np.zeros(12, np.int64), "y_test": np.zeros(8, np.int64)}, r"a single class"),
    ],
)
def test_malformed_arrays_are_named(tmp_path: Path, change: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_stream_npz(write(tmp_path, **arrays(**change)))


def test_missing_array_and_wrong_containers(tmp_path: Path) -> None:
    data = arrays()
    del data["y_test"]
    with pytest.raises(ValueError, match=r"array 'y_test' is missing"):
        check_stream_npz(write(tmp_path, **data))
    single = tmp_path / "x.npy"
    np.save(single, np.zeros(3))
    with pytest.raises(ValueError, match="single .npy array"):
        check_stream_npz(single)
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="not a numpy .npz archive"):
        check_stream_npz(empty)


def test_pickled_content_is_refused_not_run(tmp_path: Path) -> None:
    ran = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (ran,))

    raw = tmp_path / "evil.npz"
    raw.write_bytes(pickle.dumps(Payload()))
    with pytest.raises(ValueError, match="pickle"):
        check_stream_npz(raw)
    objects = write(tmp_path, **arrays(y_train=np.array([Payload()] * 12, dtype=object)))
    with pytest.raises(ValueError, match=r"array 'y_train': holds Python objects"):
        check_stream_npz(objects)
    assert not ran.exists()


def test_task_count_uses_every_class_in_at_least_two_tasks() -> None:
    from components.data.stream_arrays import task_count

    assert task_count(10, 2) == 5 and task_count(6, 3) == 2
    with pytest.raises(ValueError, match=r"seq: 10 classes do not split into tasks of 3: the last 1 class\(es\)"):
        task_count(10, 3, "seq")  # review st21: class 9 was dropped silently
    with pytest.raises(ValueError, match=r"3 classes make 1 task\(s\) of 2 classes; .* \(and 1 class\(es\) would be"):
        task_count(3, 2)  # review st20: a 1-task stream, class 2 dropped
    with pytest.raises(ValueError, match=r"10 classes make 0 task\(s\) of 20 classes"):
        task_count(10, 20)  # review st22
