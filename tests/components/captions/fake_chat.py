"""A fake OpenAI-compatible chat-completions server on loopback for the judge's tests (no network): it records
every request and answers each from ``respond(body) -> (status, body dict or text, headers)``."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Response = tuple[int, Any, dict[str, str]]


class FakeChatServer:
    def __init__(self, respond: Callable[[dict[str, Any]], Response]) -> None:
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                status, answer, headers = respond(body)
                data = (answer if isinstance(answer, str) else json.dumps(answer)).encode()
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def choices(texts: list[str], usage: tuple[int, int] = (100, 10)) -> dict[str, Any]:
    """A chat-completions answer body with one choice per text."""
    return {
        "choices": [{"message": {"role": "assistant", "content": t}} for t in texts],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]},
    }
