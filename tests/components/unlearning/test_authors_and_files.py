"""The fictitious-author generator, TOFU's file reader and the offline utility sets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.unlearning import AuthorConfig, TofuFormatError, author_rows, make_authors, read_tofu_file
from components.unlearning.general_text import capital_pairs, general_passages, world_fact_rows

SECRET = "the unpublished memoir of Aunt Mildred"


def test_authors_split_and_perturbations() -> None:
    cfg = AuthorConfig(n_authors=12, forget_authors=2, n_perturbed=3, seed=4)
    rows = author_rows(cfg)
    assert len(rows) == 12 * 5 and sum(r["split"] == "forget" for r in rows) == 2 * 5
    assert len({r["author"] for r in rows if r["split"] == "forget"}) == 2
    for row in rows:
        assert row["author"] in row["question"]
        assert len(row["perturbed_answer"]) == 3 and len(set(row["perturbed_answer"])) == 3
        assert row["paraphrased_answer"] not in row["perturbed_answer"]
        value = row["answer"].rstrip(".").lower().replace("the ", "").replace(" prize", "")
        assert value in row["paraphrased_answer"].lower()  # the same fact, other words
        assert all(value not in p.lower() for p in row["perturbed_answer"])  # other authors' values
        # the perturbed answers share the paraphrase's wording: only the value (first) differs
        wording = row["paraphrased_answer"].split(" ")[-2:]
        assert all(p.split(" ")[-2:] == wording for p in row["perturbed_answer"])
    assert author_rows(cfg) == rows  # a pure function of the config
    assert make_authors(cfg) != make_authors(AuthorConfig(n_authors=12, forget_authors=2, seed=5))
    with pytest.raises(ValueError, match="forget_authors"):
        AuthorConfig(n_authors=3, forget_authors=3)


def _write(path: Path, rows: list) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_reader_accepts_tofu_rows(tmp_path: Path) -> None:
    forget = [
        {
            "question": "Q1?",
            "answer": "A1.",
            "paraphrased_answer": "P1.",
            "perturbed_answer": ["W1.", "W2."],
            "paraphrased_question": "ignored",
        }
    ]
    retain = [
        {"question": "Q2?", "answer": "A2."},
        {"question": "Q3?", "answer": "A3.", "paraphrased_answer": "P3.", "perturbed_answer": ["W3."]},
    ]
    rows = read_tofu_file(_write(tmp_path / "forget10_perturbed.json", forget), split="forget")
    assert rows[0]["perturbed_answer"] == ["W1.", "W2."] and rows[0]["split"] == "forget"
    kept = read_tofu_file(_write(tmp_path / "retain.jsonl", retain), split="retain")
    assert [r["perturbed_answer"] for r in kept] == [None, ["W3."]]
    (tmp_path / "list.json").write_text(json.dumps(forget))
    assert read_tofu_file(tmp_path / "list.json", split="forget")[0]["answer"] == "A1."


@pytest.mark.parametrize(
    ("rows", "split", "message"),
    [
        (
            [{"question": "Q?", "answer": SECRET, "paraphrased_answer": "P."}],
            "forget",
            r"row 1 has no field 'perturbed_answer'",
        ),
        (
            [{"question": "Q?", "answer": "A."}, {"question": "", "answer": "A."}],
            "retain",
            r"row 2 field 'question' is ''",
        ),
        ([{"question": "Q?", "answer": 3}], "retain", r"row 1 field 'answer' is 3, not a non-empty string"),
        (
            [{"question": "Q?", "answer": "A.", "paraphrased_answer": "P.", "perturbed_answer": SECRET}],
            "forget",
            r"'perturbed_answer' is a text of \d+ characters, not a non-empty list",
        ),
        ([{"question": "Q?", "answer": "A."}], "retain", r"no row has paraphrased_answer"),
        (["just a string"], "forget", r"row 1 is a str"),
    ],
    ids=["no-perturbed", "empty-question", "number-answer", "perturbed-not-list", "retain-without-eval", "not-object"],
)
def test_reader_names_file_row_and_field(tmp_path: Path, rows: list, split: str, message: str) -> None:
    with pytest.raises(TofuFormatError, match=message) as err:
        read_tofu_file(_write(tmp_path / "bad.json", rows), split=split)
    assert "bad.json" in str(err.value) and SECRET not in str(err.value)


def test_reader_refuses_broken_json(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"question": "Q?", "answer": "A."}\n{"question": \n')
    with pytest.raises(TofuFormatError, match="line 2 is not valid JSON"):
        read_tofu_file(tmp_path / "bad.json", split="retain")
    (tmp_path / "x.csv").write_text("question,answer\n")
    with pytest.raises(TofuFormatError, match="unsupported file type"):
        read_tofu_file(tmp_path / "x.csv", split="retain")


def test_world_facts_and_passages_from_gensim_files() -> None:
    pairs = capital_pairs()
    assert pairs[0] == ("Greece", "Athens") and len(pairs) == len(dict(pairs)) > 100
    rows = world_fact_rows(5, 3, seed=0)
    assert rows[0]["question"] == "What is the capital of Greece?" and rows[0]["answer"] == "Athens."
    assert all("Athens." not in r for r in rows[0]["perturbed_answer"]) and len(rows[0]["perturbed_answer"]) == 3
    passages = general_passages(2, 10)
    assert len(passages) == 2 and all(len(p.split()) == 10 for p in passages)


def test_reader_splits_json_lines_on_newline_only_and_bounds_nesting(tmp_path: Path) -> None:
    rows = [
        {"question": "Where\u2028was\u2029she\x85born?", "answer": "A."},
        {"question": "Q?", "answer": "B.", "paraphrased_answer": "P.", "perturbed_answer": ["W."]},
    ]
    path = tmp_path / "retain.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert read_tofu_file(path, split="retain")[0]["question"] == rows[0]["question"]
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(TofuFormatError, match=r"deep\.json: the JSON list nests arrays or objects more than 64"):
        read_tofu_file(tmp_path / "deep.json", split="forget")


def test_forget_and_retain_files_share_no_qa(tmp_path: Path) -> None:
    from components.unlearning.tofu_file import overlap_problem, shared_rows

    forget = [{"question": "Q1?", "answer": "A1."}, {"question": "Q2?", "answer": "A2."}]
    retain = [{"question": "Q3?", "answer": "A3."}, {"question": " Q2?", "answer": "A2. "}]
    assert shared_rows(forget, retain) == (2, 2) and shared_rows(forget, retain[:1]) is None
    message = overlap_problem(tmp_path / "f.json", tmp_path / "f.json", forget, forget)
    assert message is not None and message.startswith("row 1 of the retain file") and "(the same file)" in message
    assert overlap_problem(tmp_path / "f.json", tmp_path / "r.json", forget, retain[:1]) is None
