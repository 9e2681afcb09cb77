"""Serving the MCP server: over stdio (one client, the process that started us) or over
streamable HTTP (several clients, behind the bind policy and token of ``gitmem.serving``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from gitmem.errors import ValidationError
from gitmem.manager import MemoryManager
from gitmem.mcp import sdk
from gitmem.mcp.server import ServerOptions, build_server
from gitmem.serving import (
    ASGIApp,
    Receive,
    Scope,
    Send,
    TokenRouter,
    allowed_hosts,
    allowed_origins,
    bind,
    check_bind,
    check_token,
    serve,
    serve_until_stopped,
)

TOKEN_ENV = "GITMEM_MCP_TOKEN"
# over stdio a turn is one line of JSON: nothing caps it but this
STDIO_MAX_SAVE_BYTES = 64 * 1024 * 1024
# over HTTP the whole request must fit the SDK's body limit; a quarter is left for the
# JSON escapes of the turn's text and the envelope
HTTP_MAX_SAVE_BYTES = sdk.MAX_REQUEST_BYTES * 3 // 4


def check_max_bytes(transport: str, max_bytes: int) -> None:
    """Refuse a ``--max-bytes`` the transport cannot carry: such a turn would be accepted
    by the option and refused, opaquely, by the transport."""
    http = transport != "stdio"
    cap = HTTP_MAX_SAVE_BYTES if http else STDIO_MAX_SAVE_BYTES
    if max_bytes > cap:
        why = (
            f"over streamable HTTP (the MCP SDK refuses a request over "
            f"{sdk.MAX_REQUEST_BYTES:,} bytes); stdio takes up to {STDIO_MAX_SAVE_BYTES:,}"
            if http
            else "over stdio"
        )
        raise ValidationError(f"gitmem mcp: --max-bytes {max_bytes:,}: at most {cap:,} bytes {why}")


@dataclass
class RunOptions:
    """Everything ``gitmem mcp`` was asked for."""

    path: str | Path
    agent: str
    model: str | None = None
    transport: str = "stdio"
    host: str = "127.0.0.1"
    port: int = 8000
    url_path: str = "/mcp"
    token: str | None = None
    extra_hosts: tuple[str, ...] = ()
    stateless: bool = False
    server: ServerOptions = field(default_factory=ServerOptions)
    namespace: str | None = None  # of the store; the namespace of --token too
    # over HTTP: more tokens, each bound to its namespace (None: the default one)
    token_namespaces: dict[str, str | None] = field(default_factory=dict)

    def routes(self) -> dict[str, str | None]:
        """Every token that lets a request in, and the namespace it is bound to."""
        found = dict(self.token_namespaces)
        if self.token is not None:
            bound = found.setdefault(self.token, self.namespace)
            if bound != self.namespace:
                raise ValidationError(
                    "gitmem mcp: the --token is bound to another namespace by "
                    "--token-namespace; give it once"
                )
        return found


class BodyLimit:
    """ASGI middleware: a request that declares a body over the SDK's limit gets a 413 with a
    JSON-RPC error naming the limit (the SDK's own says only "Request body too large", and
    its client shows that as a bare error). A body that does not declare its size is still
    counted, and refused, by the SDK."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = None
        if scope["type"] == "http":
            for name, value in scope.get("headers", ()):
                if name.lower() == b"content-length" and bytes(value).strip().isdigit():
                    declared = int(value)
        if declared is None or declared <= sdk.MAX_REQUEST_BYTES:
            await self.app(scope, receive, send)
            return
        message = (
            f"the request is {declared:,} bytes; this server reads at most "
            f"{sdk.MAX_REQUEST_BYTES:,} bytes per request, and saves a turn of at most "
            f"{self.max_bytes:,} bytes (gitmem mcp --max-bytes)"
        )
        body = json.dumps(
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})


def run(options: RunOptions) -> None:
    """Serve until the client goes away (stdio) or the process is interrupted (HTTP)."""
    check_max_bytes(options.transport, options.server.max_bytes)
    http = None
    sock = None
    routes = options.routes()
    if options.transport == "stdio" and options.token_namespaces:
        raise ValidationError("gitmem mcp: --token-namespace is for --transport streamable-http")
    if options.transport != "stdio":
        # refused before the store is opened or the port taken
        for token in routes:
            check_token(token, what="gitmem mcp")
        check_bind(options.host, next(iter(routes), None), what="gitmem mcp", env=TOKEN_ENV)
        sock = bind(options.host, options.port)
        port = sock.getsockname()[1]
        hosts = allowed_hosts(options.host, port, options.extra_hosts)
        http = sdk.HttpOptions(
            host=options.host,
            port=port,
            path=options.url_path,
            hosts=hosts,
            origins=allowed_origins(hosts),
            stateless=options.stateless,
        )
    # one manager per namespace for every client: each write runs as its client's agent
    # (acting_as); a token reaches only the server of its namespace
    names = list(dict.fromkeys(routes.values())) if routes else [options.namespace]
    managers: dict[str | None, MemoryManager] = {}
    try:
        for name in names:
            managers[name] = MemoryManager(
                options.path, agent=options.agent, model=options.model, via="mcp", namespace=name
            )
        if http is None or sock is None:
            sdk.run_stdio(build_server(managers[options.namespace], options.server, http))
            return
        apps: dict[str | None, ASGIApp] = {
            name: BodyLimit(
                sdk.http_app(build_server(mm, options.server, http), http),
                options.server.max_bytes,
            )
            for name, mm in managers.items()
        }
        app: ASGIApp = (
            TokenRouter([(token, apps[name]) for token, name in routes.items()])
            if routes
            else apps[options.namespace]
        )
        shown = f"[{options.host}]" if ":" in options.host else options.host
        banner = (
            f"gitmem mcp: serving {managers[names[0]].path} at http://{shown}:{{port}}"
            f"{http.path} (streamable HTTP, mcp {sdk.MAJOR}.x)"
        )
        serve_until_stopped(serve(app, sock, banner=banner))
    finally:
        if sock is not None:
            sock.close()
        for mm in managers.values():
            mm.close()
