"""Serving the MCP server: over stdio (one client, the process that started us) or over
streamable HTTP (several clients, behind the bind policy and token of ``gitmem.serving``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gitmem.manager import MemoryManager
from gitmem.mcp import sdk
from gitmem.mcp.server import ServerOptions, build_server
from gitmem.serving import (
    BearerToken,
    allowed_hosts,
    allowed_origins,
    bind,
    check_bind,
    serve,
    serve_until_stopped,
)

TOKEN_ENV = "GITMEM_MCP_TOKEN"


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


def run(options: RunOptions) -> None:
    """Serve until the client goes away (stdio) or the process is interrupted (HTTP)."""
    http = None
    sock = None
    if options.transport != "stdio":
        # refused before the store is opened or the port taken
        check_bind(options.host, options.token, what="gitmem mcp", env=TOKEN_ENV)
        sock = bind(options.host, options.port)
        port = sock.getsockname()[1]
        hosts = allowed_hosts(options.host, port, options.extra_hosts)
        http = sdk.HttpOptions(host=options.host, port=port, path=options.url_path,
                               hosts=hosts, origins=allowed_origins(hosts),
                               stateless=options.stateless)  # fmt: skip
    # one manager for every client: each write runs as its client's agent (acting_as)
    mm = MemoryManager(options.path, agent=options.agent, model=options.model, via="mcp")
    try:
        server = build_server(mm, options.server, http)
        if http is None or sock is None:
            sdk.run_stdio(server)
            return
        app = sdk.http_app(server, http)
        if options.token:
            app = BearerToken(app, options.token)
        shown = f"[{options.host}]" if ":" in options.host else options.host
        banner = (f"gitmem mcp: serving {mm.path} at http://{shown}:{{port}}{http.path} "
                  f"(streamable HTTP, mcp {sdk.MAJOR}.x)")
        serve_until_stopped(serve(app, sock, banner=banner))
    finally:
        if sock is not None:
            sock.close()
        mm.close()
