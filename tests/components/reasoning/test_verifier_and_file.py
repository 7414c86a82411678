"""The value-head verifier (exact shared prefixes, causal values, weights round trip, a loss that falls) and the
sampled-solutions JSONL reader (every malformed line named by line and field)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from components.reasoning.labels import token_value_labels
from components.reasoning.solutions_file import check_solutions_file, read_solutions
from components.reasoning.verifier import Verifier
from components.training import TrainConfig


def test_encoding_shares_prefixes_and_values_are_causal() -> None:
    v = Verifier(seed=0)
    enc = v.encode([("Q one", "1+2=3\nanswer: 3"), ("Q one", "1+2=4\nanswer: 4")], with_question=True)
    a, b = enc.ids
    assert enc.prompts[0] == enc.prompts[1] == 1 + len("Q one\n")
    assert a[: enc.prompts[0] + 4] == b[: enc.prompts[0] + 4] and a[enc.prompts[0] + 4] != b[enc.prompts[0] + 4]
    newline = v._newline[0]
    assert all(a[e] == newline for e in enc.line_ends[0]) and enc.line_ends[0][-1] == len(a) - 1
    bare = v.encode([("Q one", "1+2=3")], with_question=False)
    assert bare.prompts == [1] and bare.ids[0][0] == v.bos
    # the value at a step end equals the value of the prefix cut there (a causal model)
    at_steps = v.values_at(enc.ids, enc.line_ends)
    cut = v.last_values([a[: enc.line_ends[0][0] + 1]])
    assert at_steps[0][0] == pytest.approx(cut[0], abs=1e-5)
    other = Verifier(seed=5)
    other.load_state(v.state())
    assert np.allclose(other.values_at(enc.ids, enc.line_ends)[1], at_steps[1], atol=1e-6)


def test_training_on_tvm_labels_lowers_the_loss() -> None:
    v = Verifier(seed=1)
    pairs = [("q", "1+1=2\nanswer: 2"), ("q", "1+1=3\nanswer: 3")] * 4
    enc = v.encode(pairs, with_question=False)
    labels = token_value_labels(enc.ids, enc.prompts, [1.0, 0.0] * 4, [0] * 8)
    result = v.train(
        enc, labels, TrainConfig(steps=30, lr=1e-2, device="cpu", progress=False, log_every=10, seed=0), batch_size=8
    )
    assert result.history[-1]["loss"] < result.history[0]["loss"]
    right, wrong = v.last_values(v.encode(pairs[:2], with_question=False).ids)
    assert right > wrong


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


GOOD = [
    {"question": "q1", "solution": "1+1=2\nanswer: 2", "answer": "2", "correct": True},
    {"question": "q1", "solution": "1+1=3\nanswer: 3", "answer": 2, "correct": 0},
    {"question": "q2", "solution": "\\boxed{1/2}", "answer": "\\frac{1}{2}", "correct": 1},
]


def test_reads_a_good_file(tmp_path: Path) -> None:
    rows = read_solutions(_write(tmp_path / "s.jsonl", GOOD))
    assert [(r.line, r.answer, r.correct) for r in rows] == [(1, "2", True), (2, "2", False), (3, "\\frac{1}{2}", True)]
    assert check_solutions_file(tmp_path / "s.jsonl") == 3


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"question": "q", "solution": "s", "answer": "1"}, "line 2 has no field 'correct'"),
        ({"question": "q", "solution": "s", "answer": "1", "correct": "yes"}, "line 2 field 'correct'"),
        ({"question": "", "solution": "s", "answer": "1", "correct": True}, "line 2 field 'question'"),
        ({"question": "q", "solution": "s", "answer": None, "correct": True}, "line 2 field 'answer'"),
        ("{not json", "line 2 is not a JSON object"),
        ("[1, 2]", "line 2 holds a JSON list"),
    ],
)
def test_malformed_lines_are_named(tmp_path: Path, bad: object, message: str) -> None:
    path = _write(tmp_path / "s.jsonl", [GOOD[0], bad, GOOD[2]])
    with pytest.raises(ValueError, match=message):
        check_solutions_file(path)


def test_one_question_and_wrong_suffix_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="1 distinct question"):
        check_solutions_file(_write(tmp_path / "s.jsonl", GOOD[:2]))
    with pytest.raises(ValueError, match="ending in"):
        check_solutions_file(_write(tmp_path / "s.csv", GOOD))


def test_big_numbers_deep_lines_and_line_separators(tmp_path: Path) -> None:
    """Review tv04-tv06 and tv82: named refusals, and raw U+2028 inside a question is read."""
    path = tmp_path / "s.jsonl"
    path.write_text(
        json.dumps(GOOD[0]) + "\n" + json.dumps(GOOD[2]).replace('"\\\\frac{1}{2}"', "1" + "0" * 400) + "\n"
    )
    with pytest.raises(ValueError, match=r"line 2 holds an integer of 401 digits"):
        check_solutions_file(path)
    path.write_text(json.dumps(GOOD[0]) + "\n" + "[" * 100_000 + "\n")
    with pytest.raises(ValueError, match=r"line 2 nests arrays or objects more than 64 levels deep"):
        check_solutions_file(path)
    rows = [{**GOOD[0], "question": "two\u2028lines"}, {**GOOD[2], "answer": 10**20}]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    read = read_solutions(path)
    assert read[0].question == "two\u2028lines" and read[1].answer == "100000000000000000000"


def test_a_users_checkpoint_is_the_verifier_backbone_with_lora(tmp_path: Path) -> None:
    from paperflows.params import ParamsError, validate
    from pipelines.tvm.params import TvmParams
    from tests.components.llm.test_llm_user_model import write_tiny_checkpoint

    folder = write_tiny_checkpoint(tmp_path / "my-lm")
    verifier = Verifier("smollm2", 0, name_or_path="./my-lm", root=tmp_path, lora_r=2, lora_layers=1)
    trained = {k for k in verifier.state() if not k.startswith("head.")}
    assert trained and all("lora_" in k for k in trained)  # the user's weights stay frozen, only adapters save
    enc = verifier.encode([("1+1", "2\n")], with_question=True)
    assert enc.ids[0][0] == verifier.bos and len(enc.line_ends[0]) == 1
    with pytest.raises(ValueError, match="backbone 'smollm2'"):
        Verifier("tiny", 0, name_or_path=str(folder))

    chosen = validate(TvmParams, {"verifier": {"backbone": "smollm2", "name_or_path": "./my-lm"}}, "tvm")
    assert chosen.verifier.name_or_path == "./my-lm"
    with pytest.raises(ParamsError, match=r"tvm\.verifier.*set backbone 'smollm2'"):
        validate(TvmParams, {"verifier": {"name_or_path": "./my-lm"}}, "tvm")  # the tiny default has no LoRA
    missing = validate(TvmParams, {"verifier": {"backbone": "smollm2", "name_or_path": "org/not-cached"}}, "tvm")
    (problem,) = missing.environment_problems()
    assert problem.startswith("verifier.name_or_path: ") and "not in the local Hugging Face cache" in problem
    assert missing.environment_problems(("data",)) == []
