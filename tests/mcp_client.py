"""Helpers for the MCP tests: the real ``mcp`` client against a real ``gitmem mcp`` process.

Works with both majors of the SDK (the suite also runs under mcp 1.x, see
``tests/test_mcp_v1.py``): result fields are read by either name, and the HTTP client is
made with the SDK's own ``create_mcp_http_client`` in both.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

mcp = pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp import types as mcp_types  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

from gitmem.mcp import sdk  # noqa: E402

MAJOR = sdk.MAJOR
_BANNER = re.compile(r"at (http://\S+) ")


def gitmem_args(store: Path, *args: str, agent: str = "cli-agent") -> list[str]:
    """``python -m gitmem --repo STORE --agent AGENT mcp ARGS`` as an argument list."""
    return ["-m", "gitmem", "--repo", str(store), "--agent", agent, "mcp", *args]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    return env


@contextlib.asynccontextmanager
async def stdio_session(
    store: Path, *args: str, client: str | None = "test-client", agent: str = "cli-agent"
) -> AsyncIterator[ClientSession]:
    """A client session with ``gitmem mcp`` started as a subprocess over stdio."""
    params = StdioServerParameters(
        command=sys.executable, args=gitmem_args(store, *args, agent=agent), env=_env()
    )
    info = None if client is None else mcp_types.Implementation(name=client, version="1.0")
    async with (
        stdio_client(params) as streams,
        ClientSession(streams[0], streams[1], client_info=info) as session,
    ):
        await session.initialize()
        yield session


@contextlib.contextmanager
def http_server(
    store: Path, *args: str, agent: str = "cli-agent", env: dict[str, str] | None = None
) -> Iterator[str]:
    """``gitmem mcp --transport streamable-http --port 0`` running; yields its URL."""
    cmd = [
        sys.executable,
        *gitmem_args(store, "--transport", "streamable-http", "--port", "0", *args, agent=agent),
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**_env(), **(env or {})},
        text=True,
    )
    try:
        url = None
        deadline = time.monotonic() + 60
        assert proc.stderr is not None
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                raise AssertionError(f"gitmem mcp exited ({proc.wait()}) before serving")
            found = _BANNER.search(line)
            url = found.group(1) if found else None
        assert url is not None, "gitmem mcp printed no URL"
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.asynccontextmanager
async def http_session(
    url: str, *, client: str | None = "test-client", headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """A client session over streamable HTTP."""
    info = None if client is None else mcp_types.Implementation(name=client, version="1.0")
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as streams,
        ClientSession(streams[0], streams[1], client_info=info) as session,
    ):
        await session.initialize()
        yield session


def structured(result: Any) -> Any:
    """A tool result's structured content (``structured_content`` in 2.x)."""
    return getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)


def is_error(result: Any) -> bool:
    return bool(getattr(result, "is_error", None) or getattr(result, "isError", None))


def text_of(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def resource_text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.contents)
