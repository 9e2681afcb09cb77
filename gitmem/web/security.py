"""What stands between a browser and the store: headers, host check, token login and CSRF.

Plain ASGI middleware, outermost first (see :func:`gitmem.web.app.create_app`):

* :class:`WebGuard` answers every HTTP request: it times it (``Server-Timing``), sets the
  strict headers (a Content-Security-Policy that runs no script at all and loads nothing
  from elsewhere), refuses a ``Host`` the server does not answer to (DNS rebinding), asks
  for the token when one is set, and checks the CSRF token of every request that is not a
  GET or HEAD before the page code sees it.
* CSRF is a signed double submit: a random ``gitmem_csrf`` cookie (SameSite=Strict,
  HttpOnly) and a form field holding HMAC(server secret, cookie). A POST without both,
  or from another origin, is refused with 403 and nothing is read or written.
* With a token (needed off loopback), a browser logs in once at ``/login`` (or opens
  ``/?token=...``, which the CLI prints) and gets a ``gitmem_auth`` cookie; scripts send
  ``Authorization: Bearer <token>``.

Forms are ``application/x-www-form-urlencoded`` (no file uploads); the parsed fields are
left in ``scope["state"]["form"]`` for the page (:func:`gitmem.web.pages.form`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from gitmem.serving import (
    ASGIApp,
    Message,
    Receive,
    Scope,
    Send,
    bearer_credentials,
    token_matches,
)

CSRF_COOKIE = "gitmem_csrf"
AUTH_COOKIE = "gitmem_auth"
CSRF_FIELD = "csrf"
# a form larger than this is refused before it is parsed (a turn is saved by agents, not here)
FORM_MAX_BYTES = 256 * 1024
LOGIN_PATH = "/login"
STATIC_PREFIX = "/static/"

CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'none'",
        "style-src 'self'",
        "img-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ]
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
SAFE_METHODS = ("GET", "HEAD")


@dataclass
class Security:
    """The server's secrets and what it accepts.

    ``hosts``: ``Host`` header names accepted (without port); None accepts any (tests).
    ``token``: required from every client when set.
    """

    token: str | None = None
    hosts: Sequence[str] | None = None
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    def sign(self, value: str) -> str:
        return hmac.new(self.secret, value.encode(), hashlib.sha256).hexdigest()

    def csrf_for(self, nonce: str) -> str:
        """The form token that goes with the browser's CSRF cookie."""
        return self.sign("csrf:" + nonce)

    def auth_cookie(self) -> str:
        """The login cookie's value: proves the token was given, without holding it."""
        return self.sign("auth:" + (self.token or ""))

    def token_ok(self, given: str | None) -> bool:
        return self.token is not None and token_matches(given, self.token)


def cookies(scope: Scope) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    for name, value in scope.get("headers", ()):
        if name == b"cookie":
            try:
                jar.load(value.decode("latin-1"))
            except Exception:  # a malformed cookie header is as good as none
                continue
    return {k: m.value for k, m in jar.items()}


def raw_header(scope: Scope, wanted: bytes) -> bytes | None:
    for name, value in scope.get("headers", ()):
        if name == wanted:
            return bytes(value)
    return None


def header(scope: Scope, wanted: bytes) -> str | None:
    value = raw_header(scope, wanted)
    return None if value is None else value.decode("latin-1")


def _cookie_header(name: str, value: str) -> tuple[bytes, bytes]:
    return (b"set-cookie", f"{name}={value}; Path=/; HttpOnly; SameSite=Strict".encode())


class WebGuard:
    """The one security middleware (see the module docstring)."""

    def __init__(self, app: ASGIApp, security: Security) -> None:
        self.app = app
        self.security = security

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        jar = cookies(scope)
        extra: list[tuple[bytes, bytes]] = []
        nonce = jar.get(CSRF_COOKIE, "")
        if len(nonce) < 20:  # a new browser (or a forged short cookie): a fresh nonce
            nonce = secrets.token_urlsafe(24)
            extra.append(_cookie_header(CSRF_COOKIE, nonce))
        state = scope.setdefault("state", {})
        state["csrf"] = self.security.csrf_for(nonce)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                took = (time.perf_counter() - started) * 1000
                message["headers"] = [
                    *message.get("headers", []),
                    *HEADERS,
                    *extra,
                    (b"server-timing", f"app;dur={took:.2f}".encode()),
                ]
            await send(message)

        refused = self._refusal(scope, jar)
        if refused is not None:
            status, text, location = refused
            await _plain(send_with_headers, status, text, location)
            return
        if scope["method"] in SAFE_METHODS:
            token = _query_token(scope)
            if token is not None and self.security.token_ok(token):
                # a link with ?token=: log in, and drop the token from the address bar
                extra.append(_cookie_header(AUTH_COOKIE, self.security.auth_cookie()))
                await _plain(send_with_headers, 303, "logged in", _without_token(scope))
                return
            await self.app(scope, receive, send_with_headers)
            return
        body = await _read_body(receive)
        if body is None:
            await _plain(
                send_with_headers, 413, f"the form is larger than {FORM_MAX_BYTES} bytes", None
            )
            return
        fields = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        given = fields.pop(CSRF_FIELD, "")
        if CSRF_COOKIE not in jar or not hmac.compare_digest(given, state["csrf"]):
            await _plain(
                send_with_headers,
                403,
                "refused: this form has no valid CSRF token (reload the page and try again)",
                None,
            )
            return
        state["form"] = fields
        await self.app(scope, _replay(body, receive), send_with_headers)

    def _refusal(self, scope: Scope, jar: dict[str, str]) -> tuple[int, str, str | None] | None:
        """Why this request may not go on (status, text, redirect), or None."""
        hosts = self.security.hosts
        if hosts is not None:
            name = _host_name(header(scope, b"host") or "")
            if name not in hosts:
                return 421, f"this server does not answer to the host {name!r}", None
        if scope["method"] not in SAFE_METHODS:
            origin = header(scope, b"origin")
            if (
                origin is not None
                and origin != "null"
                and _host_name(origin.split("://", 1)[-1])
                != _host_name(header(scope, b"host") or "")
            ):
                return 403, f"refused: a form from another site ({origin})", None
        if self.security.token is None or scope["path"].startswith(STATIC_PREFIX):
            return None
        if scope["path"] == LOGIN_PATH:
            return None
        if self.security.token_ok(bearer_credentials(raw_header(scope, b"authorization"))):
            return None
        if hmac.compare_digest(jar.get(AUTH_COOKIE, ""), self.security.auth_cookie()):
            return None
        if scope["method"] in SAFE_METHODS and self.security.token_ok(_query_token(scope) or ""):
            return None  # the caller logs this browser in
        if scope["method"] in SAFE_METHODS:
            wanted = scope["path"] + (
                f"?{scope['query_string'].decode()}" if scope.get("query_string") else ""
            )
            return 303, "log in first", f"{LOGIN_PATH}?{urlencode({'next': wanted})}"
        return 401, "unauthorized: log in at /login or send 'Authorization: Bearer <token>'", None


def _host_name(value: str) -> str:
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _query_token(scope: Scope) -> str | None:
    query: bytes = scope.get("query_string", b"")
    for key, value in parse_qsl(query.decode("latin-1")):
        if key == "token":
            return value
    return None


def _without_token(scope: Scope) -> str:
    kept = [
        (k, v)
        for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        if k != "token"
    ]
    # one leading slash: "//evil.example/" would send the browser to another site
    path = "/" + scope["path"].lstrip("/")
    return quote(path) + (f"?{urlencode(kept)}" if kept else "")


async def _read_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > FORM_MAX_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _plain(send: Send, status: int, text: str, location: str | None) -> None:
    headers: list[Any] = [(b"content-type", b"text/plain; charset=utf-8")]
    if location is not None:
        headers.append((b"location", location.encode("latin-1", "replace")))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": text.encode()})
