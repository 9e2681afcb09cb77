"""A real HTTP server on 127.0.0.1 that speaks the Chat Completions wire format.

Tests script its answers per request (a queue of handlers, then a default one) and read
back every request the ``openai`` client really sent.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

Reply = tuple[int, dict[str, str], bytes]
Handler = Callable[[dict[str, Any]], Reply]


def completion(content: str, *, model: str = "fake-model") -> Reply:
    """A successful chat completion whose message is ``content``."""
    body = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }
    return 200, {}, json.dumps(body).encode()


def error(status: int, message: str, *, headers: dict[str, str] | None = None) -> Reply:
    """An OpenAI-style error body."""
    body = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    return status, dict(headers or {}), json.dumps(body).encode()


def structured(
    summary: str, facts: Sequence[str], entities: Sequence[str] = (), tags: Sequence[str] = ()
) -> str:
    """The JSON text of a good structured answer."""
    return json.dumps(
        {
            "summary": summary,
            "key_facts": list(facts),
            "entities": list(entities),
            "tags": list(tags),
        }
    )


def vector_of(text: str, dims: int, synonyms: dict[str, str] | None = None) -> list[float]:
    """A deterministic unit vector: a hashed bag of the text's stemmed words. ``synonyms``
    maps a word to another whose bucket it shares (planted paraphrases)."""
    from gitmem.text import terms  # the same stemming as the index

    aliases = {terms(k)[0]: terms(v)[0] for k, v in (synonyms or {}).items()}
    vector = [0.0] * dims
    for term in terms(text):
        term = aliases.get(term, term)
        digest = hashlib.blake2b(term.encode(), digest_size=8).digest()
        vector[int.from_bytes(digest, "little") % dims] += 1.0
    norm = math.sqrt(sum(x * x for x in vector))
    if not norm:  # a text with no words: one fixed bucket, never all zeros
        vector[0], norm = 1.0, 1.0
    return [x / norm for x in vector]


def embeddings(
    vectors: Sequence[Sequence[float]], request: dict[str, Any], *, model: str = "fake-embed"
) -> Reply:
    """An embeddings answer with these vectors, base64 when the client asks for it."""
    base64_wanted = request.get("encoding_format") == "base64"
    data = []
    for at, vector in enumerate(vectors):
        value: Any = list(vector)
        if base64_wanted:
            value = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        data.append({"object": "embedding", "index": at, "embedding": value})
    body = {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": 1, "total_tokens": 1},
    }
    return 200, {}, json.dumps(body).encode()


def embedder(dims: int = 64, synonyms: dict[str, str] | None = None) -> Handler:
    """A handler answering ``/v1/embeddings`` with :func:`vector_of` vectors."""

    def handle(request: dict[str, Any]) -> Reply:
        texts = request.get("input") or []
        texts = [texts] if isinstance(texts, str) else texts
        size = int(request.get("dimensions") or dims)
        return embeddings([vector_of(str(t), size, synonyms) for t in texts], request)

    return handle


def mode_of(request: dict[str, Any]) -> str:
    """Which output mode a request asks for."""
    fmt = request.get("response_format") or {}
    return str(fmt.get("type", "none"))


@dataclass
class FakeServer:
    """Scriptable Chat Completions server (see module docstring)."""

    default: Handler = field(default=lambda request: completion("- nothing scripted"))
    script: list[Handler] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    server_seconds: list[float] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)
    port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def answer(self, request: dict[str, Any]) -> Reply:
        handler = self.script.pop(0) if self.script else self.default
        return handler(request)

    def sleep(self, seconds: float) -> None:
        """Sleep in a handler, cut short when the server stops."""
        self.stopping.wait(seconds)


def _handler_class(fake: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        disable_nagle_algorithm = True  # TCP_NODELAY: Nagle would add ~40 ms per answer

        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            started = time.perf_counter()
            length = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(length) or b"{}")
            fake.requests.append(request)
            fake.headers.append({k.lower(): v for k, v in self.headers.items()})
            fake.paths.append(self.path)
            status, headers, body = fake.answer(request)
            if fake.stopping.is_set():
                return
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)
            fake.server_seconds.append(time.perf_counter() - started)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def start(fake: FakeServer) -> ThreadingHTTPServer:
    """Serve ``fake`` on a free loopback port in a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_class(fake))
    server.daemon_threads = True
    fake.port = server.server_address[1]
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True, name="fake-openai"
    ).start()
    return server


@pytest.fixture
def llm_server() -> Iterator[FakeServer]:
    fake = FakeServer()
    server = start(fake)
    yield fake
    fake.stopping.set()
    server.shutdown()
    server.server_close()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
