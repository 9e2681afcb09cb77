"""``gitmem web``: serve the dashboard with uvicorn, behind the bind policy of
:mod:`gitmem.serving` (127.0.0.1 by default; any other address needs a token)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gitmem.manager import MemoryManager
from gitmem.serving import allowed_hosts, bind, check_bind, serve, serve_until_stopped
from gitmem.web.app import WebOptions, create_app

TOKEN_ENV = "GITMEM_WEB_TOKEN"


@dataclass
class WebRunOptions:
    """Everything ``gitmem web`` was asked for."""

    path: str | Path
    agent: str
    model: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None
    extra_hosts: tuple[str, ...] = ()
    read_only: bool = False
    namespace: str | None = None  # given: this namespace only, no switcher


def run(options: WebRunOptions) -> None:
    """Serve until interrupted (Ctrl-C or SIGTERM), then close the store."""
    check_bind(options.host, options.token, what="gitmem web", env=TOKEN_ENV)
    sock = bind(options.host, options.port)
    try:
        port = sock.getsockname()[1]
        names = {
            h.rsplit(":", 1)[0] if not h.endswith("]") else h
            for h in allowed_hosts(options.host, port, options.extra_hosts)
        }
        mm = MemoryManager(
            options.path,
            agent=options.agent,
            model=options.model,
            via="web",
            namespace=options.namespace,
        )
        try:
            app = create_app(
                mm,
                WebOptions(
                    token=options.token,
                    hosts=tuple(sorted(names)),
                    read_only=options.read_only,
                    fixed_namespace=options.namespace is not None,
                ),
            )
            shown = f"[{options.host}]" if ":" in options.host else options.host
            # the token is never printed: a log is not a place for it
            login = " (open /?token=<token> or log in)" if options.token else ""
            banner = f"gitmem web: serving {mm.path} at http://{shown}:{{port}}/{login}"
            try:
                serve_until_stopped(serve(app, sock, banner=banner))
            finally:
                app.state.stores.close()
        finally:
            mm.close()
    finally:
        sock.close()
