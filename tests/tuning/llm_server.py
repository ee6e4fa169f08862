"""A local OpenAI-compatible server for tests: the real openai client talks HTTP to it.

It listens on 127.0.0.1 (an ephemeral port) in a thread and speaks ``/v1/chat/completions``
and ``/v1/models``. Each chat request takes the next item of a script: a ``Reply`` (a
message, an HTTP error, a delay) or a function of the ``Request`` that returns one; when
the script runs out, ``default`` answers (a Reply or a function; without one, HTTP 500).
Every request is kept in ``requests``.

    with LLMServer([Reply(status=429), Reply(config_reply(configs))]) as server:
        client = openai.OpenAI(api_key="k", base_url=server.url, max_retries=1)
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Sequence, Union


@dataclass
class Reply:
    """One answer. ``content``: the assistant's message (status 200); otherwise ``error``
    is the message of an OpenAI-style error body. ``delay``: seconds before answering."""

    content: str | None = None
    status: int = 200
    error: str = "error"
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Request:
    path: str
    headers: dict[str, str]  # names in lower case
    body: dict[str, Any]

    @property
    def response_format(self) -> str | None:
        """The ``response_format`` type asked for, if any."""
        fmt = self.body.get("response_format")
        return fmt.get("type") if isinstance(fmt, dict) else None

    def text(self) -> str:
        """Every message's content, joined (the prompt as the model sees it)."""
        return "\n".join(str(m.get("content", "")) for m in self.body.get("messages", []))


Script = Union[Reply, Callable[[Request], Reply]]


def config_reply(configs: Iterable[Any], rationale: str = "fits the problem") -> str:
    """The JSON message proposing ``configs`` (KernelConfigs or plain dicts)."""
    items = []
    for i, config in enumerate(configs):
        fields = config if isinstance(config, dict) else config.model_dump()
        items.append({"rationale": f"{rationale} ({i})", **fields})
    return json.dumps({"configs": items})


def in_turn(configs: Sequence[Any], n: int) -> Callable[[Request], Reply]:
    """A script item (or ``default``) that proposes the next ``n`` of ``configs`` each time
    it is asked, for runs of several generations."""
    position = 0

    def reply(request: Request) -> Reply:
        nonlocal position
        position += n
        return Reply(config_reply(configs[position - n:position]))

    return reply


def _words(text: str) -> int:
    return len(text.split())


class LLMServer:
    """See the module docstring. ``reject_formats``: ``response_format`` types answered
    with HTTP 400 without taking a script item (llama.cpp servers reject "json_schema").
    Usage is reported as whitespace-separated words (prompt and reply)."""

    def __init__(self, script: Iterable[Script] = (), *, default: Script | None = None,
                 reject_formats: tuple[str, ...] = (), models: tuple[str, ...] = ("test-model",)) -> None:
        self.script = list(script)
        self.default = default
        self.reject_formats = reject_formats
        self.models = models
        self.requests: list[Request] = []
        self.usage: list[tuple[int, int]] = []  # (prompt, completion) tokens of each reply sent
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None, "start the server first (with LLMServer(...) as server)"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> "LLMServer":
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()  # wakes handlers sleeping through a delay
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()

    def chat_requests(self) -> list[Request]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def _answer(self, request: Request) -> tuple[Reply, dict]:
        with self._lock:
            self.requests.append(request)
            if request.response_format in self.reject_formats:
                return Reply(status=400, error=f"response_format type {request.response_format} is not supported"), {}
            item = self.script.pop(0) if self.script else self.default
        if item is None:
            return Reply(status=500, error="the test script has no more replies"), {}
        reply = item(request) if callable(item) else item
        if reply.status != 200:
            return reply, {}
        usage = (_words(request.text()), _words(reply.content or ""))
        with self._lock:
            self.usage.append(usage)
        return reply, {
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
            "model": request.body.get("model", ""),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": reply.content}}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
        }


def _handler(server: LLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                with server._lock:
                    server.requests.append(Request(self.path, {k.lower(): v for k, v in self.headers.items()}, {}))
                self._send(200, {"object": "list", "data": [
                    {"id": m, "object": "model", "created": 0, "owned_by": "test"} for m in server.models]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                body = {}
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            reply, payload = server._answer(Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            if reply.delay and server._stop.wait(reply.delay):
                return  # shutting down: the client gave up long ago
            if reply.status != 200:
                payload = {"error": {"message": reply.error, "type": "test_error", "code": reply.status}}
            self._send(reply.status, payload, reply.headers)

        def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and closed the connection

    return Handler
