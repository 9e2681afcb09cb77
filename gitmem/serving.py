"""Serving gitmem over HTTP: the bind policy, the bearer token and the uvicorn server.

Shared by the HTTP front ends (``gitmem mcp --transport streamable-http`` now, the web
dashboard later) so they refuse the same things: a server binds to 127.0.0.1 unless told
otherwise, and one that listens on any other address must be given a token, which every
request then has to carry (``Authorization: Bearer <token>``). The only module that imports
uvicorn. The socket is bound here, before the server starts, so ``--port 0`` can print the
port the system chose and a test can connect to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping, Sequence
from types import FrameType
from typing import Any

from gitmem.errors import ValidationError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DEFAULT_HOST = "127.0.0.1"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
# a token shorter than this is refused: it would be guessed
TOKEN_MIN = 16
_TOKEN_HINT = "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`"


def is_loopback(host: str) -> bool:
    """True if ``host`` only ever reaches this machine (127.0.0.0/8, ::1, ``localhost``)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_token(token: str, *, what: str) -> None:
    """Refuse a token no header can carry as given, or one short enough to be guessed.

    HTTP servers strip a header's surrounding white space, so a padded token would let
    nobody in (or, compared after stripping, a blank one would let anybody in).
    """
    if not token.strip():
        raise ValidationError(f"{what}: the token is blank; give a real one (e.g. {_TOKEN_HINT})")
    if token != token.strip():
        raise ValidationError(f"{what}: the token starts or ends with white space; remove it")
    if any(ord(c) < 32 or ord(c) == 127 for c in token):
        raise ValidationError(
            f"{what}: the token holds a control character; no HTTP header can carry it"
        )
    if len(token) < TOKEN_MIN:
        raise ValidationError(
            f"{what}: the token is {len(token)} characters long; give at least {TOKEN_MIN} "
            f"(e.g. {_TOKEN_HINT})"
        )


def check_bind(host: str, token: str | None, *, what: str, env: str) -> None:
    """Refuse a non-loopback bind without a token, and a token unfit to be one."""
    if token is not None:
        check_token(token, what=what)
    if not is_loopback(host) and not token:
        raise ValidationError(
            f"{what}: binding to {host!r} lets other machines connect; give a token with "
            f"--token or {env} (clients then send 'Authorization: Bearer <token>'), or bind "
            f"to {DEFAULT_HOST}"
        )


def bearer_credentials(value: str | bytes | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value, else None.

    The scheme is case-insensitive and one or more spaces follow it (RFC 9110, 11.4).
    """
    if value is None:
        return None
    # clients send a non-ASCII token as UTF-8; undecodable bytes still compare as sent
    text = value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value
    scheme, _, rest = text.strip(" \t").partition(" ")
    if scheme.lower() != "bearer" or not rest.strip(" "):
        return None
    return rest.lstrip(" ")


def token_matches(given: str | None, token: str) -> bool:
    """``given`` is ``token``, compared in the same time whatever ``given`` is."""
    return given is not None and hmac.compare_digest(
        given.encode("utf-8", "surrogateescape"), token.encode("utf-8", "surrogateescape")
    )


def machine_names() -> list[str]:
    """This machine's host name, full name and addresses: how other machines reach a server
    bound to every interface."""
    names = [socket.gethostname(), socket.getfqdn()]
    try:
        found = socket.getaddrinfo(socket.gethostname(), None, proto=socket.IPPROTO_TCP)
    except OSError:  # a host name that does not resolve: the names only
        found = []
    names += [str(info[4][0]) for info in found]
    return [n for n in dict.fromkeys(names) if n and not is_loopback(n)]


def allowed_hosts(host: str, port: int, extra: tuple[str, ...] = ()) -> list[str]:
    """``Host`` header values a server bound to ``host`` accepts (against DNS rebinding):
    loopback, the bound address (for every interface: this machine's names and addresses),
    and ``extra`` (names a proxy or DNS gives the server)."""
    bound = machine_names() if host in ("0.0.0.0", "::") else [host]
    names = [*LOOPBACK_NAMES, *bound, *extra]
    found: list[str] = []
    for name in dict.fromkeys(names):
        shown = f"[{name}]" if ":" in name and not name.startswith("[") else name
        found += [shown, f"{shown}:{port}", f"{shown}:*"]
    return list(dict.fromkeys(found))


def allowed_origins(hosts: list[str]) -> list[str]:
    """Browser ``Origin`` values matching the allowed hosts (http and https)."""
    return [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]


def _given_token(scope: Scope) -> str | None:
    """The bearer token an HTTP request carries, else None."""
    given = None
    for name, value in scope.get("headers", ()):
        if name.lower() == b"authorization":
            given = bearer_credentials(bytes(value))
    return given


async def _unauthorized(send: Send) -> None:
    body = json.dumps({"error": "unauthorized: send 'Authorization: Bearer <token>'"})
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="gitmem"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body.encode()})


class TokenRouter:
    """ASGI: each HTTP request goes to the app its bearer token is bound to, a request
    with any other token gets a 401; so one server serves several users, each token only
    ever reaching its own app. Every token is compared, whichever matches.

    The lifespan reaches every app in turn (each starts up before the server says it has,
    and shuts down in reverse order); other scopes are refused.
    """

    def __init__(self, routes: Sequence[tuple[str, ASGIApp]]) -> None:
        self.routes = list(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        if scope["type"] != "http":
            return
        given = _given_token(scope)
        found = [app for token, app in self.routes if token_matches(given, token)]
        if found:
            await found[0](scope, receive, send)
            return
        await _unauthorized(send)

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        apps = list({id(app): app for _token, app in self.routes}.values())
        running: list[_Lifespan] = []
        await receive()  # lifespan.startup
        for app in apps:
            one = _Lifespan(app, scope)
            if not await one.step("startup"):
                for done in reversed(running):
                    await done.step("shutdown")
                await send({"type": "lifespan.startup.failed", "message": one.failure})
                return
            running.append(one)
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        for one in reversed(running):
            await one.step("shutdown")
        await send({"type": "lifespan.shutdown.complete"})


class _Lifespan:
    """One app's lifespan, driven by :class:`TokenRouter` a step at a time."""

    def __init__(self, app: ASGIApp, scope: Scope) -> None:
        self.inbox: asyncio.Queue[Message] = asyncio.Queue()
        self.outbox: asyncio.Queue[Message] = asyncio.Queue()
        self.task = asyncio.ensure_future(app(dict(scope), self.inbox.get, self.outbox.put))
        self.failure = ""

    async def step(self, event: str) -> bool:
        """Send ``lifespan.<event>``; whether the app completed it."""
        await self.inbox.put({"type": f"lifespan.{event}"})
        reply = asyncio.ensure_future(self.outbox.get())
        await asyncio.wait({reply, self.task}, return_when=asyncio.FIRST_COMPLETED)
        if not reply.done():  # the app ended without a word
            reply.cancel()
            self.failure = f"an app ended during its {event}"
            return False
        message = reply.result()
        self.failure = str(message.get("message", ""))
        return bool(message["type"] == f"lifespan.{event}.complete")


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: one the system picks)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise ValidationError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


async def serve(app: ASGIApp, sock: socket.socket, *, banner: str = "") -> None:
    """Run ``app`` on the bound socket until interrupted; ``banner`` goes to stderr first
    (with the real port when 0 was asked)."""
    import uvicorn

    if banner:
        print(banner.format(port=sock.getsockname()[1]), file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
    await uvicorn.Server(config).serve(sockets=[sock])


def _interrupted(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def serve_until_stopped(serving: Coroutine[Any, Any, None]) -> None:
    """Run the HTTP server until SIGINT or SIGTERM, then return normally (exit code 0).

    uvicorn shuts down gracefully on either signal and then raises it again for the previous
    handler: Ctrl-C would end as click's "Aborted!" (exit 1) and SIGTERM would kill the
    process before the manager is closed (background housekeeping cut short). Both become
    a KeyboardInterrupt here, so ``run`` closes the store and returns.
    """
    if threading.current_thread() is not threading.main_thread():
        asyncio.run(serving)
        return
    previous = signal.signal(signal.SIGTERM, _interrupted)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serving)
    finally:
        signal.signal(signal.SIGTERM, previous)
