"""Procedural shape families (determinism, normalisation, geometry) and the PC15k reader."""

import numpy as np
import pytest
import torch

from components.data.names import SHAPE_FAMILY_NAMES
from components.data.pc15k import read_pc15k_arrays
from components.data.shapes import SHAPE_FAMILIES, check_pc15k, read_pc15k, sample_shapes


def test_the_family_names_are_the_table_keys():
    assert tuple(SHAPE_FAMILIES) == SHAPE_FAMILY_NAMES


@pytest.mark.parametrize("category", sorted(SHAPE_FAMILIES))
def test_every_family_samples_normalised_clouds(category):
    x = sample_shapes(category, n_shapes=3, n_points=64, seed=0)
    assert x.shape == (3, 64, 3) and x.dtype == torch.float32
    torch.testing.assert_close(x.mean(dim=1), torch.zeros(3, 3), atol=1e-5, rtol=0)
    torch.testing.assert_close(x.flatten(1).std(dim=1, correction=0), torch.ones(3), atol=1e-5, rtol=0)


def test_deterministic_given_seed():
    a = sample_shapes("torus", 4, 32, seed=11)
    assert torch.equal(a, sample_shapes("torus", 4, 32, seed=11))
    assert not torch.allclose(a, sample_shapes("torus", 4, 32, seed=12))
    assert not torch.allclose(a[0], a[1])  # instances differ from each other


def test_geometry_in_mesh_units():
    cyl = sample_shapes("cylinder", 5, 200, seed=1, normalization="none")
    radial = cyl[..., :2].norm(dim=-1)
    assert float(radial.max()) <= 0.8 + 1e-5  # radius ~ U[0.3, 0.8]
    assert float(cyl[..., 2].abs().max()) <= 1.0 + 1e-5  # height ~ U[0.8, 2.0], centred
    ell = sample_shapes("ellipsoid", 2, 500, seed=2, normalization="none")
    assert float(ell.norm(dim=-1).max()) <= 1.5 + 1e-5 and float(ell.norm(dim=-1).min()) >= 0.5 - 1e-2
    tor = sample_shapes("torus", 2, 500, seed=3, normalization="none")
    ring = tor[..., :2].norm(dim=-1)
    assert float(ring.min()) > 0.8 - 0.45 - 1e-5  # the hole: no point closer than R - r to the axis


def test_dataset_normalisation_and_errors():
    x = sample_shapes("chair", 3, 40, seed=4, normalization="dataset")
    torch.testing.assert_close(x.reshape(-1, 3).mean(0), torch.zeros(3), atol=1e-5, rtol=0)
    assert float(x.std(correction=0)) == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ValueError, match="unknown shape category"):
        sample_shapes("teapot", 1, 8, seed=0)
    with pytest.raises(ValueError, match="unknown normalization"):
        sample_shapes("torus", 1, 8, seed=0, normalization="minmax")


def _write_fake_pc15k(root, synset="03001627", split="train", n_files=3, n_rows=50):
    folder = root / synset / split
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    arrays = []
    for k in range(n_files):
        arr = rng.normal(size=(n_rows, 3)).astype(np.float32)
        np.save(folder / f"shape_{k:03d}.npy", arr)
        arrays.append(arr)
    return folder, arrays


def test_read_pc15k_subsamples_real_rows(tmp_path):
    _, arrays = _write_fake_pc15k(tmp_path)
    x = read_pc15k(tmp_path, "chair", "train", n_points=16, seed=0, normalization="none")
    assert x.shape == (3, 16, 3) and x.dtype == torch.float32
    for k in range(3):
        rows = {tuple(r) for r in arrays[k].tolist()}
        picked = [tuple(r) for r in x[k].tolist()]
        assert all(p in rows for p in picked) and len(set(picked)) == 16
    assert torch.equal(x, read_pc15k(tmp_path, "chair", "train", 16, seed=0, normalization="none"))
    raw = read_pc15k_arrays(tmp_path, "chair", "train", 16, seed=0)
    assert raw.dtype == np.float64 and torch.equal(x, torch.from_numpy(raw).float())
    assert read_pc15k(tmp_path, "03001627", "train", 16, seed=0, max_shapes=2).shape == (2, 16, 3)
    normed = read_pc15k(tmp_path, "chair", "train", 16, seed=0)
    torch.testing.assert_close(normed.mean(1), torch.zeros(3, 3), atol=1e-5, rtol=0)


def test_read_pc15k_errors_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "02691156" / "test")):
        read_pc15k(tmp_path, "airplane", "test", 8, seed=0)
    with pytest.raises(ValueError, match="unknown PC15k category"):
        read_pc15k(tmp_path, "sofa", "train", 8, seed=0)
    (tmp_path / "02958343" / "val").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no .npy files"):
        read_pc15k(tmp_path, "car", "val", 8, seed=0)
    folder, _ = _write_fake_pc15k(tmp_path)
    np.save(folder / "shape_bad.npy", np.zeros((50, 2), dtype=np.float32))
    with pytest.raises(ValueError, match="shape_bad.npy"):
        read_pc15k(tmp_path, "chair", "train", 8, seed=0)
    with pytest.raises(ValueError, match=r"K >= 100"):
        read_pc15k(tmp_path, "chair", "train", 100, seed=0, max_shapes=1)


def test_check_pc15k_accepts_the_layout_and_counts_files(tmp_path):
    _write_fake_pc15k(tmp_path, split="train", n_files=3)
    _write_fake_pc15k(tmp_path, split="test", n_files=2)
    (tmp_path / "README.txt").write_text("not a synset")  # other entries of the root are ignored
    assert check_pc15k(tmp_path) == {"03001627": {"train": 3, "test": 2}}


def _bad_file(folder, kind):
    path = folder / "shape_bad.npy"
    if kind == "pickled":
        np.save(path, np.array([{"x": 1}, None], dtype=object), allow_pickle=True)
    elif kind == "shape":
        np.save(path, np.zeros((50, 4), dtype=np.float32))
    elif kind == "dtype":
        np.save(path, np.zeros((50, 3), dtype=np.int64))
    elif kind == "truncated":
        np.save(path, np.zeros((50, 3), dtype=np.float32))
        path.write_bytes(path.read_bytes()[:-40])
    else:
        path.write_bytes(b"x,y,z\n1,2,3\n")
    return path


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("pickled", "allow_pickle=False"),
        ("shape", r"shape \[K, 3\].*\(50, 4\)"),
        ("dtype", "float coordinates"),
        ("truncated", "truncated"),
        ("text", "not a .npy file"),
    ],
)
def test_check_pc15k_names_the_malformed_file(tmp_path, kind, message):
    folder, _ = _write_fake_pc15k(tmp_path, split="train")
    _write_fake_pc15k(tmp_path, split="test")
    _bad_file(folder, kind)
    with pytest.raises(ValueError, match=message) as err:
        check_pc15k(tmp_path)
    assert "shape_bad.npy" in str(err.value)
    with pytest.raises(ValueError, match="shape_bad.npy"):  # the reader refuses it the same way
        read_pc15k(tmp_path, "chair", "train", 8, seed=0)


def test_check_pc15k_names_the_missing_part_of_the_layout(tmp_path):
    with pytest.raises(ValueError, match="no <synset_id>/ folders"):
        check_pc15k(tmp_path)
    _write_fake_pc15k(tmp_path, split="train")
    with pytest.raises(ValueError, match=r"03001627/test: missing"):
        check_pc15k(tmp_path)
    (tmp_path / "03001627" / "test").mkdir()
    with pytest.raises(ValueError, match="without .npy files"):
        check_pc15k(tmp_path)
    nan_folder, _ = _write_fake_pc15k(tmp_path / "other", split="test")
    np.save(nan_folder / "a_first.npy", np.full((20, 3), np.nan, dtype=np.float32))
    _write_fake_pc15k(tmp_path / "other", split="train")
    with pytest.raises(ValueError, match="a_first.npy: point 0 holds NaN or infinite values"):
        check_pc15k(tmp_path / "other")


def test_shape_classes_label_blocks_and_rotate_rigidly():
    from components.data.shapes import random_rotations, shape_classes

    rng = np.random.default_rng(0)
    for kind in ("z", "so3"):
        rot = random_rotations(5, kind, rng)
        assert np.allclose(rot @ rot.transpose(0, 2, 1), np.eye(3), atol=1e-9)
        assert np.allclose(np.linalg.det(rot), 1.0)
    assert np.allclose(random_rotations(2, "z", rng)[:, 2], [0, 0, 1])  # the vertical axis stays put
    plain, labels = shape_classes(["torus", "chair"], 3, 32, seed=1, rotation="none")
    turned, same = shape_classes(["torus", "chair"], 3, 32, seed=1, rotation="so3")
    assert labels.tolist() == [0, 0, 0, 1, 1, 1] and torch.equal(labels, same)
    # a rotation keeps every pairwise distance of a cloud
    exact = "donot_use_mm_for_euclid_dist"
    assert torch.allclose(
        torch.cdist(plain, plain, compute_mode=exact), torch.cdist(turned, turned, compute_mode=exact), atol=1e-4
    )
    assert not torch.allclose(plain, turned, atol=1e-2)
    with pytest.raises(ValueError, match="unknown rotation"):
        random_rotations(1, "xyz", rng)


def test_non_finite_or_huge_coordinates_are_refused_by_the_reader_of_every_file(tmp_path):
    folder, _ = _write_fake_pc15k(tmp_path, split="train")
    _write_fake_pc15k(tmp_path, split="test")
    cloud = np.zeros((50, 3), dtype=np.float32)
    cloud[7, 1] = np.nan
    np.save(folder / "zz_last.npy", cloud)  # not the first file: the check before work loads that one
    check_pc15k(tmp_path)
    with pytest.raises(ValueError, match=r"zz_last\.npy: point 7 holds NaN or infinite values"):
        read_pc15k(tmp_path, "chair", "train", 8, seed=0)
