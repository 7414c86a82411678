"""Caption baselines (identity, disjointness, hand-computed LCS and tuple F1) and DeCapBench's file checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.captions.baselines import baseline_scores, caption_tuples, capture_parts, rouge_l, set_f1
from components.captions.decapbench_files import (
    DecapbenchFormatError,
    check_candidate_file,
    check_image_folder,
    check_oracle_file,
    join_candidates,
    read_candidate_file,
    read_oracle_file,
)

REF = "There is a large red cat at the top left. The cat is to the left of the dog. There is a dog."


def test_identical_captions_score_one_and_disjoint_ones_zero() -> None:
    same = baseline_scores([REF], [REF])
    assert {k: round(float(v[0]), 6) for k, v in same.items()} == {
        "bleu4": 1.0,
        "rouge_l": 1.0,
        "tfidf_cosine": 1.0,
        "capture": 1.0,
    }
    apart = baseline_scores(["zebra quantum violin"], [REF], names=("bleu4", "rouge_l", "tfidf_cosine"))
    assert all(float(v[0]) == pytest.approx(0.0, abs=1e-9) for v in apart.values())
    with pytest.raises(ValueError, match="unknown baselines"):
        baseline_scores([REF], [REF], names=("cider",))


def test_rouge_l_is_the_lcs_f_measure() -> None:
    # reference "a b c d", candidate "a c d e": LCS = a c d (3): P = R = 3/4
    assert rouge_l(["a c d e"], ["a b c d"])[0] == pytest.approx(0.75)


def test_capture_style_f1_over_parsed_tuples() -> None:
    tuples = caption_tuples(REF)
    assert tuples["object"] == {("cat",), ("dog",)}
    assert tuples["attribute"] == {("cat", "large"), ("cat", "red"), ("cat", "top left")}
    assert tuples["relation"] == {("cat", "left_of", "dog")}
    # candidate: a red cat and a phantom bird. objects {cat, bird} vs {cat, dog}: F1 1/2; attributes {red} vs 3:
    # P 1, R 1/3, F1 1/2; relations: none vs 1 -> 0. CAPTURE = (0.5 * 0.5 + 0.5 * 0.5 + 0.2 * 0) / 1.2
    parts = capture_parts("There is a red cat. There is a bird.", REF)
    assert parts["object"] == pytest.approx(0.5) and parts["attribute"] == pytest.approx(0.5)
    assert parts["relation"] == 0.0 and parts["capture"] == pytest.approx(0.5 / 1.2)
    assert set_f1(set(), {("a",)}) == 0.0
    assert capture_parts("There is a cat.", "There is a cat.")["relation"] is None  # left out of the mean


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


ORACLE_ROW = {"image_name": "aar_test_04746.jpg", "oracle_caption": "A cat.", "oracle_facts": ["There is a cat."]}
CANDIDATE_ROW = {"image_path": "aar_test_04746.jpg", "caption": "A red cat.", "oracle_caption": "A cat."}


def test_valid_files_are_read_and_joined(tmp_path: Path) -> None:
    oracle = read_oracle_file(_write(tmp_path / "o.jsonl", [ORACLE_ROW, "", {**ORACLE_ROW, "image_name": "b.jpg"}]))
    assert [o.line for o in oracle] == [1, 3] and oracle[0].oracle_facts == ("There is a cat.",)
    candidates = read_candidate_file(_write(tmp_path / "c.jsonl", [CANDIDATE_ROW, {**CANDIDATE_ROW, "human_score": 3}]))
    assert candidates[1].human_score == 3.0 and candidates[0].human_score is None
    assert [o.image_name for _, o in join_candidates(candidates, oracle, "c.jsonl")] == ["aar_test_04746.jpg"] * 2
    assert check_oracle_file(tmp_path / "o.jsonl") == 2 and check_candidate_file(tmp_path / "c.jsonl") == 2
    with pytest.raises(DecapbenchFormatError, match="line 1 field 'image_path' names an image that the oracle"):
        join_candidates(
            read_candidate_file(_write(tmp_path / "x.jsonl", [{**CANDIDATE_ROW, "image_path": "z"}])), oracle, "x.jsonl"
        )


SECRET = "the-hidden-text-of-a-private-file"


@pytest.mark.parametrize(
    ("rows", "check", "message"),
    [
        ([ORACLE_ROW, "{not json"], check_oracle_file, r"line 2 is not a JSON object"),
        ([ORACLE_ROW, [1, 2]], check_oracle_file, r"line 2 holds a JSON list, expected an object"),
        ([{"oracle_caption": SECRET, "oracle_facts": ["x"]}], check_oracle_file, r"line 1 has no field 'image_name'"),
        ([{**ORACLE_ROW, "oracle_facts": []}], check_oracle_file, r"line 1 field 'oracle_facts' .* non-empty list"),
        ([{**ORACLE_ROW, "oracle_facts": ["x", 5]}], check_oracle_file, r"line 1 field 'oracle_facts' item 1 holds 5"),
        ([ORACLE_ROW, ORACLE_ROW], check_oracle_file, r"line 2 field 'image_name' repeats the image of line 1"),
        ([{**CANDIDATE_ROW, "caption": None}], check_candidate_file, r"line 1 field 'caption' holds None"),
        ([{"image_path": "a", "caption": SECRET}], check_candidate_file, r"line 1 has no field 'oracle_caption'"),
        (
            [{**CANDIDATE_ROW, "human_score": "high"}],
            check_candidate_file,
            r"line 1 field 'human_score' holds a text of 4 characters; expected a finite number",
        ),
        ([{**CANDIDATE_ROW, "image_path": ""}], check_candidate_file, r"field 'image_path' .* non-empty"),
        ([""], check_candidate_file, r"holds no rows"),
    ],
)
def test_malformed_files_name_line_and_field_and_never_quote_text(
    tmp_path: Path, rows: list[object], check, message: str
) -> None:
    with pytest.raises(ValueError, match=message) as err:
        check(_write(tmp_path / "f.jsonl", rows))
    assert SECRET not in str(err.value)


def test_bad_bytes_and_suffix(tmp_path: Path) -> None:
    (tmp_path / "f.jsonl").write_bytes(b'{"image_name": "a"}\n\xff\xfe')
    with pytest.raises(ValueError, match=r"line 2 is not UTF-8"):
        check_oracle_file(tmp_path / "f.jsonl")
    with pytest.raises(ValueError, match="JSON Lines file ending in one of"):
        check_oracle_file(_write(tmp_path / "f.csv", [ORACLE_ROW]))


def test_the_image_folder_holds_images_and_nothing_posing_as_one(tmp_path: Path) -> None:
    (tmp_path / "aar_test_00001.jpg").write_bytes(b"\xff\xd8\xff\xe0 jpeg body")
    (tmp_path / "aar_test_00002.png").write_bytes(b"\x89PNG\r\n\x1a\n png body")
    (tmp_path / "notes.txt").write_text(SECRET)
    assert check_image_folder(tmp_path) == 2
    (tmp_path / "aar_test_00003.jpg").write_bytes(b"\x80\x04\x95 pickle bytes")
    with pytest.raises(ValueError, match=r"aar_test_00003.jpg does not start like a jpg image"):
        check_image_folder(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="holds no image file"):
        check_image_folder(empty)
