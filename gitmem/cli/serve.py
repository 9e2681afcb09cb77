"""Server commands: ``gitmem mcp`` (the Model Context Protocol server) and ``gitmem web``
(the dashboard)."""

from __future__ import annotations

from typing import TextIO

import click

from gitmem.cli.base import Context, cli, pass_ctx
from gitmem.errors import GitmemError
from gitmem.manager import MemoryManager
from gitmem.serving import check_bind
from gitmem.store.discover import find_store


class _MissingExtra(GitmemError):
    """An optional dependency of a command is not installed."""


@cli.command()
@click.option(
    "--transport",
    type=click.Choice(["stdio", "streamable-http"]),
    default="stdio",
    show_default=True,
    help="stdio for a client that starts gitmem; streamable-http to serve several clients.",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (HTTP). Any other than loopback needs --token.",
)
@click.option(
    "--port",
    default=8000,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on (HTTP); 0 picks a free one (printed on stderr).",
)
@click.option(
    "--path", "url_path", default="/mcp", show_default=True, help="URL path of the endpoint (HTTP)."
)
@click.option(
    "--token",
    envvar="GITMEM_MCP_TOKEN",
    default=None,
    help="Bearer token every HTTP request must carry (env GITMEM_MCP_TOKEN).",
)
@click.option(
    "--token-namespace",
    "token_namespaces",
    multiple=True,
    metavar="TOKEN=NS",
    help="HTTP: also let TOKEN in, bound to namespace NS: its requests see that namespace "
    "only (repeatable; NS empty: the default one).",
)
@click.option(
    "--token-file",
    type=click.File("r", encoding="utf-8"),
    default=None,
    help="HTTP: read TOKEN=NS lines from this file, as --token-namespace (keeps the tokens "
    "out of the process list; '#' starts a comment).",
)
@click.option(
    "--allow-host",
    "extra_hosts",
    multiple=True,
    metavar="NAME",
    help="Also accept this Host header (the name clients use; repeatable).",
)
@click.option(
    "--stateless", is_flag=True, help="No MCP sessions over HTTP (each request stands alone)."
)
@click.option("--read-only", is_flag=True, help="Expose only the tools that read.")
@click.option("--allow-undo", is_flag=True, help="Also expose revert, rollback and undo_agent.")
@click.option(
    "--max-bytes",
    default=1024 * 1024,
    show_default=True,
    type=click.IntRange(1, 64 * 1024 * 1024),
    help="Largest turn one save accepts (at most 3 MiB over HTTP, 64 MiB over stdio).",
)
@click.option("--init", "init", is_flag=True, help="Create the store if it does not exist.")
@click.option(
    "--nanobot-plugin",
    "plugin_dir",
    metavar="DIR",
    type=click.Path(file_okay=False),
    default=None,
    help="Write a nanobot plugin bundle for this store to DIR and exit.",
)
@pass_ctx
def mcp(
    ctx: Context,
    transport: str,
    host: str,
    port: int,
    url_path: str,
    token: str | None,
    token_namespaces: tuple[str, ...],
    token_file: TextIO | None,
    extra_hosts: tuple[str, ...],
    stateless: bool,
    read_only: bool,
    allow_undo: bool,
    max_bytes: int,
    init: bool,
    plugin_dir: str | None,
) -> None:
    """Serve the store to MCP clients (nanobot, Claude Desktop, Cursor...).

    Every write is a commit whose agent is the client's name (else --agent), with a
    ``Gitmem-Via: mcp`` trailer. With --namespace the clients see that namespace only; over
    HTTP --token-namespace binds each token to its own, so one server serves several users.
    Needs the mcp extra: pip install '.[mcp]' in gitmem's checkout.
    """
    path = ctx.repo or find_store(".")
    lines = [*token_namespaces, *(token_file.read().splitlines() if token_file else ())]
    bound = _token_namespaces(lines)
    if plugin_dir is not None:
        from gitmem.mcp.plugin import write_plugin

        for written in write_plugin(plugin_dir, store=path, agent=ctx.agent):
            click.echo(f"wrote {written}")
        return
    if not url_path.startswith("/"):
        raise click.BadParameter("give a path starting with '/'", param_hint="--path")
    # a refused bind creates nothing, not even the --init store, and is told before the
    # SDK's second of imports
    if transport != "stdio":
        check_bind(
            host, token or next(iter(bound), None), what="gitmem mcp", env="GITMEM_MCP_TOKEN"
        )
    try:  # imported here: the mcp extra is optional, and every other command starts faster
        from gitmem.mcp.run import RunOptions, check_max_bytes, run
        from gitmem.mcp.server import ServerOptions
    except ImportError as exc:
        raise _MissingExtra(
            f"gitmem mcp needs the mcp package ({exc}); install it with "
            "pip install '.[mcp]' in gitmem's checkout"
        ) from None
    check_max_bytes(transport, max_bytes)
    if init:
        MemoryManager(path, init=True, agent=ctx.agent).close()
    run(
        RunOptions(
            path=path,
            agent=ctx.agent,
            model=ctx.model,
            transport=transport,
            host=host,
            port=port,
            url_path=url_path,
            token=token or None,
            extra_hosts=extra_hosts,
            stateless=stateless,
            server=ServerOptions(read_only=read_only, allow_undo=allow_undo, max_bytes=max_bytes),
            namespace=ctx.namespace,
            token_namespaces=bound,
        )
    )


def _token_namespaces(lines: list[str]) -> dict[str, str | None]:
    """``TOKEN=NS`` lines as token -> namespace (blank lines and ``#`` comments skipped); a
    token bound twice, or a line without ``=``, is a usage error that never shows the token."""
    found: dict[str, str | None] = {}
    for at, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        token, sep, name = text.rpartition("=")
        if not sep or not token:
            raise click.BadParameter(
                f"entry {at} is not TOKEN=NS", param_hint="--token-namespace/--token-file"
            )
        if token in found:
            raise click.BadParameter(
                f"entry {at} binds a token given before", param_hint="--token-namespace"
            )
        found[token] = name.strip() or None
    return found


@cli.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Any other than loopback needs --token.",
)
@click.option(
    "--port",
    default=8080,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on; 0 picks a free one (printed on stderr).",
)
@click.option(
    "--token",
    envvar="GITMEM_WEB_TOKEN",
    default=None,
    help="Token a browser logs in with, or a script sends as 'Authorization: "
    "Bearer <token>' (env GITMEM_WEB_TOKEN).",
)
@click.option(
    "--allow-host",
    "extra_hosts",
    multiple=True,
    metavar="NAME",
    help="Also accept this Host header (the name browsers use; repeatable).",
)
@click.option("--read-only", is_flag=True, help="Show only: no undo, no review actions.")
@click.option("--init", "init", is_flag=True, help="Create the store if it does not exist.")
@pass_ctx
def web(
    ctx: Context,
    host: str,
    port: int,
    token: str | None,
    extra_hosts: tuple[str, ...],
    read_only: bool,
    init: bool,
) -> None:
    """Serve the web dashboard: sessions, search, history, diff, blame, undo, links, facts.

    Binds 127.0.0.1 by default. Writes (undo, review) are commits by --agent with a
    ``Gitmem-Via: web`` trailer. With --namespace it shows that namespace only; without,
    a store with several namespaces gets a switcher in the header. Needs the web extra:
    pip install '.[web]' in gitmem's checkout.
    """
    path = ctx.repo or find_store(".")
    check_bind(host, token or None, what="gitmem web", env="GITMEM_WEB_TOKEN")
    try:  # imported here: the web extra is optional, and every other command starts faster
        from gitmem.web.run import WebRunOptions, run
    except ImportError as exc:
        raise _MissingExtra(
            f"gitmem web needs starlette, jinja2 and uvicorn ({exc}); install them with "
            "pip install '.[web]' in gitmem's checkout"
        ) from None
    if init:
        MemoryManager(path, init=True, agent=ctx.agent).close()
    run(
        WebRunOptions(
            path=path,
            agent=ctx.agent,
            model=ctx.model,
            host=host,
            port=port,
            token=token or None,
            extra_hosts=extra_hosts,
            read_only=read_only,
            namespace=ctx.namespace,
        )
    )
