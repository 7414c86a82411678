"""The chat-completions judge against a fake OpenAI-compatible server on loopback (no network): requests,
answers read robustly, retries with back-off, refusals, and DCScore computed through it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.captions.chat_judge import ChatClient, ChatEndpoint, ChatEndpointError, ChatJudge, parse_json_list
from components.captions.dcscore import CaptionItem, DCScoreConfig, JudgeError, score_item
from tests.components.captions.fake_chat import FakeChatServer, choices

ITEM = CaptionItem(
    0,
    "pic.jpg",
    "A red cat sits on a mat. It feels cozy.",
    "A red cat on a blue mat.",
    ("There is a cat.", "The cat is red.", "There is a mat.", "The mat is blue."),
)
UNITS = [
    {"fact": "There is a cat_0.", "identifier": "cat_0", "relevance": 1},
    {"fact": "The cat_0 is red.", "relevance": 1},
    {"fact": "The cat_0 sits on a mat_0.", "identifier": "mat_0", "relevance": 1},
    {"fact": "The scene feels cozy.", "relevance": 0},
]


class FakeServer(FakeChatServer):
    """Answers from a queue of (status, body, headers)."""

    def __init__(self) -> None:
        self.queue: list[tuple[int, Any, dict[str, str]]] = []
        super().__init__(lambda body: self.queue.pop(0))

    def answer(self, *contents: str, status: int = 200, usage: tuple[int, int] = (100, 10)) -> None:
        self.queue.append((status, choices(list(contents), usage), {}))

    def fail(self, status: int, headers: dict[str, str] | None = None) -> None:
        self.queue.append((status, {"error": {"message": "nope"}}, headers or {}))


@pytest.fixture()
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.close()


def _client(server: FakeServer, waits: list[float] | None = None, **kw: Any) -> ChatClient:
    endpoint = ChatEndpoint(server.url, "judge-model", api_key="sk-test-key", timeout_s=5)
    return ChatClient(endpoint, sleep=(waits.append if waits is not None else lambda s: None), **kw)


def _fenced(rows: list[dict[str, Any]]) -> str:
    return "Here you go:\n```json\n" + json.dumps(rows, indent=1) + "\n```"


def test_dcscore_of_one_caption_through_the_endpoint(server: FakeServer, tmp_path: Path) -> None:
    (tmp_path / "pic.jpg").write_bytes(b"\xff\xd8\xff fake jpeg")
    server.answer(_fenced(UNITS))
    mapping = [{"fact": u["fact"], "matched_oracle_id": m} for u, m in zip(UNITS, (0, 1, 2, "None"))]
    server.answer(*[_fenced(mapping)] * 3)
    verdicts = [{"fact": u["fact"], "verification": v} for u, v in zip(UNITS, (1, 1, 1, 0))]
    # the third verification sample is a Python literal with single quotes and a trailing remark
    server.answer(_fenced(verdicts), json.dumps(verdicts), str(verdicts) + "\nAll checked.", usage=(300, 30))
    judge = ChatJudge(_client(server), images_dir=tmp_path)
    record = score_item(judge, ITEM, DCScoreConfig())
    assert record["valid"], record
    details = record["eval_details"]
    # all units: P = 3/4, R = 3/4 (three oracle facts matched once); relevant: P = 1, R = 3/4
    assert details["precision"] == pytest.approx(0.75) and details["recall"] == pytest.approx(0.75)
    assert details["precision_relevant"] == pytest.approx(1.0)
    assert details["consume_token"] == [130, 130, 390]  # prompt + 3 x completion
    decompose, match, verify = (r["body"] for r in server.requests)
    assert all(r["path"] == "/v1/chat/completions" and r["auth"] == "Bearer sk-test-key" for r in server.requests)
    assert (decompose["temperature"], decompose["n"], match["temperature"], match["n"]) == (1.0, 1, 1.0, 3)
    assert (verify["temperature"], verify["n"], verify["model"], verify["max_tokens"]) == (0.3, 3, "judge-model", 2000)
    assert ITEM.caption in decompose["messages"][1]["content"]
    assert '"id": 3, "fact": "The mat is blue."' in match["messages"][1]["content"]
    assert "relevance" not in match["messages"][1]["content"]
    image, text = verify["messages"][1]["content"]
    assert image["image_url"]["url"].startswith("data:image/jpeg;base64,") and image["image_url"]["detail"] == "high"
    assert ITEM.oracle_caption in text["text"]


def test_transient_failures_are_retried_with_backoff(server: FakeServer) -> None:
    waits: list[float] = []
    server.fail(500)
    server.fail(429, {"Retry-After": "2"})
    server.answer("[]")
    texts, _ = _client(server, waits).complete([{"role": "user", "content": "hi"}], temperature=0.0)
    assert texts == ["[]"] and len(server.requests) == 3
    assert 1.0 <= waits[0] <= 60.0 and waits[1] == 2.0


def test_a_refusal_stops_and_repeated_failures_give_up(server: FakeServer) -> None:
    server.fail(401)
    with pytest.raises(ChatEndpointError, match="HTTP 401"):
        _client(server).complete([{"role": "user", "content": "hi"}], temperature=0.0)
    assert len(server.requests) == 1
    for _ in range(3):
        server.fail(503)
    with pytest.raises(ChatEndpointError, match="failed 3 times; last: HTTP 503"):
        _client(server, max_attempts=3).complete([{"role": "user", "content": "hi"}], temperature=0.0)


def test_an_endpoint_without_n_gets_one_request_per_sample(server: FakeServer) -> None:
    server.fail(400)  # refuses n = 3
    for text in ("a", "b", "c"):
        server.answer(text)
    texts, tokens = _client(server).complete([{"role": "user", "content": "hi"}], temperature=1.0, n=3)
    assert texts == ["a", "b", "c"] and tokens == 3 * 130
    assert [r["body"]["n"] for r in server.requests] == [3, 1, 1, 1]
    server.answer("d")  # fewer choices than asked: the rest is asked for
    server.answer("e")
    client = _client(server)
    assert client.complete([{"role": "user", "content": "x"}], temperature=1.0, n=2)[0] == ["d", "e"]


def test_an_answer_that_leaves_out_facts_retries_the_caption(server: FakeServer) -> None:
    """Attempt 1: the mappings leave out two facts (JudgeError); attempt 2: complete (case and spacing of
    the fact texts ignored, ids as strings, verifications as booleans)."""
    server.answer(json.dumps(UNITS))
    server.answer(*[json.dumps([{"fact": u["fact"], "matched_oracle_id": 0} for u in UNITS[:2]])] * 3)
    server.answer(json.dumps(UNITS))
    server.answer(*[json.dumps([{"fact": u["fact"].upper() + "  ", "matched_oracle_id": "1"} for u in UNITS])] * 3)
    server.answer(*[json.dumps([{"fact": u["fact"], "verification": True} for u in UNITS])] * 3)
    record = score_item(ChatJudge(_client(server)), ITEM, DCScoreConfig())
    assert record["valid"] and record["eval_details"]["tries"] == 2 and len(server.requests) == 5
    assert record["eval_details"]["mappings_with_human"][0]["There is a cat_0."] == 1


@pytest.mark.parametrize(
    ("text", "facts"),
    [
        ('```json\n[{"fact": "a"}]\n```', ["a"]),
        ("[{'fact': 'a', 'relevance': 1}]", ["a"]),
        ('Sure! [{"fact": "a"}, {"fact": "b"}] Hope this helps.', ["a", "b"]),
        ('{"facts": [{"fact": "a"}]}', ["a"]),
    ],
)
def test_answers_are_read_robustly(text: str, facts: list[str]) -> None:
    assert [r["fact"] for r in parse_json_list(text)] == facts


def test_unreadable_answers_and_bad_values_are_judge_errors() -> None:
    with pytest.raises(JudgeError, match="no JSON list"):
        parse_json_list("I cannot help with that.")
    with pytest.raises(JudgeError, match="no JSON list"):
        parse_json_list("__import__('os').system('true')")  # never evaluated
    endpoint = ChatEndpoint("https://example.invalid/v1", "m", api_key="sk-secret")
    assert "sk-secret" not in repr(endpoint)
    with pytest.raises(ValueError, match="must start with http"):
        ChatEndpoint("example.com", "m")


def test_endpoint_problems_are_the_rule_of_the_endpoint() -> None:
    from components.captions.chat_judge import ChatEndpoint, endpoint_problems

    assert endpoint_problems("https://api.example.com/v1", "gpt") == []
    assert endpoint_problems("127.0.0.1:9/v1", "gpt") == [
        "base_url must start with http:// or https:// followed by a host, got '127.0.0.1:9/v1'"
    ]
    assert endpoint_problems("http://", " ") == [
        "base_url must start with http:// or https:// followed by a host, got 'http://'",
        "model must be a model name",
    ]
    with pytest.raises(ValueError, match="must start with http"):
        ChatEndpoint("ftp://x", "m")
