"""Bad input to the MCP server, and concurrent writers: the client gets a clean error that
names the problem, the store gets nothing.

"Clean" means a tool error (``isError``) or an MCP error the client raises, whose text says
what was wrong and holds no Python traceback; "nothing" means the same HEAD, a clean
``git status`` and no new file anywhere. The concurrency test issues twenty saves at once
over one stdio session while ``gitmem save`` processes write to the same store.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from gitmem.manager import MemoryManager
from tests.conftest import git
from tests.mcp_client import is_error, resource_text, stdio_session, text_of
from tests.test_mcp_tools import assert_clean, commits, made, ok, run

_exceptions = pytest.importorskip("mcp.shared.exceptions")
# the client raises this for an error response (2.x MCPError, 1.x McpError)
McpError: Any = getattr(_exceptions, "MCPError", None) or _exceptions.McpError


def files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` outside git directories (git keeps its index and caches
    there; a commit shows in HEAD), with its bytes."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and "/.git/" not in f"/{rel}":
            out[rel] = path.read_bytes()
    return out


class Unchanged:
    """Asserts that nothing was written: same HEAD, clean tree, the same files."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.head = git(store, "rev-parse", "HEAD")
        self.files = files(store)

    def check(self, what: str) -> None:
        assert git(self.store, "rev-parse", "HEAD") == self.head, f"{what} made a commit"
        assert_clean(self.store)
        now = files(self.store)
        assert now == self.files, f"{what} changed {set(now) ^ set(self.files)}"


def clean_text(text: str) -> str:
    assert "Traceback (most recent call last)" not in text, text
    assert 'File "' not in text and '.py", line' not in text, text
    assert text.strip(), "an error without a message"
    return text


async def refused(session: Any, name: str, args: dict[str, Any]) -> str:
    """Call a tool that must fail cleanly; the error text."""
    try:
        result = await session.call_tool(name, args)
    except McpError as exc:
        return clean_text(str(exc))
    assert is_error(result), f"{name}({args!r}) succeeded: {text_of(result)[:200]}"
    return clean_text(text_of(result))


async def unreadable(session: Any, uri: str) -> str:
    """Read a resource that must fail cleanly; the error text."""
    try:
        result = await session.read_resource(uri)
    except McpError as exc:
        return clean_text(str(exc))
    raise AssertionError(f"{uri} was read: {resource_text(result)[:200]}")


def seed(store: Path) -> None:
    """A store with one session of two turns, so the bad calls have something to miss."""
    with MemoryManager.init(store, agent="seed") as mm:
        mm.save_interaction("s1", "first", "one")
        mm.save_interaction("s1", "second", "two")


def test_bad_calls_are_clean_errors_that_write_nothing(store: Path) -> None:
    seed(store)
    calls: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
        ("no_such_tool", {}, ("no_such_tool",)),
        ("revert", {"commit": "HEAD"}, ("revert",)),  # undo tools need --allow-undo
        ("rollback", {"session": "s1", "to": "HEAD~1"}, ("rollback",)),
        ("undo_agent", {"agent": "x", "since": "2026-01-01"}, ("undo_agent",)),
        ("load_session", {}, ("session", "required")),
        ("save_interaction", {"user": "hi"}, ("session", "required")),
        ("search", {"query": "x", "k": "many"}, ("k", "integer")),
        ("search", {"query": "x", "k": 0}, ("k",)),
        ("search", {"query": ""}, ("query",)),
        ("save_interaction", {"session": "s1", "tags": "python"}, ("tags", "list")),
        ("save_interaction", {"session": "s1", "messages": [{"speaker": "x"}]}, ("content",)),
        ("save_interaction", {"session": "s1"}, ("nothing to save",)),
        (
            "save_interaction",
            {"session": "s1", "user": "hi", "timestamp": "noon"},
            ("timestamp", "noon"),
        ),
        ("load_session", {"session": "ghost"}, ("ghost",)),
        ("blame", {"session": "ghost"}, ("ghost",)),
        ("summarize", {"session": "ghost"}, ("ghost",)),
        ("search", {"query": "x", "since": "yesterday"}, ("since", "yesterday")),
        ("list_sessions", {"until": "2026-13-45"}, ("until", "2026-13-45")),
        ("history", {"since": "last week"}, ("since", "last week")),
        ("load_session", {"session": "s1", "at": "nosuchrev"}, ("nosuchrev",)),
        ("blame", {"session": "s1", "at": "HEAD~99"}, ("HEAD~99",)),
        ("list_sessions", {"at": "nosuchrev"}, ("nosuchrev",)),
        ("diff", {"session": "s1", "a": "nosuchrev"}, ("nosuchrev",)),
    ]

    async def main() -> None:
        async with stdio_session(store) as session:
            for name, args, named in calls:
                before = Unchanged(store)
                text = await refused(session, name, args)
                for word in named:
                    assert word.lower() in text.lower(), (name, args, text)
                before.check(f"{name}({args!r})")
            # the server outlived every bad call
            await ok(session, "save_interaction", {"session": "s1", "user": "still here"})

    run(main())


def test_hostile_session_ids(store: Path, tmp_path: Path) -> None:
    made(store)
    refused_ids = {
        "": "session",
        "a\x00b": "control",
        "a\nb": "control",
        "x" * 500: "400",
        "con": "reserved",
    }
    # ids that look like paths are names like any other: stored under sessions/, encoded
    contained = ("../../etc/passwd", "/etc/passwd", ".git/config", "sessions/../../x", "..")

    async def main() -> None:
        async with stdio_session(store) as session:
            for sid, why in refused_ids.items():
                before = Unchanged(store)
                text = await refused(session, "save_interaction", {"session": sid, "user": "hi"})
                assert why in text.lower(), (sid, text)
                for name in ("load_session", "blame"):  # a read may just not find it
                    text = await refused(session, name, {"session": sid})
                    assert why in text.lower() or "no session" in text, (sid, name, text)
                before.check(repr(sid))
            outside = files(tmp_path)
            config = (store / ".git" / "config").read_bytes()
            for sid in contained:
                tracked = set(git(store, "ls-files").split())
                data = await ok(session, "save_interaction", {"session": sid, "user": "x"})
                new = set(git(store, "ls-files").split()) - tracked
                assert len(new) == 1 and next(iter(new)).startswith("sessions/"), (sid, new)
                assert data["session"] == sid
                loaded = await ok(session, "load_session", {"session": sid})
                assert loaded["id"] == sid
            assert (store / ".git" / "config").read_bytes() == config
            now = files(tmp_path)
            assert {k for k in now if not k.startswith("memory/")} == {
                k for k in outside if not k.startswith("memory/")
            }
            assert_clean(store)

    run(main())


def test_the_size_cap(store: Path) -> None:
    made(store)
    huge = "x" * (10 * 1024 * 1024)

    async def main() -> None:
        async with stdio_session(store) as session:
            before = Unchanged(store)
            for args in (
                {"session": "big", "user": huge},
                {"session": "big", "messages": [{"speaker": "bot", "content": huge}]},
                {"session": "big", "user": huge[:600_000], "assistant": huge[:600_000]},
            ):
                text = await refused(session, "save_interaction", args)
                assert "1,048,576" in text and "--max-bytes" in text and "big" in text
                before.check("an oversized save")
            await ok(session, "save_interaction", {"session": "big", "user": huge[:1_000_000]})
        async with stdio_session(store, "--max-bytes", "1000") as session:
            count = commits(store)
            await ok(session, "save_interaction", {"session": "small", "user": "y" * 999})
            await ok(session, "save_interaction", {"session": "small", "user": "é" * 500})
            assert commits(store) == count + 2
            before = Unchanged(store)
            for args in (
                {"session": "small", "user": "y" * 1001},
                {"session": "small", "user": "é" * 501},  # bytes, not characters
                {"session": "small", "user": "y" * 600, "assistant": "z" * 600},
            ):
                text = await refused(session, "save_interaction", args)
                assert "1,000" in text, text
                before.check("a save over --max-bytes 1000")

    run(main())


def test_flags_remove_tools_rather_than_refuse_late(store: Path) -> None:
    made(store)

    async def main() -> None:
        async with stdio_session(store, "--read-only") as session:
            before = Unchanged(store)
            for name, args in (
                ("save_interaction", {"session": "s", "user": "hi"}),
                ("summarize", {"session": "s"}),
                ("revert", {"commit": "HEAD"}),
            ):
                text = await refused(session, name, args)
                assert name in text and "unknown tool" in text.lower()
            before.check("a write under --read-only")
            # the reads still work
            assert (await ok(session, "list_sessions", {}))["total"] == 0

    run(main())


def test_resource_errors_name_the_session(store: Path) -> None:
    seed(store)

    async def main() -> None:
        async with stdio_session(store) as session:
            before = Unchanged(store)
            assert "ghost" in await unreadable(session, "gitmem://sessions/ghost")
            assert "ghost" in await unreadable(session, "gitmem://sessions/ghost/history")
            assert "ghost" in await unreadable(session, "gitmem://sessions/ghost/at/HEAD")
            assert "nosuchrev" in await unreadable(session, "gitmem://sessions/s1/at/nosuchrev")
            assert "a b" in await unreadable(session, "gitmem://sessions/a%20b")
            assert "gitmem://elsewhere" in await unreadable(session, "gitmem://elsewhere")
            before.check("a failed read")

    run(main())


def test_concurrent_saves_over_one_session_and_from_the_cli(store: Path) -> None:
    made(store)
    before = commits(store)
    cli = [
        sys.executable,
        "-m",
        "gitmem",
        "--repo",
        str(store),
        "--agent",
        "cli-writer",
        "save",
        "from-cli",
    ]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}

    async def cli_save(n: int) -> None:
        proc = await asyncio.create_subprocess_exec(
            *cli,
            "--user",
            f"cli turn {n}",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()

    async def main() -> None:
        async with stdio_session(store, client="swarm") as session:
            saves = [
                session.call_tool(
                    "save_interaction",
                    {"session": "from-mcp", "user": f"mcp turn {n}", "assistant": f"ack {n}"},
                )
                for n in range(20)
            ]
            results = await asyncio.gather(*saves, *(cli_save(n) for n in range(4)))
            answers = results[:20]
            assert not any(is_error(r) for r in answers), [text_of(r) for r in answers]
            loaded = await ok(session, "load_session", {"session": "from-mcp"})
            said = sorted(i["messages"][0]["content"] for i in loaded["interactions"])
            assert said == sorted(f"mcp turn {n}" for n in range(20))
            assert len({i["id"] for i in loaded["interactions"]}) == 20
            other = await ok(session, "load_session", {"session": "from-cli"})
            assert sorted(i["messages"][0]["content"] for i in other["interactions"]) == sorted(
                f"cli turn {n}" for n in range(4)
            )

    run(main())
    assert commits(store) == before + 24
    agents = git(store, "log", "--format=%(trailers:key=Gitmem-Agent,valueonly)").split()
    assert agents.count("swarm") == 20 and agents.count("cli-writer") == 4
    git(store, "fsck", "--strict")
    assert_clean(store)
