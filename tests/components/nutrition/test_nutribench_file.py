"""Reading the real NutriBench format (CSV / Parquet / JSONL) and rejecting malformed files."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from components.nutrition.nutribench_file import (
    NutribenchFormatError,
    check_nutribench_file,
    read_nutribench_file,
)

GOOD = [{"meal_description": "A cup of rice and a glass of milk.", "carb": 57.3, "fat": 5.1, "energy": 320.0,
         "protein": 11.2, "country": "USA", "serving_type": "natural"},
        {"meal_description": "150 g of pasta.", "carb": 46.5, "fat": 1.3, "energy": 230.0, "protein": 8.7,
         "country": "ITA", "serving_type": "metric"},
        {"meal_description": "Two eggs.", "carb": 1.1, "fat": None, "energy": None, "protein": None,
         "country": "USA", "serving_type": "natural"}]


def _csv(path: Path, header: str, lines: list[str]) -> Path:
    path.write_text("\n".join([header, *lines]) + "\n")
    return path


def test_reads_csv_parquet_and_jsonl(tmp_path: Path) -> None:
    pq.write_table(pa.Table.from_pylist(GOOD), tmp_path / "v2.parquet")
    (tmp_path / "v2.jsonl").write_text("\n".join(json.dumps(r) for r in GOOD) + "\n")
    _csv(tmp_path / "v2.csv", "meal_description,carb,fat,energy,protein,country,serving_type",
         ['"A cup of rice and a glass of milk.",57.3,5.1,320,11.2,USA,natural',
          '150 g of pasta.,46.5,1.3,230,8.7,ITA,metric',
          'Two eggs.,1.1,,,,USA,natural'])
    results = [read_nutribench_file(tmp_path / name, eval_share=0.34, seed=0)
               for name in ("v2.parquet", "v2.jsonl", "v2.csv")]
    for rows in results:
        assert [r["carb"] for r in rows] == [57.3, 46.5, 1.1]
        assert rows[2]["protein"] is None and rows[0]["protein"] == pytest.approx(11.2)
        assert [r["serving_type"] for r in rows] == ["natural", "metric", "natural"]
        assert sum(r["split"] == "eval" for r in rows) == 1
        assert rows[0]["meal_id"] == "row-000001" and rows[0]["items"] == "[]"
    assert [r["split"] for r in results[0]] == [r["split"] for r in results[1]]


def test_optional_columns_may_be_absent(tmp_path: Path) -> None:
    rows = read_nutribench_file(_csv(tmp_path / "min.csv", "meal_description,carb", ["rice,45", "bread,30"]))
    assert rows[0]["serving_type"] == "unspecified" and rows[0]["fat"] is None and rows[1]["country"] == "unspecified"


@pytest.mark.parametrize(("header", "lines", "message"), [
    ("meal_description,fat", ["rice,1.0"], r"missing required column\(s\) \['carb'\]"),
    ("description,carb", ["rice,10"], r"missing required column\(s\) \['meal_description'\]"),
    ("meal_description,carb", ["rice,45", "bread,lots"], r"column 'carb' row 2 holds a text of 4 characters, not a number"),
    ("meal_description,carb", ["rice,-3"], r"column 'carb' row 1 holds '-3'; expected a finite number >= 0"),
    ("meal_description,carb", ["rice,"], r"column 'carb' is empty in row 1"),
    ("meal_description,carb", ["rice,inf"], r"column 'carb' row 1"),
    ("meal_description,carb,fat", ["rice,4,x"], r"column 'fat' row 1 holds a text of 1 characters, not a number"),
    ("meal_description,carb", [",4"], r"column 'meal_description' row 1"),
    ("meal_description,carb,serving_type", ["rice,4,household"], r"column 'serving_type' row 1"),
    ("meal_description,carb", [], r"holds no meals"),
    ("meal_description,carb", ["rice,45"], r"holds 1 meal; at least 2 meals are needed"),
])
def test_malformed_csv(tmp_path: Path, header: str, lines: list[str], message: str) -> None:
    path = _csv(tmp_path / "bad.csv", header, lines)
    with pytest.raises(NutribenchFormatError, match=message) as err:
        read_nutribench_file(path)
    assert str(path) in str(err.value)


def test_empty_and_unsupported_files(tmp_path: Path) -> None:
    for name in ("empty.csv", "empty.jsonl"):
        (tmp_path / name).write_text("")
        with pytest.raises(NutribenchFormatError, match="holds no meals"):
            read_nutribench_file(tmp_path / name)
    (tmp_path / "meals.xlsx").write_text("x")
    with pytest.raises(NutribenchFormatError, match="unsupported file type"):
        read_nutribench_file(tmp_path / "meals.xlsx")
    with pytest.raises(FileNotFoundError, match="no such NutriBench file"):
        read_nutribench_file(tmp_path / "missing.csv")


def test_malformed_jsonl_and_parquet(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text('{"meal_description": "rice", "carb": 4}\n{not json}\n')
    with pytest.raises(NutribenchFormatError, match="line 2 is not valid JSON"):
        read_nutribench_file(tmp_path / "bad.jsonl")
    (tmp_path / "str.jsonl").write_text('{"meal_description": "rice", "carb": "forty"}\n')
    with pytest.raises(NutribenchFormatError, match="column 'carb' row 1 holds a text of 5 characters"):
        read_nutribench_file(tmp_path / "str.jsonl")
    pq.write_table(pa.Table.from_pylist([{"meal_description": "rice", "carb": True}]), tmp_path / "bool.parquet")
    with pytest.raises(NutribenchFormatError, match="not a number"):
        read_nutribench_file(tmp_path / "bool.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(NutribenchFormatError, match="not a readable Parquet file"):
        read_nutribench_file(tmp_path / "junk.parquet")


def test_check_names_the_field_and_never_the_contents(tmp_path: Path) -> None:
    """The data-path check: the count of meals, or a message naming column/row without the path or the
    contents of other cells (a header-less file must not echo its first meal)."""
    good = _csv(tmp_path / "good.csv", "meal_description,carb", ['"rice, white",45', "bread,30"])
    assert check_nutribench_file(good) == 2
    secret = "grandma's secret lasagna recipe"
    headless = _csv(tmp_path / "headless.csv", f"{secret},12.5", ["bread,30"])
    with pytest.raises(ValueError, match=r"missing required column\(s\)") as err:
        check_nutribench_file(headless)
    assert secret not in str(err.value) and str(headless) not in str(err.value)
    long = _csv(tmp_path / "long.csv", "meal_description,carb", [f"rice,{'9' * 30}x{secret}"])
    with pytest.raises(ValueError, match=r"column 'carb' row 1 holds a text of 62 characters") as err:
        check_nutribench_file(long)
    assert secret not in str(err.value) and len(str(err.value)) < 120
    with pytest.raises(FileNotFoundError):
        check_nutribench_file(tmp_path / "missing.csv")


def test_encoding_problems_and_repeated_ids_are_named(tmp_path: Path) -> None:
    (tmp_path / "latin1.jsonl").write_bytes('{"meal_description": "caf\u00e9", "carb": 4}\n'.encode("utf-8")
                                            + b'{"meal_description": "caf\xe9", "carb": 4}\n')
    with pytest.raises(NutribenchFormatError, match=r"not UTF-8 text \(byte \d+\)"):
        read_nutribench_file(tmp_path / "latin1.jsonl")
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(r) + "\n" for r in GOOD[:2]).encode())
    assert read_nutribench_file(tmp_path / "bom.jsonl")[0]["carb"] == 57.3
    ids = _csv(tmp_path / "ids.csv", "meal_id,meal_description,carb", ["a,rice,4", "b,bread,5", "a,milk,6"])
    with pytest.raises(NutribenchFormatError, match=r"column 'meal_id' row 3 repeats the id of row 1"):
        read_nutribench_file(ids)
