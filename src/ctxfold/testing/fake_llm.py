"""A local stand-in for the OpenAI and Anthropic HTTP APIs, for testing LLM summarizers.

`FakeLLMServer` listens on 127.0.0.1 (a free port), answers `POST /v1/chat/completions` like
OpenAI Chat Completions and `POST /v1/messages` like the Anthropic Messages API, and records
every request. Point the real SDK clients at it, so the code under test goes through the same
HTTP, retries, timeouts and error classes as in production::

    with FakeLLMServer() as server:
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="test")
        summarizer = OpenAISummarizer("gpt-4o-mini", client=client)
        ...
        assert server.requests[0].body["messages"][0]["role"] == "system"

What it answers is scripted with modes: ``"ok"`` (a completion whose text is `reply(request)`),
``"error"`` (a 500), ``"slow"`` (an ok answer after `slow_seconds`), ``"overflow"`` (each API's
real context-length error), ``"overflow_output"`` (the error for a prompt that fits but not with
the output it asked room for: Anthropic's "exceed context limit", OpenAI's "you requested"),
``"empty"`` (a completion with no text), ``"echo"`` (a completion that repeats the prompt's
last user message), ``"unauthorized"`` (a 401 whose message quotes the key the request
carried, as some proxies answer: what a caller must not pass on), ``"garbled"`` (a 200 whose
body, labelled JSON, is an HTML page) and ``"no_choices"`` (an OpenAI completion with no choices).
`enqueue` sets the next answers one by one; after them, `mode` applies. With `max_context`, a
request whose estimated size exceeds it gets the overflow error, as a real model would answer.
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from types import TracebackType
from typing import Any, Literal

from ctxfold.errors import ConfigurationError

Mode = Literal[
    "ok",
    "error",
    "slow",
    "overflow",
    "overflow_output",
    "empty",
    "echo",
    "unauthorized",
    "garbled",
    "no_choices",
]
Api = Literal["openai", "anthropic"]

MAX_BODY_BYTES = 32 * 1024 * 1024
"""Larger request bodies get a 413 instead of being read."""

_PATHS: dict[str, Api] = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}
_USER_ENTRY = re.compile(r"^\[\d+\] user:$")
_IDENTIFIER = re.compile(r"(?:https?://\S+|[\w.-]*/[\w./-]+|\b[0-9a-f]{7,40}\b|\b\w+_\w*\d\w*\b)")


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received: which API, the path, headers and the JSON body."""

    api: Api
    path: str
    headers: Mapping[str, str]
    body: Mapping[str, Any]

    @property
    def system(self) -> str:
        """The system prompt, whichever API carried it."""
        if self.api == "anthropic":
            return _text_of(self.body.get("system"))
        return "\n".join(
            _text_of(m.get("content"))
            for m in self.body.get("messages", [])
            if m["role"] == "system"
        )

    @property
    def user(self) -> str:
        """The text of the user messages, joined."""
        return "\n".join(
            _text_of(m.get("content")) for m in self.body.get("messages", []) if m["role"] == "user"
        )

    @property
    def estimated_tokens(self) -> int:
        """A rough size of the prompt (characters / 4), the server's stand-in for a tokenizer."""
        return (len(self.system) + len(self.user) + 3) // 4


def default_reply(request: RecordedRequest) -> str:
    """A plausible sectioned summary of the record in the request's user message: the start of
    the first user line as the objective, and a few path-, URL-, hash- and id-like words."""
    record = request.user
    lines = [line.strip() for line in record.splitlines() if line.strip()]
    # The fence lines and the record's preface are framing, not content.
    body = [line for line in lines if "ctxfold record" not in line]
    objective = next(
        (after for before, after in pairwise(body) if _USER_ENTRY.match(before)),
        body[0] if body else "nothing",
    )
    found = [i for i in dict.fromkeys(_IDENTIFIER.findall("\n".join(body))) if i][:8]
    return "\n".join(
        [
            "## Objective",
            f"- {' '.join(objective.split()[:12])}",
            "## Decisions",
            "- nothing",
            "## Work done",
            f"- read a record of {len(body)} lines",
            "## Identifiers",
            *(f"- {identifier}" for identifier in found or ["nothing"]),
            "## Outstanding",
            "- continue from the latest step",
        ]
    )


class FakeLLMServer:
    """A threaded HTTP server on 127.0.0.1 answering like the OpenAI and Anthropic APIs.

    - `reply`: makes the text of an ok answer from the recorded request (default: `default_reply`).
    - `mode`: what every request gets once the `enqueue`d answers are used up (default ``"ok"``).
    - `slow_seconds`: how long a ``"slow"`` answer waits (seconds); shutdown cuts the wait short.
    - `max_context`: when set, any request estimated above this many tokens gets the overflow error.

    Use it as a context manager; it stops and frees its port on exit.
    """

    def __init__(
        self,
        reply: Callable[[RecordedRequest], str] = default_reply,
        *,
        mode: Mode = "ok",
        slow_seconds: float = 2.0,
        max_context: int | None = None,
    ) -> None:
        self.reply = reply
        self.mode: Mode = mode
        self.slow_seconds = slow_seconds
        self.max_context = max_context
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Mode] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def enqueue(self, *modes: Mode) -> None:
        """Answer the next requests with these modes, in order, then go back to `mode`."""
        with self._lock:
            self._queue.extend(modes)

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise ConfigurationError("the server is not running; use it as a context manager")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """What to pass as `base_url` to `openai.OpenAI`."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """What to pass as `base_url` to `anthropic.Anthropic`."""
        return self.url

    def start(self) -> FakeLLMServer:
        self._stopping.clear()
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        # A short poll interval makes stop() quick; the server is idle between test requests.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _next_mode(self, request: RecordedRequest) -> Mode:
        with self._lock:
            self.requests.append(request)
            mode = self._queue.popleft() if self._queue else self.mode
        if self.max_context is not None and request.estimated_tokens > self.max_context:
            return "overflow"
        return mode

    def _answer(self, request: RecordedRequest) -> tuple[int, dict[str, Any] | str]:
        mode = self._next_mode(request)
        if mode == "slow":
            # A wait that shutdown interrupts, so a test never hangs on a slow answer.
            self._stopping.wait(self.slow_seconds)
        if mode == "error":
            return 500, _server_error(request.api)
        if mode == "unauthorized":
            return 401, _unauthorized_error(request)
        if mode == "garbled":
            return 200, _GARBLED
        if mode == "overflow":
            return 400, _overflow_error(request.api, request.estimated_tokens, self.max_context)
        if mode == "overflow_output":
            return 400, _output_overflow_error(request, self.max_context)
        text = {"empty": "", "echo": request.user}.get(mode)
        if text is None:
            text = self.reply(request)
        answer = _completion(request, text)
        if mode == "no_choices" and request.api == "openai":
            answer["choices"] = []
        return 200, answer


class _Handler(BaseHTTPRequestHandler):
    fake: FakeLLMServer
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        api = _PATHS.get(self.path.split("?", 1)[0])
        length = int(self.headers.get("content-length") or 0)
        if api is None:
            self._send(
                404, {"error": {"message": f"no route for {self.path}", "type": "not_found"}}
            )
            return
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            self._send(413, {"error": {"message": "request too large", "type": "too_large"}})
            return
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError as exc:
            self._send(400, {"error": {"message": f"invalid JSON: {exc}", "type": "bad_json"}})
            return
        headers = {key.lower(): value for key, value in self.headers.items()}
        status, payload = self.fake._answer(RecordedRequest(api, self.path, headers, body))
        self._send(status, payload)

    def _send(self, status: int, payload: Mapping[str, Any] | str) -> None:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        data = text.encode()
        try:
            self.send_response(status)
            # Said to be JSON even when it is not ("garbled"): what a misconfigured proxy sends.
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            # Retry quickly: the SDKs honour this header, so retried tests stay fast.
            self.send_header("retry-after-ms", "10")
            # One request per connection: the client closes its socket once it has read the
            # answer, so a client a test never closes leaves no socket open for the garbage
            # collector to warn about in some later test.
            self.send_header("connection", "close")
            self.close_connection = True
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test); nothing left to answer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean


def _text_of(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def _completion(request: RecordedRequest, text: str) -> dict[str, Any]:
    model = str(request.body.get("model", "unknown"))
    prompt_tokens = request.estimated_tokens
    output_tokens = (len(text) + 3) // 4
    if request.api == "anthropic":
        return {
            "id": f"msg_fake{len(text)}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}] if text else [],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": prompt_tokens, "output_tokens": output_tokens},
        }
    return {
        "id": f"chatcmpl-fake{len(text)}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": prompt_tokens + output_tokens,
        },
    }


_GARBLED = "<html><body><h1>502 Bad Gateway</h1></body></html>"
"""What a proxy in the way answers, with status 200 as some do."""


def _unauthorized_error(request: RecordedRequest) -> dict[str, Any]:
    headers = {key.lower(): value for key, value in request.headers.items()}
    given = headers.get("x-api-key") or headers.get("authorization", "")
    if request.api == "anthropic":
        return {
            "type": "error",
            "error": {"type": "authentication_error", "message": f"invalid credentials: {given}"},
        }
    return {
        "error": {
            "message": f"Incorrect API key provided: {given}.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }


def _server_error(api: Api) -> dict[str, Any]:
    if api == "anthropic":
        return {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}
    return {
        "error": {
            "message": "The server had an error while processing your request.",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }


def _overflow_error(api: Api, tokens: int, limit: int | None) -> dict[str, Any]:
    maximum = limit if limit is not None else max(tokens - 1, 1)
    tokens = max(tokens, maximum + 1)
    if api == "anthropic":
        return {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": f"prompt is too long: {tokens} tokens > {maximum} maximum",
            },
        }
    return {
        "error": {
            "message": (
                f"This model's maximum context length is {maximum} tokens. However, your "
                f"messages resulted in {tokens} tokens. Please reduce the length of the messages."
            ),
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def _output_overflow_error(request: RecordedRequest, limit: int | None) -> dict[str, Any]:
    """The 400 for a prompt that fits the window but not with the output the request asked for."""
    tokens = request.estimated_tokens
    maximum = limit if limit is not None else tokens + 1
    asked = max(int(request.body.get("max_tokens") or 0), maximum - tokens + 1)
    if request.api == "anthropic":
        return {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": f"input length and `max_tokens` exceed context limit: {tokens} + "
                f"{asked} > {maximum}, decrease input length or `max_tokens` and try again",
            },
        }
    return {
        "error": {
            "message": (
                f"This model's maximum context length is {maximum} tokens. However, you "
                f"requested {tokens + asked} tokens ({tokens} in the messages, {asked} in the "
                "completion). Please reduce the length of the messages or completion."
            ),
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
