"""``gitmem.serving``: the bind policy, the Host list and the bearer-token middleware, called
directly (the subprocess tests in test_mcp_http.py cover them through ``gitmem mcp``)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from gitmem.errors import GitmemError, ValidationError
from gitmem.serving import (
    TokenRouter,
    allowed_hosts,
    allowed_origins,
    bind,
    check_bind,
    is_loopback,
)

TOKEN = "0123456789abcdef-token"


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.0.0.2", "localhost", "LocalHost", "::1", "[::1]"]
)
def test_loopback_addresses(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize(
    "host", ["0.0.0.0", "::", "192.0.2.10", "10.0.0.1", "example.com", "localhost.example.com", ""]
)
def test_other_addresses_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)


def test_check_bind() -> None:
    check_bind("127.0.0.1", None, what="x", env="E")
    check_bind("0.0.0.0", TOKEN, what="x", env="E")
    with pytest.raises(ValidationError, match=r"x: binding to '0.0.0.0'.*--token or E"):
        check_bind("0.0.0.0", None, what="x", env="E")
    with pytest.raises(ValidationError, match=r"binding to '::'"):
        check_bind("::", None, what="x", env="E")
    # a short token is refused on loopback too: it would be the one guard on a shared host
    with pytest.raises(ValidationError, match="the token is 15 characters long"):
        check_bind("127.0.0.1", "x" * 15, what="x", env="E")


@pytest.mark.parametrize(
    "token", [" " * 16, "\t" * 20, f" {TOKEN}", f"{TOKEN}\n", f"{TOKEN}\u00a0", f"abc\x00{TOKEN}"]
)
def test_blank_padded_or_control_tokens_are_refused(token: str) -> None:
    # a header cannot carry them: one server would accept nobody, the other a blank login
    with pytest.raises(
        ValidationError,
        match=r"x: the token (is blank|starts or ends with "
        r"white space|holds a control character)",
    ):
        check_bind("127.0.0.1", token, what="x", env="E")
    check_bind("127.0.0.1", "inner space is fine ok", what="x", env="E")


def test_allowed_hosts_name_the_port_and_never_the_wildcard_address() -> None:
    hosts = allowed_hosts("0.0.0.0", 8123, ("memory.example",))
    assert {
        "127.0.0.1:8123",
        "localhost:8123",
        "[::1]:8123",
        "memory.example",
        "memory.example:8123",
    } <= set(hosts)
    assert not any(h.startswith("0.0.0.0") for h in hosts)
    assert "192.0.2.10:8123" in allowed_hosts("192.0.2.10", 8123)
    # bound to every interface: this machine's own name is how other machines reach it
    assert f"{socket.gethostname()}:8123" in hosts
    assert "[fd00::2]:8123" in allowed_hosts("fd00::2", 8123)
    assert len(hosts) == len(set(hosts))
    origins = allowed_origins(["localhost:8123"])
    assert origins == ["http://localhost:8123", "https://localhost:8123"]


def _call(app: Any, scope: dict[str, Any]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    asyncio.run(app(scope, receive, send))
    return sent


def test_one_bearer_token() -> None:
    reached: list[str] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["type"])
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})

    app = TokenRouter([(TOKEN, inner)])  # the lifespan: see the router's test below
    for given in (
        None,
        b"Bearer wrong",
        TOKEN.encode(),
        f"Bearer {TOKEN}x".encode(),
        f"Basic {TOKEN}".encode(),
        f"Bearer{TOKEN}".encode(),
        b"Bearer",
        f"Bearer {TOKEN[:-1]}".encode(),
    ):
        headers = [] if given is None else [(b"authorization", given)]
        sent = _call(app, {"type": "http", "headers": headers})
        assert sent[0]["status"] == 401, given
        assert (b"www-authenticate", b'Bearer realm="gitmem"') in sent[0]["headers"]
        assert b"Authorization: Bearer" in sent[1]["body"]
    assert reached == []
    # the scheme is case-insensitive and may be followed by several spaces (RFC 9110)
    for given in (f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER  {TOKEN}", f"Bearer {TOKEN} "):
        sent = _call(app, {"type": "http", "headers": [(b"Authorization", given.encode())]})
        assert sent[0]["status"] == 200, given
    assert reached == ["http", "http", "http", "http"]


def test_bind_reports_a_taken_port() -> None:
    taken = bind("127.0.0.1", 0)
    try:
        port = taken.getsockname()[1]
        with pytest.raises(GitmemError, match=rf"cannot listen on 127.0.0.1:{port}: "):
            # SO_REUSEADDR does not let a second socket listen on a port in LISTEN state
            bind("127.0.0.1", port)
    finally:
        taken.close()
    free = bind("127.0.0.1", 0)
    try:
        assert free.getsockname()[1] > 0
        assert free.type == socket.SOCK_STREAM
    finally:
        free.close()


def test_token_router_sends_each_token_to_its_app_and_starts_them_all() -> None:
    events: list[str] = []

    def app(name: str, *, fail: bool = False) -> Any:
        async def inner(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "lifespan":
                while True:
                    event = (await receive())["type"].split(".")[-1]
                    events.append(f"{name} {event}")
                    if fail:
                        await send({"type": "lifespan.startup.failed", "message": "no"})
                        return
                    await send({"type": f"lifespan.{event}.complete"})
                    if event == "shutdown":
                        return
            await send({"type": "http.response.start", "status": 200, "headers": [name]})

        return inner

    alice, bob = app("alice"), app("bob")
    router = TokenRouter([(TOKEN, alice), ("bob-" + TOKEN, bob), ("x" + TOKEN, alice)])
    for given, reached in ((TOKEN, "alice"), ("bob-" + TOKEN, "bob"), ("x" + TOKEN, "alice")):
        sent = _call(
            router, {"type": "http", "headers": [(b"authorization", b"Bearer " + given.encode())]}
        )
        assert sent[0]["headers"] == [reached]
    for headers in ([], [(b"authorization", b"Bearer bob")]):
        assert _call(router, {"type": "http", "headers": headers})[0]["status"] == 401

    def lifespan(target: TokenRouter) -> list[str]:
        queue = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
        said: list[str] = []

        async def receive() -> Any:
            return next(queue)

        async def send(message: Any) -> None:
            said.append(message["type"])

        asyncio.run(target({"type": "lifespan"}, receive, send))
        return said

    assert lifespan(router) == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert events == ["alice startup", "bob startup", "bob shutdown", "alice shutdown"]
    events.clear()
    broken = TokenRouter([(TOKEN, alice), ("bob-" + TOKEN, app("bob", fail=True))])
    assert lifespan(broken) == ["lifespan.startup.failed"]
    assert events == ["alice startup", "bob startup", "alice shutdown"]
