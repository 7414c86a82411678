"""Generated captions and the embedding-pair folder check."""

from __future__ import annotations

import numpy as np
import pytest

from components.data.embedding_pairs import check_embedding_pairs, read_embedding_pairs
from components.data.label_captions import TEMPLATES, attribute_codes, caption_index, caption_table, prompts


def test_attribute_codes_by_hand() -> None:
    img = np.zeros((4, 2, 2))
    img[0, 0, 0] = 0.3  # dark, slim
    img[1, 0, :] = 0.3  # dark, wide
    img[2, 0, 0] = 0.9  # bright, slim
    img[3, 0, :] = 0.9  # bright, wide
    assert attribute_codes(img).tolist() == [0, 1, 2, 3]


def test_caption_table_and_index_agree() -> None:
    table = caption_table("fashion")
    assert len(table) == len(TEMPLATES) * 10 * 4 and len(set(table)) == len(table)
    row = caption_index(np.array([2]), np.array([9]), np.array([3]), 10)[0]
    assert table[row] == "a small grayscale image showing a bright, wide ankle boot."
    assert prompts("mnist")[3] == "a photo of a digit three."


def _write(folder, image, text, labels) -> None:
    np.save(folder / "image.npy", image), np.save(folder / "text.npy", text), np.save(folder / "labels.npy", labels)


def test_embedding_pairs_check(tmp_path) -> None:
    rng = np.random.default_rng(0)
    _write(
        tmp_path, rng.standard_normal((12, 5)).astype(np.float32), rng.standard_normal((12, 3)), np.array([3, 5] * 6)
    )
    assert check_embedding_pairs(tmp_path) == {"rows": 12, "image_dim": 5, "text_dim": 3, "classes": 2}
    image, text, labels = read_embedding_pairs(tmp_path)
    assert labels.tolist() == [0, 1] * 6 and image.dtype == np.float32 and text.shape == (12, 3)
    np.save(tmp_path / "text.npy", rng.standard_normal((11, 3)))
    with pytest.raises(ValueError, match=r"row counts differ \(image.npy 12, text.npy 11"):
        check_embedding_pairs(tmp_path)
    np.save(tmp_path / "text.npy", rng.standard_normal((12,)))
    with pytest.raises(ValueError, match=r"text.npy: shape must be \[N, d\]"):
        check_embedding_pairs(tmp_path)
    bad = rng.standard_normal((12, 3))
    bad[7, 1] = np.nan
    np.save(tmp_path / "text.npy", bad)
    with pytest.raises(ValueError, match="text.npy: row 7 holds NaN"):
        check_embedding_pairs(tmp_path)
    np.save(tmp_path / "text.npy", rng.standard_normal((12, 3)))
    np.save(tmp_path / "labels.npy", np.arange(12.0))
    with pytest.raises(ValueError, match="labels.npy: dtype must be integer"):
        check_embedding_pairs(tmp_path)
    (tmp_path / "labels.npy").write_bytes(b"not numpy")
    with pytest.raises(ValueError, match="labels.npy: not a .npy file"):
        check_embedding_pairs(tmp_path)
    (tmp_path / "labels.npy").unlink()
    with pytest.raises(ValueError, match="labels.npy: missing"):
        check_embedding_pairs(tmp_path)


def test_embedding_labels_by_value_and_values_within_float32_reach(tmp_path) -> None:
    """Review cs03: one label of 2**40 made np.bincount allocate 8 TiB; cs02: 1e300 is inf in float32."""
    rng = np.random.default_rng(0)
    _write(tmp_path, rng.standard_normal((12, 5)), rng.standard_normal((12, 3)), np.array([7, 2**40] * 6))
    assert check_embedding_pairs(tmp_path)["classes"] == 2  # sparse, huge labels: re-indexed
    assert read_embedding_pairs(tmp_path)[2].tolist() == [0, 1] * 6
    np.save(tmp_path / "labels.npy", np.array([7, 2**40] * 5 + [7, 2**41]))
    with pytest.raises(ValueError, match=r"labels\.npy: class 2199023255552 has a single row"):
        check_embedding_pairs(tmp_path)
    np.save(tmp_path / "labels.npy", np.array([7, 9] * 6))
    image = rng.standard_normal((12, 5))
    image[4, 2] = 1e300
    np.save(tmp_path / "image.npy", image)
    with pytest.raises(ValueError, match=r"image\.npy: row 4 holds a value above 1e\+30 in magnitude"):
        check_embedding_pairs(tmp_path)
