"""One contract for every data file: a generated corpus of hostile files, given to every data-path parameter of
every pipeline, is refused before any work with exit 2 and one line naming the parameter, without a traceback,
without writing anything, and with the reader's own message (never the safety net's "the reader failed
unexpectedly", which would mean a reader let a decoder's error escape).

The corpus: empty and truncated files, JSON nested 100,000 deep (as a document, inside a row, inside a field),
integers of 400 and 5,000 digits, 1e400, NaN and Infinity, Latin-1 and UTF-16 text, binary noise, a corrupt gzip
stream, a gzip or IDX header announcing terabytes, zip archives with a bad CRC, cut in half, empty, or whose
``.npy`` member announces 2**40 rows, ``.npy`` files announcing 2**40 rows or holding NaN, CSVs of NaN, inf and
1e308, a fake Parquet file, symlinks to ``/etc/passwd``, to ``/dev/zero`` and to themselves, a directory in place
of a file and a file in place of a folder. A file parameter gets each under every suffix its pipeline reads; a
folder parameter gets each in every file of its documented layout (``DataFile.layout``).
"""

from __future__ import annotations

import gzip
import io
import os
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from paperflows import registry
from paperflows.params import (
    UNEXPECTED_READ_ERROR,
    DataFile,
    ParamsError,
    check_data_files,
    data_file_fields,
    parse_override,
)

# the suffixes each file parameter's reader accepts (a new file parameter must be listed: see the first test)
SUFFIXES: dict[tuple[str, str], tuple[str, ...]] = {
    ("activity_cliff", "data.csv_path"): (".csv",),
    ("bc_pmi", "data.path"): (".parquet", ".hdf5"),
    ("bc_pmi", "data.demos_path"): (".jsonl", ".npz"),
    ("decapbench", "data.oracle_path"): (".jsonl",),
    ("decapbench", "data.candidates_path"): (".jsonl",),
    ("flat", "data.tofu_path"): (".json", ".jsonl"),
    ("flat", "data.tofu_retain_path"): (".json", ".jsonl"),
    ("mm_ego", "data.narrations_path"): (".json",),
    ("mothernet", "data.csv_path"): (".csv",),
    ("nutribench", "data.path"): (".csv", ".json", ".jsonl", ".parquet"),
    ("oc_flow", "data.qm9_path"): (".csv",),
    ("star", "data.path"): (".npz",),
    ("preferdiff", "data.inter_path"): (".inter",),
    ("tvm", "data.solutions_path"): (".jsonl",),
}

# what a parameter needs beside it to pass the params model's own rules: its partner file (valid), or a setting
COMPANIONS: dict[tuple[str, str], list[str]] = {
    ("tvm", "data.solutions_path"): ["verifier.kinds=[orm,tvm]"],
    ("bc_pmi", "data.path"): ["data.env=reacher", "train.methods=[bc,bc_pmi,bc_zone]"],
    ("decapbench", "data.oracle_path"): ["data.candidates_path=valid/candidates.jsonl"],
    ("decapbench", "data.candidates_path"): ["data.oracle_path=valid/oracle.jsonl"],
    ("decapbench", "data.images_dir"): [
        "data.oracle_path=valid/oracle.jsonl",
        "data.candidates_path=valid/candidates.jsonl",
    ],
    ("flat", "data.tofu_path"): ["data.tofu_retain_path=valid/retain.json"],
    ("flat", "data.tofu_retain_path"): ["data.tofu_path=valid/forget.json"],
}


def _npy_header(shape: tuple[int, ...], descr: str = "<f4") -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": descr, "fortran_order": False, "shape": shape})
    return out.getvalue()


def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def _zip(members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def _bad_crc() -> bytes:
    data = bytearray(
        _zip(
            {
                name: _npy(np.arange(64, dtype=np.int64) % 3)
                for name in ("x_train", "y_train", "x_test", "y_test", "state", "action", "style", "episode")
            }
        )
    )
    first = data.index(b"\x93NUMPY")
    data[first + 140] ^= 0xFF  # a byte of the first member's data: its CRC no longer matches
    return bytes(data)


def _corrupt_deflate() -> bytes:
    data = bytearray(_zip({"x_train.npy": _npy(np.arange(4096))}, zipfile.ZIP_DEFLATED))
    data[60:70] = b"\xff" * 10
    return bytes(data)


def _idx_huge() -> bytes:
    return gzip.compress(bytes([0, 0, 0x08, 3]) + struct.pack(">3I", 2**31, 28, 28) + b"\0" * 64)


_HUGE_MEMBER = _npy_header((2**40, 28, 28), "|u1") + b"\0" * 64
HOSTILE: dict[str, bytes | Callable[[Path], None]] = {
    "empty": b"",
    "truncated JSON": b'{"question": "a", "answer": [1, 2',
    "deep JSON document": b"[" * 100_000 + b"]" * 100_000,
    "deep JSON row": b'{"question": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
    "deep JSON field": b'{"question": "q", "solution": "s", "answer": '
    + b'{"a": ' * 50_000
    + b"1"
    + b"}" * 50_000
    + b', "correct": true}\n',
    "400-digit integer": b'{"question": "q", "answer": 1' + b"0" * 400 + b', "episode": 1' + b"0" * 400 + b"}\n",
    "5000-digit integer": b'[{"question": "q", "answer": 1' + b"0" * 5000 + b"}]\n",
    "1e400": b'{"question": "q", "answer": 1e400, "carb": 1e400, "timestamp_sec": 1e400}\n',
    "NaN and Infinity": b'{"question": NaN, "answer": Infinity, "carb": NaN, "state": [NaN, 1]}\n',
    "Latin-1 text": "meal_description,carb,target\ncaf\xe9,4\xbd,x\n".encode("latin-1"),
    "UTF-16 text": '{"question": "q", "answer": "a"}\n'.encode("utf-16"),
    "binary noise": bytes(range(256)) * 16,
    "corrupt gzip": b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\xff\xfe\xfd" * 40,
    "gzip IDX header of 1.5 TiB": _idx_huge(),
    "zip with a bad CRC": _bad_crc(),
    "zip with corrupt deflate data": _corrupt_deflate(),
    "zip cut in half": _zip({"x_train.npy": _npy(np.arange(500))})[:300],
    "empty zip": _zip({}),
    "npz member of 2**40 rows": _zip(
        {
            f"{n}.npy": _HUGE_MEMBER
            for n in ("x_train", "y_train", "x_test", "y_test", "state", "action", "style", "episode")
        }
    ),
    "npy of 2**40 rows": _npy_header((2**40, 12, 1000)) + b"\0" * 256,
    "npy shape overflowing int64": _npy_header((2**40, 2**40, 2**40)) + b"\0" * 256,
    "npy holding NaN": _npy(np.full((4, 3), np.nan, np.float32)),
    "CSV of NaN, inf and 1e308": b"meal_description,carb,target,a,SMILES,y,exp_mean [nM]\n"
    b"nan,inf,x,1e308,C,-inf,nan\n1e400,-1e308,y,nan,CC,1e400,inf\n",
    "fake Parquet": b"PAR1" + b"\x00\x01\x02" * 50 + b"PAR1",
    "symlink to /etc/passwd": lambda path: path.symlink_to("/etc/passwd"),
    "symlink to /dev/zero": lambda path: path.symlink_to("/dev/zero"),
    "symlink to itself": lambda path: path.symlink_to(path.name),
    "directory": lambda path: path.mkdir(),
}


def place(path: Path, hostile: bytes | Callable[[Path], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if callable(hostile):
        hostile(path)
    else:
        path.write_bytes(hostile)


def path_parameters() -> list[tuple[str, str, DataFile]]:
    return [
        (slug, dotted, spec)
        for slug in registry.slugs()
        for dotted, spec in data_file_fields(registry.params_model(slug))
    ]


def test_every_file_parameter_lists_the_suffixes_its_reader_takes() -> None:
    files = {(slug, key) for slug, key, spec in path_parameters() if not spec.folder}
    assert files == set(SUFFIXES), "add the new file parameter to SUFFIXES (and COMPANIONS if it needs a partner)"


def _nested(sets: list[str]) -> dict:
    """``--set`` texts as the nested mapping a params model validates."""
    tree: dict = {}
    for text in sets:
        key, value = parse_override(text)
        *parents, leaf = key.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def _checked(slug: str, key: str, target: str, root: Path, what: str) -> None:
    """The up-front check of ``slug`` with ``key=target``: refused as the CLI refuses (a ParamsError, hence exit 2)
    naming the parameter, with the reader's own message; anything else escaping is a failure with its traceback."""
    params = registry.params_model(slug).model_validate(_nested([f"{key}={target}", *COMPANIONS.get((slug, key), [])]))
    with pytest.raises(ParamsError) as refusal:
        check_data_files(params, root, slug)
    message = str(refusal.value)
    assert message.startswith(f"{slug}.{key}: "), (what, message)
    assert UNEXPECTED_READ_ERROR not in message, (what, message)
    assert "\n" not in message, (what, message)


def _refused(refused, slug: str, key: str, target: str, what: str) -> None:
    """The same through the CLI in this process: exit 2, one line, no traceback, nothing started or written."""
    sets = [a for s in [f"{key}={target}", *COMPANIONS.get((slug, key), [])] for a in ("--set", s)]
    outcome = refused(["run", slug, *sets])
    where = f"{slug}.{key} <- {what} ({target})"
    assert outcome.code == 2, (where, outcome.output)
    assert outcome.output.startswith(f"paperflows: error: {slug}.{key}: "), (where, outcome.output)
    assert UNEXPECTED_READ_ERROR not in outcome.output, (where, outcome.output)
    assert not outcome.traceback and outcome.reached == [] and outcome.changed == [], (where, outcome)
    assert len(outcome.output.strip().splitlines()) == 1, (where, outcome.output)


# the kinds also run through the whole CLI (the rest are checked where the CLI's exit 2 comes from: the check)
THROUGH_THE_CLI = ("deep JSON row", "zip with a bad CRC", "symlink to /dev/zero")
FILE_PARAMETERS = [p for p in path_parameters() if not p[2].folder]
FOLDER_PARAMETERS = [p for p in path_parameters() if p[2].folder]


@pytest.mark.parametrize(("slug", "key", "spec"), FILE_PARAMETERS, ids=lambda v: v if isinstance(v, str) else "")
def test_every_hostile_file_is_refused_with_exit_2(
    slug: str, key: str, spec: DataFile, cli_project: Path, valid_files: Path, refused
) -> None:
    for n, (what, hostile) in enumerate(HOSTILE.items()):
        for suffix in SUFFIXES[(slug, key)]:
            name = f"hostile/{n}{suffix}"
            place(cli_project / name, hostile)
            _checked(slug, key, name, cli_project, what)
            if what in THROUGH_THE_CLI:
                _refused(refused, slug, key, name, what)


@pytest.mark.parametrize(("slug", "key", "spec"), FOLDER_PARAMETERS, ids=lambda v: v if isinstance(v, str) else "")
def test_every_folder_of_hostile_files_is_refused_with_exit_2(
    slug: str, key: str, spec: DataFile, cli_project: Path, valid_files: Path, refused
) -> None:
    for n, (what, hostile) in enumerate(HOSTILE.items()):
        folder = cli_project / "hostile" / str(n)
        for rel in spec.layout:
            place(folder / rel, hostile)
        _checked(slug, key, f"hostile/{n}", cli_project, f"every layout file: {what}")
        if what in THROUGH_THE_CLI:
            _refused(refused, slug, key, f"hostile/{n}", f"every layout file: {what}")
    (cli_project / "a_file").write_bytes(b"x")
    _refused(refused, slug, key, "a_file", "a file in place of the folder")
    (cli_project / "empty_folder").mkdir()
    _checked(slug, key, "empty_folder", cli_project, "an empty folder")
    os.symlink("/dev/zero", cli_project / "zero_folder")
    _refused(refused, slug, key, "zero_folder", "a symlink to /dev/zero in place of the folder")


# --------------------------------------------------------------------------------------------------
# the contract itself, on a toy pipeline: any failure of a check is a refusal; rules over files and params
# --------------------------------------------------------------------------------------------------
def _toy(check: Callable[[Path], object], rule: Callable[[dict], list[str]] | None = None):
    from typing import Annotated

    from pydantic import Field

    from paperflows.params import PipelineParams, Section

    class Source(Section):
        path: Annotated[str | None, DataFile(check, description="toy file")] = Field(None, description="a file")
        rows: int = Field(3, ge=1, le=100, description="rows wanted")

    class Toy(PipelineParams):
        data: Source = Field(default_factory=Source, description="data")

        def data_problems(self, files):
            return rule(self, files) if rule else []

    return Toy, Source


@pytest.mark.parametrize(
    "error",
    [
        RecursionError("maximum recursion depth exceeded"),
        MemoryError(),
        OverflowError("int too large"),
        EOFError("No data left"),
        TypeError("odd"),
    ],
)
def test_any_failure_of_a_check_is_a_refusal_naming_the_key_and_marked_unexpected(
    error: Exception, tmp_path: Path
) -> None:
    def crashes(path: Path) -> None:
        raise error

    toy, source = _toy(crashes)
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(
        ParamsError,
        match=rf"^toy\.data\.path: .*f\.txt is not a valid toy file: "
        rf"{UNEXPECTED_READ_ERROR} \({type(error).__name__}",
    ):
        check_data_files(toy(data=source(path="f.txt")), tmp_path, "toy")


def test_rules_over_files_and_params_see_every_checked_key_and_are_refusals(tmp_path: Path) -> None:
    seen: list[dict] = []

    def rule(params, files):
        seen.append(files)
        checked = files.get("data.path")
        if checked is None or checked.path is None:
            return []
        return (
            [f"data.rows: {params.data.rows} rows wanted, the file holds {checked.summary}"]
            if params.data.rows > checked.summary
            else []
        )

    toy, source = _toy(lambda path: len(path.read_text().splitlines()), rule)
    (tmp_path / "two.txt").write_text("a\nb\n")
    with pytest.raises(ParamsError, match=r"^toy\.data\.rows: 3 rows wanted, the file holds 2$"):
        check_data_files(toy(data=source(path="two.txt")), tmp_path, "toy")
    files = check_data_files(toy(data=source(path="two.txt", rows=2)), tmp_path, "toy")
    assert files["data.path"].summary == 2 and files["data.path"].path == tmp_path / "two.txt"
    assert check_data_files(toy(), tmp_path, "toy")["data.path"].path is None  # no file: the offline data
    assert check_data_files(toy(data=source(path="two.txt", rows=9)), tmp_path, "toy", groups=("seeds",)) == {}

    def broken(params, files):
        raise KeyError("summary")

    toy, source = _toy(lambda path: 1, broken)
    with pytest.raises(ParamsError, match=r"^toy: the data files cannot be checked against the parameters"):
        check_data_files(toy(), tmp_path, "toy")
