"""One ``gitmem mcp`` HTTP server for two users: each token is bound to its namespace, and
a client with Alice's token never reads or writes Bob's memory (the real server process,
the real MCP client and git)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gitmem import MemoryManager
from gitmem.cli import cli
from tests.conftest import git
from tests.mcp_client import http_server, http_session, is_error, stdio_session, structured, text_of

ALICE_TOKEN = "alice-token-0123456789abcdef"
BOB_TOKEN = "bob-token-0123456789abcdef"


@pytest.fixture
def shared(store: Path) -> Path:
    with MemoryManager(store, init=True, namespace="alice") as alice:
        alice.save_interaction("support-alice", "My Postgres database is on port 5432", "Noted")
        alice.remember("Alice keeps her Postgres backups in Frankfurt")
    with MemoryManager(store, namespace="bob") as bob:
        bob.save_interaction("support-bob", "Bob's Postgres database crashed", "Sorry")
        bob.remember("Bob's Postgres runs on port 5433")
    return store


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _read_all(url: str, token: str) -> str:
    """Everything a client with ``token`` can read about Postgres, as one text."""
    async with http_session(url, client="reader", headers=_as(token)) as session:
        parts = []
        for tool, args in (
            ("search", {"query": "Postgres database port"}),
            ("facts", {"query": "Postgres"}),
            ("facts", {}),
            ("get_context", {"session": "support-alice", "query": "Postgres port"}),
            ("get_context", {"session": "support-bob", "query": "Postgres port"}),
            ("list_sessions", {}),
        ):
            result = await session.call_tool(tool, args)
            parts.append(text_of(result) + json.dumps(structured(result) or {}))
        return "\n".join(parts)


def test_two_tokens_two_namespaces_over_http(shared: Path, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# one line per user\n{BOB_TOKEN}=bob\n", encoding="utf-8")
    args = ("--token-namespace", f"{ALICE_TOKEN}=alice", "--token-file", str(tokens))
    with http_server(shared, *args) as url:
        alice = asyncio.run(_read_all(url, ALICE_TOKEN))
        bob = asyncio.run(_read_all(url, BOB_TOKEN))

        async def save(token: str, session_id: str) -> None:
            async with http_session(url, client="writer", headers=_as(token)) as session:
                done = await session.call_tool(
                    "save_interaction", {"session": session_id, "user": "hi", "assistant": "hi"}
                )
                assert not is_error(done), text_of(done)

        asyncio.run(save(ALICE_TOKEN, "alice-new"))
        asyncio.run(save(BOB_TOKEN, "bob-new"))
        request = urllib.request.Request(url, data=b"{}", headers=_as("someone-else-0123456789"))
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 401
    assert "5432" in alice and "Frankfurt" in alice
    # (each asks for the other's session by name too: the answer holds nothing of it)
    assert "Bob" not in alice and "5433" not in alice and "crashed" not in alice
    assert "5433" in bob and "crashed" in bob
    assert "Frankfurt" not in bob and "5432" not in bob and "Alice" not in bob
    assert MemoryManager(shared, namespace="alice").session_ids() == ["alice-new", "support-alice"]
    assert MemoryManager(shared, namespace="bob").session_ids() == ["bob-new", "support-bob"]
    assert MemoryManager(shared).session_ids() == []
    assert git(shared, "status", "--porcelain") == ""


def test_namespace_over_stdio(shared: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> str:
        async with stdio_session(shared, "--read-only") as session:
            parts = [
                await session.call_tool("search", {"query": "Postgres"}),
                await session.call_tool("facts", {}),
            ]
            return "\n".join(text_of(p) + json.dumps(structured(p) or {}) for p in parts)

    monkeypatch.setenv("GITMEM_NAMESPACE", "bob")  # the server process inherits it
    bob = asyncio.run(go())
    assert "5433" in bob and "support-bob" in bob
    assert "5432" not in bob and "Frankfurt" not in bob


def test_bad_token_bindings_are_refused_without_showing_the_token(shared: Path) -> None:
    def mcp(*args: str) -> Result:
        return CliRunner().invoke(cli, ["--repo", str(shared), "mcp", *args])

    for args in (
        ("--transport", "streamable-http", "--token-namespace", ALICE_TOKEN),
        (
            "--transport",
            "streamable-http",
            "--token-namespace",
            f"{ALICE_TOKEN}=alice",
            "--token-namespace",
            f"{ALICE_TOKEN}=bob",
        ),
    ):
        refused = mcp(*args)
        assert refused.exit_code == 2 and ALICE_TOKEN not in refused.output + refused.stderr
    short = mcp("--transport", "streamable-http", "--token-namespace", "short=alice")
    assert short.exit_code == 1 and "at least 16" in short.stderr
    stdio = mcp("--token-namespace", f"{ALICE_TOKEN}=alice")
    assert stdio.exit_code == 1 and "streamable-http" in stdio.stderr
    both = mcp(
        "--transport",
        "streamable-http",
        "--token",
        ALICE_TOKEN,
        "--token-namespace",
        f"{ALICE_TOKEN}=bob",
    )
    assert both.exit_code == 1 and ALICE_TOKEN not in both.stderr
