"""Reading the real NutriBench format (CSV / Parquet / JSONL) and rejecting malformed files."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from components.nutrition.nutribench_file import NutribenchFormatError, check_nutribench_file, read_nutribench_file

GOOD = [
    {
        "meal_description": "A cup of rice and a glass of milk.",
        "carb": 57.3,
        "fat": 5.1,
        "energy": 320.0,
        "protein": 11.2,
        "country": "USA",
        "serving_type": "natural",
    },
    {
        "meal_description": "150 g of pasta.",
        "carb": 46.5,
        "fat": 1.3,
        "energy": 230.0,
        "protein": 8.7,
        "country": "ITA",
        "serving_type": "metric",
    },
    {
        "meal_description": "Two eggs.",
        "carb": 1.1,
        "fat": None,
        "energy": None,
        "protein": None,
        "country": "USA",
        "serving_type": "natural",
    },
]


def _csv(path: Path, header: str, lines: list[str]) -> Path:
    path.write_text("\n".join([header, *lines]) + "\n")
    return path


def test_reads_csv_parquet_and_jsonl(tmp_path: Path) -> None:
    pq.write_table(pa.Table.from_pylist(GOOD), tmp_path / "v2.parquet")
    (tmp_path / "v2.jsonl").write_text("\n".join(json.dumps(r) for r in GOOD) + "\n")
    _csv(
        tmp_path / "v2.csv",
        "meal_description,carb,fat,energy,protein,country,serving_type",
        [
            '"A cup of rice and a glass of milk.",57.3,5.1,320,11.2,USA,natural',
            "150 g of pasta.,46.5,1.3,230,8.7,ITA,metric",
            "Two eggs.,1.1,,,,USA,natural",
        ],
    )
    results = [
        read_nutribench_file(tmp_path / name, eval_share=0.34, seed=0) for name in ("v2.parquet", "v2.jsonl", "v2.csv")
    ]
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


@pytest.mark.parametrize(
    ("header", "lines", "message"),
    [
        ("meal_description,fat", ["rice,1.0"], r"missing required column\(s\) \['carb'\]"),
        ("description,carb", ["rice,10"], r"missing required column\(s\) \['meal_description'\]"),
        (
            "meal_description,carb",
            ["rice,45", "bread,lots"],
            r"column 'carb' row 2 holds a text of 4 characters, not a number",
        ),
        ("meal_description,carb", ["rice,-3"], r"column 'carb' row 1 holds '-3'; expected a finite number >= 0"),
        ("meal_description,carb", ["rice,"], r"column 'carb' is empty in row 1"),
        ("meal_description,carb", ["rice,inf"], r"column 'carb' row 1"),
        ("meal_description,carb,fat", ["rice,4,x"], r"column 'fat' row 1 holds a text of 1 characters, not a number"),
        ("meal_description,carb", [",4"], r"column 'meal_description' row 1"),
        ("meal_description,carb,serving_type", ["rice,4,household"], r"column 'serving_type' row 1"),
        ("meal_description,carb", [], r"holds no meals"),
        ("meal_description,carb", ["rice,45"], r"holds 1 meal; at least 2 meals are needed"),
    ],
)
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


LATIN1_MEAL = "caf\u00e9 \u00bd cup".encode("latin-1")  # b"caf\xe9 \xbd cup": not UTF-8


@pytest.mark.parametrize(
    ("name", "head", "tail", "message"),
    [
        (
            "meals.jsonl",
            b'{"meal_description": "rice", "carb": 4}\n{"meal_description": "',
            b'", "carb": 4}\n',
            r"not UTF-8 text at byte offset 65, line 2; save it as UTF-8",
        ),
        (
            "meals.json",
            b'[{"meal_description": "rice", "carb": 4},\n {"meal_description": "',
            b'", "carb": 4}]\n',
            r"not UTF-8 text at byte offset 68, line 2",
        ),
        (
            "meals.csv",
            b"meal_description,carb\nrice,45\n",
            b",4\n",
            r"not a readable CSV file \(not UTF-8 text at byte offset 33, line 3; save it as UTF-8\)",
        ),
    ],
)
def test_non_utf8_text_names_the_file_offset_and_line(
    tmp_path: Path, name: str, head: bytes, tail: bytes, message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(head + LATIN1_MEAL + tail)
    with pytest.raises(NutribenchFormatError, match=message) as err:
        read_nutribench_file(path)
    assert str(err.value).startswith(f"{path}: ")
    assert f"byte offset {len(head) + 3}," in err.value.problem  # the "\xe9" of "caf\xe9" in the whole file
    with pytest.raises(ValueError, match=message):
        check_nutribench_file(path)


def test_non_utf8_parquet_string_names_column_and_row(tmp_path: Path) -> None:
    descriptions = pa.array([b"rice", LATIN1_MEAL], type=pa.binary()).view(pa.string())  # unchecked bytes
    pq.write_table(pa.table({"meal_description": descriptions, "carb": [45.0, 4.0]}), tmp_path / "m.parquet")
    with pytest.raises(NutribenchFormatError, match=r"m\.parquet: column 'meal_description' row 2 is not UTF-8"):
        read_nutribench_file(tmp_path / "m.parquet")


def test_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    bom = b"\xef\xbb\xbf"
    (tmp_path / "bom.jsonl").write_bytes(bom + "".join(json.dumps(r) + "\n" for r in GOOD[:2]).encode())
    (tmp_path / "bom.json").write_bytes(bom + json.dumps(GOOD[:2]).encode())
    (tmp_path / "bom.csv").write_bytes(bom + b"meal_description,carb\nrice,57.3\nbread,46.5\n")
    for name in ("bom.jsonl", "bom.json", "bom.csv"):
        rows = read_nutribench_file(tmp_path / name)
        assert [r["carb"] for r in rows] == [57.3, 46.5], name


def test_repeated_meal_ids_are_listed_with_their_rows(tmp_path: Path) -> None:
    ids = _csv(
        tmp_path / "ids.csv",
        "meal_id,meal_description,carb",
        ["17,rice,4", "m1,bread,5", "17,milk,6", "m1,oats,7", "17,tea,0", "9,jam,3"],
    )
    with pytest.raises(NutribenchFormatError) as err:
        read_nutribench_file(ids)
    assert err.value.problem == (
        "column 'meal_id' row 3 repeats the id of row 1; 2 id(s) repeat: '17' in rows "
        "1, 3, 5; a text of 2 characters in rows 2, 4"
    )
    many = _csv(tmp_path / "many.csv", "meal_id,meal_description,carb", [f"{i % 7},meal,{i}" for i in range(14)])
    with pytest.raises(
        NutribenchFormatError,
        match=r"row 8 repeats the id of row 1; 7 id\(s\) repeat: '0' in "
        r"rows 1, 8; .*'4' in rows 5, 12; and 2 more$",
    ):
        read_nutribench_file(many)


@pytest.mark.parametrize(
    ("name", "serving"),
    [
        ("wweia_meal_natural.csv", "natural"),
        ("wweia_meal_metric.csv", "metric"),
        ("FAO-WHO_meal-Natural.csv", "natural"),
        ("wweia_meal.csv", "unspecified"),
        ("supernatural.csv", "unspecified"),
        ("natural_vs_metric.csv", "unspecified"),
    ],
)
def test_v1_serving_type_comes_from_the_file_name(tmp_path: Path, name: str, serving: str) -> None:
    rows = read_nutribench_file(_csv(tmp_path / name, "meal_description,carb", ["rice,45", "bread,30"]))
    assert [r["serving_type"] for r in rows] == [serving, serving]


def test_serving_type_column_wins_over_the_file_name(tmp_path: Path) -> None:
    path = _csv(tmp_path / "meals_natural.csv", "meal_description,carb,serving_type", ["rice,45,metric", "bread,30,"])
    assert [r["serving_type"] for r in read_nutribench_file(path)] == ["metric", "natural"]


def test_v1_header_with_quoting_unicode_and_an_extra_column(tmp_path: Path) -> None:
    """The official v1 header, a quoted description holding commas, non-ASCII text and a column the reader
    does not know."""
    path = tmp_path / "wweia_meal_natural.csv"
    path.write_text(
        "meal_description,carb,protein,fat,energy,source_note\n"
        '"For lunch, I had a cup of rice, sautéed spinach and ½ cup of beans.",63.41,9.2,3.5,330.0,x\n'
        "I drank a 12 fl oz can of cola \u2014 ice cold.,39.0,0,0,155,\n"
        '"Two eggs, scrambled",1.1,,,,"a, b"\n',
        encoding="utf-8",
    )
    rows = read_nutribench_file(path, eval_share=0.34)
    assert [r["meal_description"] for r in rows] == [
        "For lunch, I had a cup of rice, sautéed spinach and ½ cup of beans.",
        "I drank a 12 fl oz can of cola \u2014 ice cold.",
        "Two eggs, scrambled",
    ]
    assert [r["carb"] for r in rows] == [63.41, 39.0, 1.1]
    assert rows[0]["protein"] == 9.2 and rows[0]["energy"] == 330.0 and rows[2]["fat"] is None
    assert {r["serving_type"] for r in rows} == {"natural"} and {r["source"] for r in rows} == {path.name}
    assert "source_note" not in rows[0] and set(rows[0]) == set(rows[1])
    assert check_nutribench_file(path) == 3
