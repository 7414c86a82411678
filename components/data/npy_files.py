"""``.npy`` files read safely: the header alone (shape, dtype) before anything is loaded, and never a pickle.

:func:`npy_header` opens a file, checks the NumPy magic string and header, refuses object arrays (the only
kind ``np.load`` would unpickle) and truncated files, and returns ``(shape, dtype)`` without reading the
data. Data readers check every file's header this way before any work, then load with
``np.load(path, allow_pickle=False)``. numpy only (parameter checks import this module).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def npy_header(path: str | Path) -> tuple[tuple[int, ...], np.dtype]:
    """``(shape, dtype)`` of a ``.npy`` file from its header, after checking that ``np.load(path,
    allow_pickle=False)`` can read it in full.

    Raises ``ValueError`` naming the file and the offending field: no magic string, unreadable header,
    object dtype, or fewer bytes than the header announces.
    """
    path = Path(path)
    with open(path, "rb") as handle:
        try:
            version = np.lib.format.read_magic(handle)
        except ValueError:
            raise ValueError(f"{path}: not a .npy file (no NumPy magic string)") from None
        reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        try:
            shape, _, dtype = reader(handle)
        except (ValueError, SyntaxError):
            raise ValueError(f"{path}: unreadable .npy header (format version {version})") from None
        offset = handle.tell()
    if dtype.hasobject:
        raise ValueError(f"{path}: holds Python objects (dtype {dtype}), so it cannot be loaded with "
                         "allow_pickle=False")
    expected = offset + int(np.prod(shape)) * dtype.itemsize
    if path.stat().st_size < expected:
        raise ValueError(f"{path}: truncated ({path.stat().st_size} bytes, the header needs {expected})")
    return tuple(shape), dtype
