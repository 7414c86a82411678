"""DCScore's judge through an OpenAI-compatible chat-completions endpoint (the official procedure's LLM calls).

Three calls per caption, as the official evaluation makes them (it uses gpt-4o-2024-05-13 for all three):

* decompose: one sample at temperature 1 -> [{fact, identifier, relevance}];
* match: ``n`` samples at temperature 1 -> [{fact, matched_oracle_id}] (an oracle id or "None");
* verify: ``n`` samples at temperature 0.3, with the image (``detail: high``) when an image folder is given,
  and the reference caption -> [{fact, verification}].

The prompts are ours (the same instructions in our words, with our own worked example). Answers are read
robustly: code fences are stripped, JSON is tried first and a Python literal second (``ast.literal_eval``,
never ``eval``), and the list is taken from the first ``[`` to the last ``]``; facts are aligned by their text
(case, spacing and a final period ignored). An answer that cannot be read or leaves facts out raises
:class:`~components.captions.dcscore.JudgeError` and the caption is retried (``score_item``).

Transport (:class:`ChatClient`): ``POST {base_url}/chat/completions`` with a bearer key when one is given;
connection errors, timeouts, HTTP 408/409/429 and 5xx are retried with randomised exponential back-off
(1 s .. 60 s, ``Retry-After`` honoured, 6 attempts: the official client's tenacity policy); another 4xx
stops with :class:`ChatEndpointError`. When an endpoint returns fewer than ``n`` choices (or refuses
``n > 1``), the remaining samples are requested one at a time. Tokens are counted as the official
``consume_token``: prompt tokens + 3 x completion tokens.
"""

from __future__ import annotations

import ast
import base64
import json
import random
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.captions.dcscore import CaptionItem, JudgeError, OracleId, Unit

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
IMAGE_TYPES = {
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".png": "image/png",
    ".webp": "image/webp",
    ".gif": "image/gif",
}
SYSTEM = "You are a careful visual-linguistic annotator. You answer with JSON only."

DECOMPOSE_PROMPT = """Split the image caption below into atomic facts: the smallest statements that each say one \
thing about one element of the image (an object, one attribute of an object, or one spatial relation). Taken \
together the facts must carry everything the caption says: leave nothing out, and do not add anything.

Give every object a short identifier such as dog_0 or dog_1, so that two similar objects stay apart. A fact about \
an attribute or a relation uses the identifier of the object it is about (for a relation: its subject).

Mark every fact with "relevance": 1 when it describes something visible in the image, 0 when it is an \
interpretation, a judgement or an embellishment (a mood, an intention, a story) rather than visible content.

Answer with a JSON list only: [{"fact": "...", "identifier": "...", "relevance": 1 or 0}, ...]. The \
"identifier" key may be left out when the fact already names its object by identifier.

Example
Caption: A brown dog sleeps on a green sofa next to a tall window. Two red cushions lie beside it. The room \
looks peaceful.
Facts:
```json
[{"fact": "There is a dog_0.", "identifier": "dog_0", "relevance": 1},
 {"fact": "The dog_0 is brown.", "relevance": 1},
 {"fact": "The dog_0 is sleeping.", "relevance": 1},
 {"fact": "There is a sofa_0.", "identifier": "sofa_0", "relevance": 1},
 {"fact": "The sofa_0 is green.", "relevance": 1},
 {"fact": "The dog_0 is on the sofa_0.", "relevance": 1},
 {"fact": "There is a window_0.", "identifier": "window_0", "relevance": 1},
 {"fact": "The window_0 is tall.", "relevance": 1},
 {"fact": "The sofa_0 is next to the window_0.", "relevance": 1},
 {"fact": "There is a cushion_0.", "identifier": "cushion_0", "relevance": 1},
 {"fact": "There is a cushion_1.", "identifier": "cushion_1", "relevance": 1},
 {"fact": "The cushion_0 and cushion_1 are red.", "relevance": 1},
 {"fact": "The cushion_0 and cushion_1 lie beside the dog_0.", "relevance": 1},
 {"fact": "The room looks peaceful.", "relevance": 0}]
```

Caption: <<caption>>
Facts:"""

MATCH_PROMPT = """You compare two sets of atomic facts about the same image: facts extracted from a candidate \
caption, and oracle facts written by annotators, each with an "id".

For every candidate fact, find the oracle fact that carries the same piece of information: the same object \
with the same kind of attribute, or the same relation. The two sets name objects differently; infer which \
objects correspond from their categories, attributes and relations. A candidate fact may get a detail wrong (a \
colour, a side): map it to the oracle fact about the same thing when there is one. When no oracle fact \
corresponds, answer "None".

Every candidate fact must appear exactly once in the answer, with its text unchanged. Answer with a JSON list \
only: [{"fact": "...", "matched_oracle_id": <an oracle id or "None">}, ...]

Candidate facts:
<<candidate>>

Oracle facts:
<<oracle>>"""

VERIFY_PROMPT = """You check atomic facts about an image. The facts were extracted from a caption written by a \
model. Your evidence is the image (when it is attached) and a reference caption written by a person.

For every fact decide whether it is correct: 1 when the image or the reference caption supports it, 0 when it \
contradicts them or describes something that is not there.

Every fact must appear exactly once in the answer, with its text unchanged. Answer with a JSON list only: \
[{"fact": "...", "verification": 1 or 0}, ...]

Reference caption:
<<reference>>

Facts:
<<facts>>"""


class ChatEndpointError(RuntimeError):
    """The endpoint refused the request (a 4xx other than 408/409/429) or kept failing: retrying the caption
    would not help."""


def endpoint_problems(base_url: str, model: str) -> list[str]:
    """What makes ``base_url`` / ``model`` unusable as a chat-completions endpoint (a URL without an http(s)
    scheme, no model name); checked by :class:`ChatEndpoint` and, before any work, by the run's parameters."""
    problems = []
    if not re.match(r"^https?://[^/\s]", base_url):
        problems.append(
            "base_url must start with http:// or https:// followed by a host, got "
            + (f"{base_url!r}" if len(base_url) <= 80 else f"a text of {len(base_url)} characters")
        )
    if not model.strip():
        problems.append("model must be a model name")
    return problems


@dataclass(frozen=True)
class ChatEndpoint:
    """Where the judge lives. The key is never shown (``repr``) nor written anywhere."""

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 120.0

    def __post_init__(self) -> None:
        for problem in endpoint_problems(self.base_url, self.model):
            raise ValueError(problem)


class ChatClient:
    """``complete(messages, temperature=, n=, max_tokens=) -> (texts, tokens)`` over HTTP (module docstring)."""

    def __init__(
        self,
        endpoint: ChatEndpoint,
        *,
        max_attempts: int = 6,
        backoff: tuple[float, float] = (1.0, 60.0),
        sleep: Callable[[float], None] = time.sleep,
        seed: int = 0,
    ) -> None:
        self.endpoint, self.max_attempts, self.backoff, self.sleep = endpoint, max_attempts, backoff, sleep
        self._random = random.Random(seed)
        self._single = False  # the endpoint refused n > 1: ask one sample per request
        self.requests = 0

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        url = self.endpoint.base_url.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json"}
        if self.endpoint.api_key:
            headers["Authorization"] = f"Bearer {self.endpoint.api_key}"
        data = json.dumps(body).encode()
        last = ""
        for attempt in range(self.max_attempts):
            self.requests += 1
            wait: float | None = None
            try:
                request = urllib.request.Request(url, data=data, headers=headers, method="POST")
                with urllib.request.urlopen(request, timeout=self.endpoint.timeout_s) as response:  # noqa: S310
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as err:
                detail = err.read(300).decode("utf-8", "replace").strip()
                if err.code not in RETRY_STATUS:
                    raise ChatEndpointError(f"{url} answered HTTP {err.code}: {detail[:200]}") from None
                last = f"HTTP {err.code}"
                after = err.headers.get("Retry-After") if err.headers else None
                wait = float(after) if after and after.replace(".", "", 1).isdigit() else None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as err:
                last = f"{type(err).__name__}: {getattr(err, 'reason', err)}"
            except json.JSONDecodeError:
                last = "a body that is not JSON"
            if attempt + 1 < self.max_attempts:
                low, high = self.backoff
                self.sleep(
                    min(high, wait)
                    if wait is not None
                    else max(low, self._random.uniform(0, min(high, low * 2**attempt)))
                )
        raise ChatEndpointError(f"{url} failed {self.max_attempts} times; last: {last}")

    def complete(
        self, messages: list[dict[str, Any]], *, temperature: float, n: int = 1, max_tokens: int = 2000
    ) -> tuple[list[str], int]:
        """``n`` completions of ``messages`` and the tokens they cost (prompt + 3 x completion)."""
        texts: list[str] = []
        tokens = 0
        while len(texts) < n:
            ask = 1 if self._single else n - len(texts)
            body = {
                "model": self.endpoint.model,
                "messages": messages,
                "temperature": temperature,
                "max_tokens": max_tokens,
                "n": ask,
            }
            try:
                answer = self._post(body)
            except ChatEndpointError as err:
                if ask > 1 and "HTTP 400" in str(err):
                    self._single = True
                    continue
                raise
            choices = answer.get("choices") if isinstance(answer, dict) else None
            if not isinstance(choices, list) or not choices:
                raise JudgeError("the endpoint answered without choices")
            for choice in choices[: n - len(texts)]:
                content = (choice.get("message") or {}).get("content") if isinstance(choice, dict) else None
                if not isinstance(content, str):
                    raise JudgeError("a choice holds no message content")
                texts.append(content)
            usage = answer.get("usage") or {}
            tokens += int(usage.get("prompt_tokens", 0) or 0) + 3 * int(usage.get("completion_tokens", 0) or 0)
        return texts, tokens


# --------------------------------------------------------------------------------------------------
# reading answers
# --------------------------------------------------------------------------------------------------
def parse_json_list(text: str) -> list[dict[str, Any]]:
    """The list of objects an answer holds (see the module docstring); JudgeError when there is none."""
    candidates = []
    fenced = re.findall(r"```(?:json|JSON)?\s*(.*?)```", text, flags=re.S)
    candidates += fenced
    candidates.append(text)
    start, end = text.find("["), text.rfind("]")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for chunk in candidates:
        chunk = chunk.strip()
        for reader in (json.loads, ast.literal_eval):
            try:
                value = reader(chunk)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(value, dict):
                value = next((v for v in value.values() if isinstance(v, list)), None)
            if isinstance(value, list) and all(isinstance(x, dict) for x in value):
                return value
    raise JudgeError("the answer holds no JSON list of objects")


def _key(fact: str) -> str:
    return re.sub(r"\s+", " ", fact).strip().rstrip(".").strip().lower()


def _relevance(value: Any) -> int:
    if value is None:
        return 1  # the official worked examples leave it out on some facts
    if value in (0, 1) or value in ("0", "1"):
        return int(value)
    raise JudgeError(f"relevance must be 0 or 1, got {value!r}")


def _oracle_id(value: Any) -> OracleId:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "null", "")):
        return None
    if isinstance(value, bool):
        raise JudgeError(f"an oracle id must be a number or 'None', got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise JudgeError(f"an oracle id must be a number or 'None', got {value!r}")


def _verification(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if value in (0, 1) or value in ("0", "1"):
        return int(value)
    if isinstance(value, str) and value.strip().lower() in ("yes", "true", "correct"):
        return 1
    if isinstance(value, str) and value.strip().lower() in ("no", "false", "incorrect"):
        return 0
    raise JudgeError(f"a verification must be 0 or 1, got {value!r}")


def align(
    units: Sequence[Unit], answer: Sequence[dict[str, Any]], field_name: str, convert: Callable[[Any], Any]
) -> list[Any]:
    """``convert(entry[field_name])`` for every unit, found by its fact text; JudgeError if facts are missing."""
    values: dict[str, Any] = {}
    for entry in answer:
        fact = entry.get("fact")
        if isinstance(fact, str) and field_name in entry:
            values.setdefault(_key(fact), convert(entry[field_name]))
    missing = [u.fact for u in units if _key(u.fact) not in values]
    if missing:
        raise JudgeError(f"the answer leaves out {len(missing)} of {len(units)} facts")
    return [values[_key(u.fact)] for u in units]


def _facts_block(rows: list[dict[str, Any]]) -> str:
    return "```json\n[\n" + ",\n".join("  " + json.dumps(r, ensure_ascii=False) for r in rows) + "\n]\n```"


class ChatJudge:
    """DCScore's judge over a :class:`ChatClient` (module docstring)."""

    name = "chat"

    def __init__(
        self,
        client: ChatClient,
        *,
        images_dir: Path | None = None,
        max_tokens: int = 2000,
        temperatures: tuple[float, float, float] = (1.0, 1.0, 0.3),
    ) -> None:
        self.client, self.images_dir, self.max_tokens = client, images_dir, max_tokens
        self.temperatures = temperatures

    def _messages(self, prompt: str, image: Path | None = None) -> list[dict[str, Any]]:
        content: str | list[dict[str, Any]] = prompt
        if image is not None:
            mime = IMAGE_TYPES.get(image.suffix.lower(), "image/jpeg")
            data = base64.b64encode(image.read_bytes()).decode("ascii")
            content = [
                {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}", "detail": "high"}},
                {"type": "text", "text": prompt},
            ]
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": content}]

    def decompose(self, item: CaptionItem) -> tuple[list[Unit], int]:
        texts, tokens = self.client.complete(
            self._messages(DECOMPOSE_PROMPT.replace("<<caption>>", item.caption)),
            temperature=self.temperatures[0],
            n=1,
            max_tokens=self.max_tokens,
        )
        units = []
        for entry in parse_json_list(texts[0]):
            fact = entry.get("fact")
            if not isinstance(fact, str) or not fact.strip():
                raise JudgeError("a decomposed unit has no fact text")
            ident = entry.get("identifier")
            units.append(
                Unit(
                    fact.strip(),
                    _relevance(entry.get("relevance")),
                    ident if isinstance(ident, str) and ident.strip() else None,
                )
            )
        return units, tokens

    @staticmethod
    def _unit_rows(units: Sequence[Unit]) -> list[dict[str, Any]]:
        return [{k: v for k, v in u.to_dict().items() if k != "relevance"} for u in units]

    def match(self, item: CaptionItem, units: Sequence[Unit], n: int) -> tuple[list[list[OracleId]], int]:
        if not units:
            return [[] for _ in range(n)], 0
        prompt = MATCH_PROMPT.replace("<<candidate>>", _facts_block(self._unit_rows(units))).replace(
            "<<oracle>>", _facts_block([{"id": i, "fact": f} for i, f in enumerate(item.oracle_facts)])
        )
        texts, tokens = self.client.complete(
            self._messages(prompt), temperature=self.temperatures[1], n=n, max_tokens=self.max_tokens
        )
        return [align(units, parse_json_list(t), "matched_oracle_id", _oracle_id) for t in texts], tokens

    def verify(self, item: CaptionItem, units: Sequence[Unit], n: int) -> tuple[list[list[int]], int]:
        if not units:
            return [[] for _ in range(n)], 0
        prompt = VERIFY_PROMPT.replace("<<reference>>", item.oracle_caption).replace(
            "<<facts>>", _facts_block(self._unit_rows(units))
        )
        image = self.images_dir / item.image if self.images_dir is not None else None
        texts, tokens = self.client.complete(
            self._messages(prompt, image), temperature=self.temperatures[2], n=n, max_tokens=self.max_tokens
        )
        return [align(units, parse_json_list(t), "verification", _verification) for t in texts], tokens
