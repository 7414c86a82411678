"""``.npy`` and ``.npz`` files read safely: the header alone (shape, dtype) before anything is loaded, within
the machine's memory, and never a pickle.

:func:`npy_header` opens a file, checks the NumPy magic string and header, refuses object arrays (the only
kind ``np.load`` would unpickle), truncated files and arrays larger than the machine's memory, and returns
``(shape, dtype)`` without reading the data. Data readers check every file's header this way before any work,
then load with ``np.load(path, allow_pickle=False)``.

:func:`read_npz` does the same for the members of an ``.npz`` archive before loading them, and turns every way
an archive can be damaged (not a zip, a bad CRC, a truncated or corrupt member, an encrypted one) into a
``ValueError`` naming the array. numpy only (parameter checks import this module).
"""

from __future__ import annotations

import math
import os
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import numpy as np

__all__ = [
    "MAX_ABS_VALUE",
    "NPY_MAGIC",
    "array_bytes_limit",
    "describe_bytes",
    "first_unusable_row",
    "npy_header",
    "read_npz",
]

NPY_MAGIC = b"\x93NUMPY"
#: the largest magnitude a value of a user's numeric data may have where the pipelines compute on it in float32
#: (float32 ends at 3.4e38; products and sums of squares of values near that overflow to inf, then NaN)
MAX_ABS_VALUE = 1e30
_FALLBACK_MEMORY = 8 * 2**30
# what reading a damaged archive member can raise: zipfile's own errors, zlib's, a short read, an encrypted or
# unsupported member (RuntimeError, NotImplementedError), numpy's parse of the bytes
_ARCHIVE_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    OSError,
    ValueError,
    RuntimeError,
    NotImplementedError,
    KeyError,
    SyntaxError,
)


def array_bytes_limit() -> int:
    """The most bytes one array read from a user's file may hold: the machine's physical memory (an array larger
    than that cannot be loaded, and a header announcing one is refused before any allocation)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return _FALLBACK_MEMORY


def describe_bytes(n: int) -> str:
    """``n`` bytes in the largest binary unit that keeps the number >= 1 (``784 TiB``)."""
    units = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    size, unit = float(n), 0
    while size >= 1024 and unit < len(units) - 1:
        size, unit = size / 1024, unit + 1
    return f"{int(size)} bytes" if unit == 0 else f"{size:.3g} {units[unit]}"


def _header(handle: IO[bytes], where: str) -> tuple[tuple[int, ...], np.dtype, int]:
    """``(shape, dtype, data bytes)`` from the header at the start of ``handle``; ValueError names ``where``."""
    try:
        version = np.lib.format.read_magic(handle)
    except (ValueError, EOFError):
        raise ValueError(f"{where}: not a .npy file (no NumPy magic string)") from None
    reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    try:
        shape, _, dtype = reader(handle)
    except (ValueError, SyntaxError, EOFError, TypeError, MemoryError):
        raise ValueError(f"{where}: unreadable .npy header (format version {version})") from None
    if dtype.hasobject:
        raise ValueError(
            f"{where}: holds Python objects (dtype {dtype}), so it cannot be loaded with allow_pickle=False"
        )
    nbytes = math.prod(int(d) for d in shape) * dtype.itemsize  # Python ints: no overflow for huge shapes
    limit = array_bytes_limit()
    if nbytes > limit:
        raise ValueError(
            f"{where}: the header announces shape {list(shape)} ({describe_bytes(nbytes)}), more than "
            f"this machine's {describe_bytes(limit)} of memory"
        )
    return tuple(int(d) for d in shape), dtype, nbytes


def npy_header(path: str | Path) -> tuple[tuple[int, ...], np.dtype]:
    """``(shape, dtype)`` of a ``.npy`` file from its header, after checking that ``np.load(path,
    allow_pickle=False)`` can read it in full.

    Raises ``ValueError`` naming the file and the offending field: no magic string, unreadable header,
    object dtype, an array larger than the machine's memory, or fewer bytes than the header announces.
    """
    path = Path(path)
    with open(path, "rb") as handle:
        shape, dtype, nbytes = _header(handle, str(path))
        offset = handle.tell()
    expected = offset + nbytes
    if path.stat().st_size < expected:
        raise ValueError(f"{path}: truncated ({path.stat().st_size} bytes, the header needs {expected})")
    return shape, dtype


def first_unusable_row(values: np.ndarray, chunk: int = 4096) -> tuple[int, str] | None:
    """``(row, what)`` of the first row of ``values`` (rows along axis 0, read ``chunk`` rows at a time, so a
    memory-mapped array is never loaded whole) holding NaN, an infinity or a magnitude above
    :data:`MAX_ABS_VALUE`; None when every row is usable."""
    for start in range(0, len(values), chunk):
        block = np.asarray(values[start : start + chunk], dtype=np.float64).reshape(min(chunk, len(values) - start), -1)
        with np.errstate(invalid="ignore"):
            finite = np.isfinite(block).all(axis=1)
            small = (np.abs(block) <= MAX_ABS_VALUE).all(axis=1)
        if not small.all():  # NaN fails this test too: the first failing row, whichever the reason
            row = int(np.argmin(small))
            what = (
                "NaN or infinite values"
                if not finite[row]
                else f"a value above {MAX_ABS_VALUE:.0e} in magnitude (it is computed on in float32)"
            )
            return start + row, what
    return None


def _kind(err: BaseException) -> str:
    """The exception's name, with its module where the name alone says nothing (``zlib.error``)."""
    name = type(err).__name__
    return f"{type(err).__module__}.{name}" if name == "error" else name


def _sniff(path: Path) -> str | None:
    """Why ``path`` is not a zip archive at all, from its first bytes (None: it starts like one)."""
    with open(path, "rb") as handle:
        head = handle.read(8)
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return None
    if not head:
        return "the file is empty"
    if head.startswith(NPY_MAGIC):
        return "it holds a single .npy array"
    if head[:1] == b"\x80":
        return "it holds a Python pickle, which is never loaded"
    return "no zip signature"


def read_npz(path: str | os.PathLike[str], names: Sequence[str], noun: str = "array") -> dict[str, np.ndarray]:
    """The arrays ``names`` of an ``.npz`` archive (as ``numpy.savez`` writes it), each loaded only after its
    header was read from the archive and checked: no Python objects, no more data announced than the member
    holds, no array larger than the machine's memory (:func:`array_bytes_limit`).

    Raises ``ValueError``: "not a numpy .npz archive (<why>)", "array 'x' is missing (the archive holds 3)",
    "array 'x': holds Python objects ...", "array 'x': cannot be read (BadZipFile); the archive is damaged";
    messages never quote the file's contents. ``noun`` is what the format calls an array ("field": "field 'x' is
    missing ...").
    """
    path = Path(path)
    why = _sniff(path)
    if why is not None:
        raise ValueError(f"not a numpy .npz archive ({why})")
    try:
        archive = zipfile.ZipFile(path)
    except _ARCHIVE_ERRORS as err:
        raise ValueError(f"not a numpy .npz archive ({_kind(err)})") from None
    out: dict[str, np.ndarray] = {}
    with archive:
        members = {n.removesuffix(".npy"): n for n in archive.namelist()}
        for name in names:
            where = f"{noun} '{name}'"
            if name not in members:
                raise ValueError(f"{where} is missing (the archive holds {len(members)})")
            info = archive.getinfo(members[name])
            try:
                with archive.open(info) as handle:
                    _, _, nbytes = _header(handle, where)
                    declared = info.file_size - handle.tell()
                if declared < nbytes:
                    raise ValueError(
                        f"{where}: truncated (the member holds {declared} bytes of data, its header announces {nbytes})"
                    )
                with archive.open(info) as handle:
                    array = np.lib.format.read_array(handle, allow_pickle=False)
                    handle.read()  # to the member's end, where zipfile checks its CRC
            except ValueError as err:
                if str(err).startswith(where):
                    raise
                raise ValueError(f"{where}: cannot be read ({_kind(err)}); the archive is damaged") from None
            except _ARCHIVE_ERRORS as err:
                raise ValueError(f"{where}: cannot be read ({_kind(err)}); the archive is damaged") from None
            out[name] = array
    return out
