"""A small OpenAI-compatible HTTP server on 127.0.0.1 so tests call models over real HTTP.

Usage::

    from tests.evaluation.openai_server import openai_server

    with openai_server(responder=lambda prompt, body: "answer", failures=[429, "timeout"]) as server:
        server.base_url        # "http://127.0.0.1:PORT/v1", the api_base of a ModelCall
        ...                    # call the model
        server.requests        # every request received, failed ones included, in order
        server.requests[-1].prompt, .body, .headers["Authorization"], .path, .failure
        server.chat_requests   # only the POST /v1/chat/completions ones

Endpoints: ``POST /v1/chat/completions`` answers a ``chat.completion`` whose
``choices[0].message.content`` is ``responder(prompt, body)``; ``prompt`` is the content of the last
user message. A responder may return a dict instead: the assistant message itself (e.g. with ``tool_calls``, each
``{"id", "type": "function", "function": {"name", "arguments"}}``), answered with finish reason ``tool_calls``.
``GET /v1/models`` lists the model names requested so far (or ``test-model``).

``failures`` is a script consumed one entry per chat completion request before normal answers:
an int is returned as that HTTP status with an OpenAI-style error body; ``"timeout"`` sleeps
``timeout_seconds`` (default 2 s, longer than a test client's tiny timeout) then answers normally;
``"close"`` drops the connection without a response; ``"context"`` answers as OpenAI does a request past the
model's context window (HTTP 400, code ``context_length_exceeded``). With ``context_tokens`` set, every request
whose messages hold more tokens than that is answered so too. With ``slow_tokens`` set, every request whose messages
hold more tokens than that waits ``timeout_seconds`` before its answer, as a provider slows on a long prompt. With
``large_tokens`` set, every request whose messages hold more tokens than that is answered with ``large_failure``
instead (an HTTP status, default 429 worded as a tokens-per-minute limit the request alone exceeds, or ``"close"``).
With ``thinking_budget`` set, a request with ``reasoning_effort`` whose ``max_tokens`` (or ``max_completion_tokens``)
is not above it is refused with a 400, as Anthropic refuses a ``max_tokens`` not above ``thinking.budget_tokens``.
``retry_after`` (seconds), when set, is sent as a ``Retry-After`` header on 429 and 503 answers. A 401 quotes the
presented key back in its message, as OpenAI does, so tests can check that callers scrub it.

`provider_environment(server)` (a worker's environment) and `with platform_provider(server):` make the server the
platform's configured provider (OPENAI_BASE_URL): register the model without api_base there. A model whose api_base
is the server calls an endpoint its owner runs, whose failures count against it (outcomes.model_call_failed).

``tls=True`` serves HTTPS instead (``https://127.0.0.1:PORT/v1``) with a certificate for 127.0.0.1 and
localhost from a throwaway CA whose file is ``server.ca_file`` (point ``SSL_CERT_FILE`` at it).

Token counts are whitespace-separated words of the prompt and of the answer (for ``context_tokens``: of every
message's content and tool calls), so tests can predict them. A responder that raises produces a 500 (which clients
retry); one that raises ``Refused(status)`` answers that HTTP status as a scripted failure does, so a server can
refuse some items and answer others. ``server.failures`` can be extended while the server runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.message import Message
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

Responder = Callable[[str, dict], str]
Failure = int | str


class Refused(Exception):
    """Raised by a responder: the request is answered with HTTP `status` (an OpenAI-style error), not a 500."""

    def __init__(self, status: int):
        super().__init__(status)
        self.status = status


def echo_responder(prompt: str, body: dict) -> str:
    """The default answer: says which prompt it saw."""
    return f"echo: {prompt}"


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: Message  # case-insensitive: headers["Authorization"]
    body: dict
    failure: Failure | None  # the scripted failure served for this request, None when answered

    @property
    def prompt(self) -> str:
        return _last_user_message(self.body)


@dataclass
class OpenAIServer:
    responder: Responder = echo_responder
    failures: list[Failure] = field(default_factory=list)
    timeout_seconds: float = 2.0
    retry_after: float | None = None
    context_tokens: int | None = None
    slow_tokens: int | None = None
    large_tokens: int | None = None
    large_failure: Failure = 429
    thinking_budget: int | None = None
    requests: list[RecordedRequest] = field(default_factory=list, repr=False)
    base_url: str = ""
    ca_file: str = ""
    stopping: threading.Event = field(default_factory=threading.Event, repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def next_failure(self) -> Failure | None:
        with self.lock:
            return self.failures.pop(0) if self.failures else None

    def record(self, request: RecordedRequest) -> None:
        with self.lock:
            self.requests.append(request)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]


def _last_user_message(body: dict) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # content parts
                return "".join(part.get("text", "") for part in content if isinstance(part, dict))
            return content or ""
    return ""


def _scripted_failure(server: OpenAIServer, failure: int, authorization: str) -> tuple[dict, dict[str, str]]:
    """The error body and headers of a scripted HTTP failure, as OpenAI words them."""
    headers = {}
    if server.retry_after is not None and failure in (429, 503):
        headers["Retry-After"] = f"{server.retry_after:g}"
    phrase = HTTPStatus(failure).phrase if failure in HTTPStatus._value2member_map_ else "error"
    kind = "rate_limit_error" if failure == 429 else "server_error" if failure >= 500 else "invalid_request_error"
    message = f"scripted failure: {failure} {phrase}"
    if failure == 429 and server.large_tokens is not None:
        message = f"Request too large for m: Limit {server.large_tokens}, Requested more. (tokens per min (TPM))"
    if failure == 401:  # like OpenAI, quote the key back, so tests can prove callers scrub it
        message += f"; incorrect API key provided: {authorization.removeprefix('Bearer ')}"
    return _error(message, kind), headers


CONTEXT = "context_length_exceeded"  # OpenAI's error code for a request past the model's context window


def messages_tokens(body: dict) -> int:
    """The request's tokens as `context_tokens` counts them: the words of every message's content and tool calls."""
    return sum(
        len(str(message.get("content") or "").split())
        + (len(json.dumps(message["tool_calls"]).split()) if message.get("tool_calls") else 0)
        for message in body.get("messages") or []
        if isinstance(message, dict)
    )


def _context_exceeded(window: int, tokens: int) -> dict:
    """OpenAI's answer to a request past the model's context window (with HTTP 400)."""
    message = (
        f"This model's maximum context length is {window} tokens. However, your messages resulted in {tokens} "
        "tokens. Please reduce the length of the messages."
    )
    return {"error": {"message": message, "type": "invalid_request_error", "param": "messages", "code": CONTEXT}}


def _handler_for(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # quiet test output
            pass

        def _read_body(self) -> dict:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                return json.loads(raw) if raw else {}
            except ValueError:
                return {"_raw": raw.decode("utf-8", "replace")}

        def _send_json(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            server.record(RecordedRequest("GET", self.path, self.headers, {}, None))
            if self.path.rstrip("/").endswith("/models"):
                names = sorted({r.body.get("model") for r in server.chat_requests if r.body.get("model")})
                data = [
                    {"id": n, "object": "model", "created": 0, "owned_by": "tests"} for n in names or ["test-model"]
                ]
                self._send_json(200, {"object": "list", "data": data})
            else:
                self._send_json(404, _error("not found", "invalid_request_error"))

        def do_POST(self) -> None:
            body = self._read_body()
            if not self.path.rstrip("/").endswith("/chat/completions"):
                server.record(RecordedRequest("POST", self.path, self.headers, body, None))
                self._send_json(404, _error("not found", "invalid_request_error"))
                return
            tokens = messages_tokens(body)
            failure = server.next_failure() or _large_failure(server, tokens)
            server.record(RecordedRequest("POST", self.path, self.headers, body, failure))
            if failure == "close":
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(2)
                return
            if refusal := _refusal(server, body, failure, tokens):
                self._send_json(400, refusal)
                return
            if failure == "timeout" or (server.slow_tokens is not None and tokens > server.slow_tokens):
                server.stopping.wait(server.timeout_seconds)
            elif isinstance(failure, int):
                payload, headers = _scripted_failure(server, failure, self.headers.get("Authorization", ""))
                self._send_json(failure, payload, headers)
                return
            prompt = _last_user_message(body)
            try:
                text = server.responder(prompt, body)
            except Exception as exc:  # a broken responder shows as a server error, not a hung client
                self._send_json(*_responder_failed(server, exc, self.headers.get("Authorization", "")))
                return
            message = {"role": "assistant", "content": text} if isinstance(text, str) else {"role": "assistant", **text}
            text = message.get("content") or ""
            prompt_tokens, completion_tokens = len(prompt.split()), len(text.split())
            with contextlib.suppress(OSError):  # the client may have given up on a slow answer
                self._send_json(
                    200,
                    {
                        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "test-model"),
                        "choices": [
                            {
                                "index": 0,
                                "message": message,
                                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": prompt_tokens,
                            "completion_tokens": completion_tokens,
                            "total_tokens": prompt_tokens + completion_tokens,
                        },
                    },
                )

    return Handler


def _responder_failed(server: OpenAIServer, exc: Exception, authorization: str) -> tuple[int, dict, dict[str, str]]:
    """The answer to a request whose responder raised: the status it asked for (`Refused`), else a server error."""
    if isinstance(exc, Refused):
        return exc.status, *_scripted_failure(server, exc.status, authorization)
    return 500, _error(f"responder failed: {exc!r}", "server_error"), {}


def _large_failure(server: OpenAIServer, tokens: int) -> Failure | None:
    """The failure a request of `tokens` gets for its size (``large_tokens``), or None."""
    return server.large_failure if server.large_tokens is not None and tokens > server.large_tokens else None


def _refusal(server: OpenAIServer, body: dict, failure: Failure | None, tokens: int) -> dict | None:
    """The error body of a 400 the request gets for what it holds (past ``context_tokens``, an output cap not above
    ``thinking_budget``), or None."""
    if failure == "context" or (server.context_tokens is not None and tokens > server.context_tokens):
        return _context_exceeded(server.context_tokens or tokens - 1, tokens)
    cap = body.get("max_tokens") or body.get("max_completion_tokens") or 0
    if server.thinking_budget is not None and body.get("reasoning_effort") and cap <= server.thinking_budget:
        return _error("`max_tokens` must be greater than `thinking.budget_tokens`.", "invalid_request_error")
    return None


def _error(message: str, kind: str) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


@contextlib.contextmanager
def openai_server(
    responder: Responder = echo_responder,
    failures: list[Failure] | None = None,
    *,
    timeout_seconds: float = 2.0,
    retry_after: float | None = None,
    context_tokens: int | None = None,
    slow_tokens: int | None = None,
    large_tokens: int | None = None,
    large_failure: Failure = 429,
    thinking_budget: int | None = None,
    tls: bool = False,
) -> Iterator[OpenAIServer]:
    """Run the server in a thread for the duration of the block; see the module docstring."""
    state = OpenAIServer(
        responder=responder,
        failures=list(failures or []),
        timeout_seconds=timeout_seconds,
        retry_after=retry_after,
        context_tokens=context_tokens,
        slow_tokens=slow_tokens,
        large_tokens=large_tokens,
        large_failure=large_failure,
        thinking_budget=thinking_budget,
    )
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(state))
    httpd.block_on_close = False  # a handler still sleeping on a "timeout" must not delay the test
    httpd.daemon_threads = True
    with tempfile.TemporaryDirectory(prefix="openai-tls-") as folder:
        if tls:
            from tests.submissions.git_server import certificates_make

            ca_file, cert_file, key_file = certificates_make(Path(folder))
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert_file, key_file)
            # The handshake happens in the handler thread, so a client that never completes it cannot block accept().
            httpd.socket = context.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
            state.ca_file = str(ca_file)
        state.base_url = f"{'https' if tls else 'http'}://127.0.0.1:{httpd.server_address[1]}/v1"
        thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), name="openai-test-server", daemon=True)
        thread.start()
        try:
            yield state
        finally:
            state.stopping.set()
            httpd.shutdown()
            httpd.server_close()
            thread.join(timeout=5)


def provider_environment(server: OpenAIServer) -> dict[str, str]:
    """The environment that makes `server` the platform's configured OpenAI provider: litellm sends a model without
    an api_base to OPENAI_BASE_URL with the platform's OPENAI_API_KEY (an internal proxy, as a deployment sets it).
    A failure there is the provider's (an unscored error, retried); at a model's api_base it is its owner's
    (outcomes.model_call_failed). Pass it to a worker's start, or see platform_provider."""
    return {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_BASE": server.base_url, "OPENAI_API_KEY": "sk-platform"}


@contextlib.contextmanager
def platform_provider(server: OpenAIServer) -> Iterator[OpenAIServer]:
    """`server` as the platform's configured provider in this process for the block (provider_environment)."""
    saved = {name: os.environ.get(name) for name in provider_environment(server)}
    os.environ.update(provider_environment(server))
    try:
        yield server
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
