"""Atomic artifact writes: a failed write leaves the old file and no temporary behind."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from components.io import (
    JsonLimitError,
    atomic_path,
    json_lines_of,
    json_nests_deeper,
    json_text,
    load_json,
    load_jsonl,
    load_table,
    load_tensors,
    parse_json,
    quote_value,
    read_json_lines,
    save_json,
    save_jsonl,
    save_table,
    save_tensors,
)


def test_failed_write_keeps_the_previous_file(tmp_path: Path) -> None:
    target = tmp_path / "m.json"
    save_json({"a": 1}, target)
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("{half")
            raise RuntimeError("killed mid-write")
    assert load_json(target) == {"a": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_round_trips_and_json_conversion(tmp_path: Path) -> None:
    save_json({"x": np.float32(1.5), "t": torch.tensor([1, 2]), "nan": float("nan")}, tmp_path / "a.json")
    assert load_json(tmp_path / "a.json") == {"x": 1.5, "t": [1, 2], "nan": None}
    tensors = {"w": torch.arange(6.0).reshape(2, 3)}
    save_tensors(tensors, tmp_path / "w.safetensors")
    assert torch.equal(load_tensors(tmp_path / "w.safetensors")["w"], tensors["w"])
    save_table([{"m": "a", "v": 1.0}, {"m": "b", "v": 2.0}], tmp_path / "t.parquet")
    assert load_table(tmp_path / "t.parquet")[1] == {"m": "b", "v": 2.0}
    assert (tmp_path / "t.parquet").stat().st_mode & 0o044  # readable by others, like a normal file


def test_json_lines_round_trip(tmp_path: Path) -> None:
    rows = [
        {"caption": 'Ünïcode, quotes " and\nnewlines', "score": np.float64(0.5), "seed": None},
        {"caption": "", "score": float("nan"), "seed": 2},
    ]
    save_jsonl(rows, tmp_path / "c.jsonl")
    assert len((tmp_path / "c.jsonl").read_text(encoding="utf-8").splitlines()) == 2
    assert load_jsonl(tmp_path / "c.jsonl") == [
        {"caption": rows[0]["caption"], "score": 0.5, "seed": None},
        {"caption": "", "score": None, "seed": 2},
    ]
    (tmp_path / "bad.jsonl").write_text('{"a": 1}\n\n{oops\n')
    with pytest.raises(ValueError, match="line 3 is not valid JSON"):
        load_jsonl(tmp_path / "bad.jsonl")
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        load_jsonl(tmp_path / "nope.jsonl")


def test_missing_and_malformed_files_name_the_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.safetensors"):
        load_tensors(tmp_path / "nope.safetensors")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json"):
        load_json(bad)


def test_a_data_value_is_quoted_only_when_it_is_a_number_or_looks_like_one() -> None:
    assert [quote_value(v) for v in (-3, 2.5, True, None, "nan", "45,5", "-1e3", " ")] == [
        "-3",
        "2.5",
        "True",
        "None",
        "'nan'",
        "'45,5'",
        "'-1e3'",
        "' '",
    ]
    assert quote_value("db_password=hunter2") == "a text of 19 characters"
    assert quote_value("9" * 40) == "a text of 40 characters"  # long numbers are cut to nothing, not quoted
    assert quote_value({"a": 1}) == "a dict"


def test_safetensors_bytes_do_not_depend_on_the_process(tmp_path: Path) -> None:
    """safetensors orders several metadata keys at random per process: the file must not (DVC hashes it)."""
    import subprocess
    import sys

    code = (
        "import sys, torch; from components.io import save_tensors; "
        "save_tensors({'b': torch.arange(3.0), 'a': torch.ones(2, 2, dtype=torch.float16)}, sys.argv[1], "
        "{'model.class': 'x:Y', 'model.config': '{}', 'seed': '1', 'method': 'm'})"
    )
    blobs = set()
    for i in range(6):
        target = tmp_path / f"{i}.safetensors"
        subprocess.run([sys.executable, "-c", code, str(target)], check=True, timeout=120)
        blobs.add(target.read_bytes())
    assert len(blobs) == 1
    from safetensors import safe_open

    with safe_open(str(tmp_path / "0.safetensors"), "pt") as handle:
        assert handle.metadata() == {"model.class": "x:Y", "model.config": "{}", "seed": "1", "method": "m"}
        assert torch.equal(handle.get_tensor("b"), torch.arange(3.0))
    assert int.from_bytes(blobs.pop()[:8], "little") % 8 == 0  # the header stays 8-byte aligned


class _RowError(ValueError):
    pass


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"a": "x"}\n\n[1, 2]\n', r"^line 3 holds a JSON list, expected an object$"),
        (b'{"a": "x"}\n{not json\n', r"^line 2 is not a JSON object \(column 2: "),
        (b'{"a": "x"}\n{"a": "caf\xe9"}\n', r"^line 2 is not UTF-8 text \(byte offset 21\); save the file as UTF-8$"),
    ],
)
def test_read_json_lines_names_the_line(tmp_path: Path, raw: bytes, message: str) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(raw)
    with pytest.raises(_RowError, match=message):
        read_json_lines(path, _RowError)


def test_read_json_lines_numbers_lines_and_accepts_a_bom(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes('\ufeff{"a": "x"}\n\n{"a": ""}\n'.encode())
    rows = read_json_lines(path, _RowError)
    assert rows == [(1, {"a": "x"}), (3, {"a": ""})]
    assert json_text(rows[0][1], "a", 1, _RowError) == "x"
    assert json_text(rows[1][1], "a", 3, _RowError, non_empty=False) == ""
    with pytest.raises(_RowError, match=r"^line 3 field 'a' holds ''; expected a non-empty string$"):
        json_text(rows[1][1], "a", 3, _RowError)
    with pytest.raises(_RowError, match=r"^line 1 has no field 'b' \(fields found: a\)$"):
        json_text(rows[0][1], "b", 1, _RowError)
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_json_lines(tmp_path / "missing.jsonl", _RowError)


def test_json_lines_split_on_newline_only(tmp_path: Path) -> None:
    """U+2028, U+2029 and U+0085 are legal raw inside JSON strings; str.splitlines would cut there."""
    text = '{"q": "a\u2028b\u2029c\x85d"}\r\n\n{"q": "x"}\n'
    path = tmp_path / "rows.jsonl"
    path.write_text(text, encoding="utf-8")
    assert read_json_lines(path, _RowError) == [(1, {"q": "a\u2028b\u2029c\x85d"}), (3, {"q": "x"})]
    assert json_lines_of("a\u2028b\nc") == ["a\u2028b", "c"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000, r"nests arrays or objects more than 64 levels deep"),
        ('{"a": ' * 65 + "1" + "}" * 65, r"more than 64 levels deep"),
        ('{"a": 1' + "0" * 400 + "}", r"an integer of 401 digits, beyond the range of a 64-bit float"),
        ('{"a": 1' + "0" * 5000 + "}", r"an integer of 5001 digits"),
    ],
)
def test_parse_json_refuses_beyond_its_limits_before_decoding(text: str, message: str) -> None:
    with pytest.raises(JsonLimitError, match=message):
        parse_json(text)


def test_parse_json_reads_what_is_within_its_limits() -> None:
    deep = "[" * 64 + "]" * 64
    assert not json_nests_deeper(deep) and json_nests_deeper("[" + deep + "]")
    assert not json_nests_deeper('{"a": "[[[[[[[[", "b": "\\"]]]]\\\\"}', limit=1)  # brackets in strings
    assert parse_json('{"a": -1' + "0" * 300 + ', "b": 1e400, "c": NaN}')["a"] == -(10**300)
    with pytest.raises(json.JSONDecodeError):
        parse_json('{"a": [1, 2')


def test_read_json_lines_names_the_line_beyond_a_limit(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n{"a": ' + "[" * 1000 + "]" * 1000 + "}\n")
    with pytest.raises(_RowError, match=r"^line 2 nests arrays or objects more than 64 levels deep$"):
        read_json_lines(path, _RowError)
