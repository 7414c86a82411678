"""``.npy`` headers and ``.npz`` archives read within limits: a header announcing more than memory, a damaged
archive in any of its ways, and a pickle are refused with a ValueError naming the array, before any allocation."""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from components.data.npy_files import MAX_ABS_VALUE, first_unusable_row, npy_header, read_npz


def _header(shape: tuple[int, ...], descr: str = "<f4") -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": descr, "fortran_order": False, "shape": shape})
    return out.getvalue()


def _archive(path: Path, members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> Path:
    with zipfile.ZipFile(path, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def test_a_valid_archive_is_read(tmp_path: Path) -> None:
    np.savez(tmp_path / "a.npz", x=np.arange(6).reshape(2, 3), y=np.array([1.5]))
    arrays = read_npz(tmp_path / "a.npz", ["x", "y"])
    assert arrays["x"].tolist() == [[0, 1, 2], [3, 4, 5]] and arrays["y"].tolist() == [1.5]
    np.savez_compressed(tmp_path / "c.npz", x=np.arange(1000))
    assert read_npz(tmp_path / "c.npz", ["x"])["x"].sum() == 499500


def test_damaged_archives_name_the_array(tmp_path: Path) -> None:
    np.savez(tmp_path / "ok.npz", x=np.arange(200), y=np.arange(3))
    raw = (tmp_path / "ok.npz").read_bytes()
    bad_crc = bytearray(raw)
    bad_crc[raw.index(b"\x93NUMPY") + 300] ^= 0xFF
    (tmp_path / "crc.npz").write_bytes(bytes(bad_crc))
    with pytest.raises(ValueError, match=r"^array 'x': cannot be read \(BadZipFile\); the archive is damaged$"):
        read_npz(tmp_path / "crc.npz", ["x"])
    np.savez_compressed(tmp_path / "deflate.npz", x=np.arange(4096))
    corrupt = bytearray((tmp_path / "deflate.npz").read_bytes())
    corrupt[60:70] = b"\xff" * 10
    (tmp_path / "corrupt.npz").write_bytes(bytes(corrupt))
    with pytest.raises(ValueError, match=r"array 'x': cannot be read \(zlib\.error\)"):
        read_npz(tmp_path / "corrupt.npz", ["x"])
    (tmp_path / "half.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match=r"not a numpy \.npz archive \(BadZipFile\)"):
        read_npz(tmp_path / "half.npz", ["x"])
    with pytest.raises(ValueError, match=r"array 'z' is missing \(the archive holds 2\)"):
        read_npz(tmp_path / "ok.npz", ["x", "z"])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", r"not a numpy \.npz archive \(the file is empty\)"),
        (_npy(np.arange(3)), r"it holds a single \.npy array"),
        (pickle.dumps({"a": 1}), r"it holds a Python pickle, which is never loaded"),
        (b"PAR1 not a zip", r"no zip signature"),
    ],
)
def test_what_is_not_an_archive_is_named(tmp_path: Path, content: bytes, message: str) -> None:
    (tmp_path / "f.npz").write_bytes(content)
    with pytest.raises(ValueError, match=message):
        read_npz(tmp_path / "f.npz", ["x"])


def test_headers_are_checked_before_any_allocation(tmp_path: Path) -> None:
    _archive(tmp_path / "huge.npz", {"x.npy": _header((2**40, 28, 28), "|u1") + b"\0" * 64})
    with pytest.raises(
        ValueError,
        match=r"array 'x': the header announces shape \[1099511627776, 28, 28\] "
        r"\(784 TiB\), more than this machine's",
    ):
        read_npz(tmp_path / "huge.npz", ["x"])
    _archive(tmp_path / "short.npz", {"x.npy": _header((100,), "<f8") + b"\0" * 16})
    with pytest.raises(
        ValueError,
        match=r"array 'x': truncated \(the member holds 16 bytes of data, its header "
        r"announces 800\)",
    ):
        read_npz(tmp_path / "short.npz", ["x"])
    np.savez(tmp_path / "objects.npz", x=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match=r"array 'x': holds Python objects"):
        read_npz(tmp_path / "objects.npz", ["x"])


def test_npy_header_computes_sizes_without_overflow(tmp_path: Path) -> None:
    """A shape whose product overflows int64 once wrapped to a small number: the size is computed exactly."""
    (tmp_path / "wrap.npy").write_bytes(_header((2**32, 2**32, 2**32)) + b"\0" * 64)
    with pytest.raises(ValueError, match=r"wrap\.npy: the header announces shape .* more than this machine's"):
        npy_header(tmp_path / "wrap.npy")


def test_first_unusable_row_finds_non_finite_and_huge_values() -> None:
    values = np.zeros((10, 3))
    assert first_unusable_row(values) is None
    values[7, 1] = MAX_ABS_VALUE * 10
    values[8, 0] = np.nan
    assert first_unusable_row(values, chunk=3) == (7, "a value above 1e+30 in magnitude (it is computed on in float32)")
    values[2, 2] = -np.inf
    assert first_unusable_row(values, chunk=3) == (2, "NaN or infinite values")
