"""``gitmem mcp`` over streamable HTTP: a real server process, the real ``mcp`` client, real git.

Covers what only the HTTP transport has: the bind policy and bearer token, the SDK's DNS
rebinding and body-size checks, several clients writing at once (and another process beside
them), ``--read-only`` and a clean stop on SIGTERM/SIGINT. Raw requests go through the
standard library (``urllib`` / ``http.client``): the HTTP client library differs between the
SDK's majors. Runs under both majors (see tests/mcp_client.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.conftest import git
from tests.mcp_client import (
    MAJOR,
    _env,
    gitmem_args,
    http_server,
    http_session,
    is_error,
    resource_text,
    structured,
    text_of,
)

TOKEN = "t0ken-for-the-http-tests-0123456789"
INIT = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw-client", "version": "1"},
        },
    }
).encode()


def _post(url: str, body: bytes = INIT, **headers: str) -> tuple[int, str]:
    """A raw POST to the endpoint: (status, start of the body)."""
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **headers,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read(2000).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(2000).decode("utf-8", "replace")


def _commits(store: Path) -> int:
    return int(git(store, "rev-list", "--count", "HEAD"))


def _log(store: Path) -> list[dict[str, str]]:
    """Each commit's Gitmem-Agent, Gitmem-Via and Gitmem-Session trailers, newest first."""
    fields = "%x1f".join(
        f"%(trailers:key=Gitmem-{key},valueonly,separator=%x2C)"
        for key in ("Agent", "Via", "Session")
    )
    out = git(store, "log", f"--format={fields}%x1e")
    rows = []
    for record in out.split("\x1e"):
        if record.strip():
            agent, via, session = (part.strip() for part in record.split("\x1f"))
            rows.append({"agent": agent, "via": via, "session": session})
    return rows


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _mcp_cli(
    store: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *gitmem_args(store, *args)],
        capture_output=True,
        text=True,
        env={**_env(), **(env or {})},
        timeout=120,
    )


def _loopback(url: str) -> str:
    """The URL of a server bound to 0.0.0.0, as a client on this machine reaches it."""
    return url.replace("://0.0.0.0:", "://127.0.0.1:")


# --- tools over HTTP -----------------------------------------------------------------------


def test_tools_and_resources_over_http_commit_as_the_client(store: Path) -> None:
    async def go(url: str) -> None:
        async with http_session(url, client="http-agent") as session:
            saved = await session.call_tool(
                "save_interaction",
                {
                    "session": "web:1",
                    "user": "My cat is called Miso",
                    "assistant": "Noted.",
                    "tags": ["pets"],
                },
            )
            assert not is_error(saved), text_of(saved)
            turn = structured(saved)["interaction_id"]
            found = await session.call_tool("search", {"query": "cat Miso"})
            hits = structured(found)["hits"]
            assert [(h["session"], h["interaction_id"]) for h in hits] == [("web:1", turn)]
            assert hits[0]["commit"] == structured(saved)["commit"]
            page = resource_text(await session.read_resource("gitmem://sessions/web:1"))
            assert "My cat is called Miso" in page and f"{{#{turn}}}" in page

    with http_server(store, "--init") as url:
        asyncio.run(go(url))
    newest = _log(store)[0]
    assert newest == {"agent": "http-agent", "via": "mcp", "session": "web:1"}
    assert git(store, "status", "--porcelain") == ""


# --- the bind policy and the token ---------------------------------------------------------


def test_non_loopback_bind_without_token_refuses_to_start(store: Path) -> None:
    port = _free_port()
    done = _mcp_cli(
        store, "--init", "--transport", "streamable-http", "--host", "0.0.0.0", "--port", str(port)
    )
    assert done.returncode == 1
    assert "binding to '0.0.0.0' lets other machines connect" in done.stderr
    assert "--token" in done.stderr and "GITMEM_MCP_TOKEN" in done.stderr
    assert "Traceback" not in done.stderr
    assert not _listening(port)
    assert not store.exists()  # refused before the store was touched


@pytest.mark.parametrize("via_env", [False, True], ids=["--token", "GITMEM_MCP_TOKEN"])
def test_token_shorter_than_16_characters_is_refused(store: Path, via_env: bool) -> None:
    short = "fifteen-chars-x"
    args = ["--init", "--transport", "streamable-http", "--port", "0"]
    done = _mcp_cli(
        store,
        *args,
        *(() if via_env else ("--token", short)),
        env={"GITMEM_MCP_TOKEN": short} if via_env else None,
    )
    assert done.returncode == 1
    assert "the token is 15 characters long; give at least 16" in done.stderr
    assert "Traceback" not in done.stderr
    assert not store.exists()


def _refusal(store: Path, *args: str) -> tuple[int, str]:
    """Start ``gitmem mcp ARGS`` over HTTP: its exit code and the first line on stderr (the
    refusal, or the banner of a server that started, which is then stopped)."""
    cmd = [
        sys.executable,
        *gitmem_args(store, "--init", "--transport", "streamable-http", "--port", "0", *args),
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env(), text=True
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
    finally:
        if proc.poll() is None and "serving" in first:
            proc.terminate()
        proc.wait(60)
    return proc.returncode, first


@pytest.mark.parametrize("token", [" " * 16, f" {TOKEN} "], ids=["blank", "padded"])
def test_blank_or_padded_token_is_refused(store: Path, token: str) -> None:
    # h11 strips a header's surrounding white space: such a server would accept nobody
    code, first = _refusal(store, "--token", token)
    assert code == 1 and "gitmem mcp: the token" in first, first
    assert not store.exists()


def test_max_bytes_is_capped_by_the_transport(store: Path) -> None:
    # the SDK refuses a request body over 4 MiB: a larger --max-bytes could never be used
    code, first = _refusal(store, "--max-bytes", str(4 * 1024 * 1024))
    assert code != 0, first
    assert "at most 3,145,728 bytes over streamable HTTP" in first, first
    assert not store.exists()
    code, first = _refusal(store, "--max-bytes", str(3 * 1024 * 1024))
    assert "serving" in first, first


def test_the_bearer_scheme_is_case_insensitive(store: Path) -> None:
    with http_server(store, "--init", "--token", TOKEN) as url:
        for scheme in ("Bearer", "bearer", "BEARER"):
            status, body = _post(url, Authorization=f"{scheme} {TOKEN}")
            assert status == 200 and '"serverInfo"' in body, scheme
        assert _post(url, Authorization=f"bearer {TOKEN}x")[0] == 401

        async def lower() -> None:
            async with http_session(url, headers={"Authorization": f"bearer {TOKEN}"}) as session:
                saved = await session.call_tool(
                    "save_interaction", {"session": "lower", "user": "hello", "assistant": "hi"}
                )
                assert not is_error(saved), text_of(saved)

        asyncio.run(lower())
    assert _log(store)[0]["session"] == "lower"


@pytest.mark.parametrize("via_env", [False, True], ids=["--token", "GITMEM_MCP_TOKEN"])
def test_token_guards_every_request_on_a_non_loopback_bind(store: Path, via_env: bool) -> None:
    args = ("--init", "--host", "0.0.0.0", *(() if via_env else ("--token", TOKEN)))
    env = {"GITMEM_MCP_TOKEN": TOKEN} if via_env else None
    with http_server(store, *args, env=env) as bound:
        url = _loopback(bound)
        before = _commits(store)
        for headers in (
            {},
            {"Authorization": "Bearer wrong-token-0123456789"},
            {"Authorization": TOKEN},
            {"Authorization": f"Bearer {TOKEN}x"},
        ):
            status, body = _post(url, **headers)
            assert status == 401, (headers, status, body)
            assert "Authorization: Bearer" in body

        async def refused() -> None:
            async with http_session(url, client="intruder"):
                raise AssertionError("a session without the token was opened")

        with pytest.raises(BaseException):  # noqa: B017 - each major raises its own error
            asyncio.run(refused())
        assert _commits(store) == before

        status, body = _post(url, Authorization=f"Bearer {TOKEN}")
        assert status == 200 and '"serverInfo"' in body

        async def allowed() -> None:
            async with http_session(
                url, client="trusted", headers={"Authorization": f"Bearer {TOKEN}"}
            ) as session:
                saved = await session.call_tool(
                    "save_interaction",
                    {"session": "remote", "user": "hello from afar", "assistant": "hi"},
                )
                assert not is_error(saved), text_of(saved)

        asyncio.run(allowed())
    assert _commits(store) == before + 1
    assert _log(store)[0]["agent"] == "trusted"


# --- DNS rebinding -------------------------------------------------------------------------


def test_foreign_host_or_origin_is_refused_on_the_default_bind(store: Path) -> None:
    with http_server(store, "--init") as url:
        port = urlsplit(url).port
        assert _post(url)[0] == 200
        assert _post(url, Host=f"localhost:{port}", Origin=f"http://localhost:{port}")[0] == 200
        status, body = _post(url, Host="evil.example")
        assert status == 421 and "Host" in body
        assert _post(url, Host=f"evil.example:{port}")[0] == 421
        status, body = _post(url, Origin="http://evil.example")
        assert status == 403 and "Origin" in body


def test_allow_host_admits_that_name(store: Path) -> None:
    with http_server(store, "--init", "--allow-host", "memory.example") as url:
        port = urlsplit(url).port
        assert _post(url, Host="memory.example")[0] == 200
        assert (
            _post(url, Host=f"memory.example:{port}", Origin=f"http://memory.example:{port}")[0]
            == 200
        )
        assert _post(url, Host="evil.example")[0] == 421


def test_dns_rebinding_is_checked_behind_the_token(store: Path) -> None:
    with http_server(store, "--init", "--host", "0.0.0.0", "--token", TOKEN) as bound:
        url = _loopback(bound)
        auth = f"Bearer {TOKEN}"
        assert _post(url, Authorization=auth)[0] == 200
        assert _post(url, Authorization=auth, Host="evil.example")[0] == 421
        assert _post(url, Authorization=auth, Origin="http://evil.example")[0] == 403


# --- the body limit ------------------------------------------------------------------------


def test_request_over_the_body_limit_is_refused_and_writes_nothing(store: Path) -> None:
    big = "x" * (5 * 1024 * 1024)

    async def too_big(url: str) -> None:
        async with http_session(url, client="bulky") as session:
            await session.call_tool(
                "save_interaction", {"session": "big", "user": big, "assistant": "ok"}
            )

    async def small(url: str) -> None:
        async with http_session(url, client="bulky") as session:
            saved = await session.call_tool(
                "save_interaction", {"session": "small", "user": "a short one", "assistant": "ok"}
            )
            assert not is_error(saved), text_of(saved)

    with http_server(store, "--init") as url:
        before = _commits(store)
        parts = urlsplit(url)
        # declared too large: refused before the body is read
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
        conn.putrequest("POST", parts.path)
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Accept", "application/json, text/event-stream")
        conn.putheader("Content-Length", str(len(big)))
        conn.endheaders()
        answer = conn.getresponse()
        said = answer.read().decode()
        assert answer.status == 413, said
        # the real limit, not only "too large"
        assert "at most 4,194,304 bytes" in said and "--max-bytes" in said, said
        conn.close()
        assert _commits(store) == before
        # through the client: 2.x raises an MCPError from the call, 1.x's transport fails
        # the whole session with the HTTP 413
        with pytest.raises(Exception) as raised:  # the error differs by major
            asyncio.run(asyncio.wait_for(too_big(url), 120))
        if MAJOR == 2:
            assert "at most 4,194,304 bytes" in repr(raised.value), raised.value
        assert _commits(store) == before
        asyncio.run(small(url))  # the server goes on serving
    assert _commits(store) == before + 1
    assert [row["session"] for row in _log(store)[:1]] == ["small"]
    assert not list(store.glob("**/big*.md"))


# --- read-only -----------------------------------------------------------------------------


def test_read_only_over_http_exposes_only_reads(store: Path) -> None:
    for args in (("init",), ("save", "kept", "--user", "a stored fact", "--assistant", "ok")):
        subprocess.run(
            [sys.executable, "-m", "gitmem", "--repo", str(store), *args],
            check=True,
            capture_output=True,
            env=_env(),
        )
    before = _commits(store)

    async def go(url: str) -> None:
        async with http_session(url, client="reader") as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert names == {
                "search",
                "get_context",
                "load_session",
                "list_sessions",
                "history",
                "diff",
                "blame",
                "facts",
            }
            called = await session.call_tool(
                "save_interaction", {"session": "kept", "user": "sneaky", "assistant": "no"}
            )
            assert is_error(called)
            found = await session.call_tool("search", {"query": "stored fact"})
            assert [h["session"] for h in structured(found)["hits"]] == ["kept"]
            assert "a stored fact" in resource_text(
                await session.read_resource("gitmem://sessions/kept")
            )

    with http_server(store, "--read-only", "--allow-undo") as url:
        asyncio.run(go(url))
    assert _commits(store) == before


# --- concurrency ---------------------------------------------------------------------------

CLIENTS = 8
SAVES = 25
CLI_SAVES = 6


def test_concurrent_http_clients_and_another_process_lose_nothing(store: Path) -> None:
    """8 clients x 25 saves, half to their own session and half to one shared session, while
    a separate ``gitmem save`` process writes to the same store."""
    cli_codes: list[int] = []

    def other_process(go: threading.Event) -> None:
        go.wait(60)
        for n in range(CLI_SAVES):
            sid = "shared" if n % 2 else "cli-own"
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "gitmem",
                    "--repo",
                    str(store),
                    "--agent",
                    "cli-loop",
                    "save",
                    sid,
                    "--user",
                    f"from the cli {n}",
                    "--assistant",
                    "ok",
                ],
                capture_output=True,
                text=True,
                env=_env(),
                timeout=120,
            )
            cli_codes.append(done.returncode)
            assert done.returncode == 0, done.stderr

    async def client(url: str, n: int) -> list[str]:
        ids = []
        async with http_session(url, client=f"client-{n}") as session:
            for k in range(SAVES):
                sid = f"own-{n}" if k % 2 == 0 else "shared"
                saved = await session.call_tool(
                    "save_interaction",
                    {"session": sid, "user": f"client {n} turn {k}", "assistant": "ok"},
                )
                assert not is_error(saved), text_of(saved)
                ids.append(structured(saved)["interaction_id"])
        return ids

    async def clients(url: str, go: threading.Event) -> list[list[str]]:
        go.set()
        return list(await asyncio.gather(*(client(url, n) for n in range(CLIENTS))))

    with http_server(store, "--init") as url:
        before = _commits(store)
        go = threading.Event()
        beside = threading.Thread(target=other_process, args=(go,))
        beside.start()
        ids = asyncio.run(clients(url, go))
        beside.join(300)
    assert cli_codes == [0] * CLI_SAVES

    all_ids = [turn for per_client in ids for turn in per_client]
    assert len(set(all_ids)) == CLIENTS * SAVES
    assert _commits(store) == before + CLIENTS * SAVES + CLI_SAVES
    log = _log(store)[: CLIENTS * SAVES + CLI_SAVES]
    for n in range(CLIENTS):
        mine = [row for row in log if row["agent"] == f"client-{n}"]
        assert len(mine) == SAVES
        assert {row["session"] for row in mine} == {f"own-{n}", "shared"}
        assert {row["via"] for row in mine} == {"mcp"}
    cli = [row for row in log if row["agent"] == "cli-loop"]
    assert len(cli) == CLI_SAVES and not any(row["via"] == "mcp" for row in cli)

    from gitmem import MemoryManager

    with MemoryManager(store, agent="checker") as mm:
        turns = {sid: mm.load_memory(sid) for sid in mm.session_ids()}
    counts = {sid: len(s.interactions) for sid, s in turns.items() if s is not None}
    own = (SAVES + 1) // 2
    assert counts == {
        **{f"own-{n}": own for n in range(CLIENTS)},
        "shared": CLIENTS * (SAVES - own) + CLI_SAVES // 2,
        "cli-own": CLI_SAVES - CLI_SAVES // 2,
    }
    stored = {t.id for s in turns.values() if s is not None for t in s.interactions}
    assert set(all_ids) <= stored
    assert git(store, "status", "--porcelain") == ""
    check = subprocess.run(
        [sys.executable, "-m", "gitmem", "--repo", str(store), "check"],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert check.returncode == 0, check.stdout + check.stderr


# --- stopping ------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_the_server_cleanly(store: Path, sig: signal.Signals) -> None:
    cmd = [
        sys.executable,
        *gitmem_args(store, "--init", "--transport", "streamable-http", "--port", "0"),
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env()
    )
    try:
        assert proc.stderr is not None
        banner = proc.stderr.readline()
        found = re.search(r"at (http://\S+) ", banner)
        assert found, banner
        url = found.group(1)

        async def go() -> None:
            async with http_session(url, client="stopper") as session:
                saved = await session.call_tool(
                    "save_interaction", {"session": "before-stop", "user": "hi", "assistant": "ok"}
                )
                assert not is_error(saved)
                proc.send_signal(sig)  # with the session (and its GET stream) still open
                for _ in range(300):
                    if proc.poll() is not None:
                        break
                    await asyncio.sleep(0.1)

        with contextlib.suppress(Exception):  # the client may notice the server going away
            asyncio.run(go())
        code = proc.wait(30)
        rest = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0, (code, rest)  # the store was closed and the process ended normally
    assert "Traceback" not in rest and "Aborted" not in rest, rest
    assert git(store, "status", "--porcelain") == ""
    assert _log(store)[0]["session"] == "before-stop"


def test_a_client_without_a_name_writes_as_the_agent(store: Path) -> None:
    async def go(url: str) -> None:
        async with http_session(url, client=None) as session:
            saved = await session.call_tool(
                "save_interaction",
                {"session": "anon", "user": "who am I", "assistant": "the default"},
            )
            assert not is_error(saved), text_of(saved)

    with http_server(store, "--init", agent="served-agent") as url:
        asyncio.run(go(url))
    assert _log(store)[0] == {"agent": "served-agent", "via": "mcp", "session": "anon"}


# --- large sessions ------------------------------------------------------------------------


def _joined(pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turns of load_session's pages put back together (as docs/mcp.md says)."""
    turns: list[dict[str, Any]] = []
    for page in pages:
        for turn in page["interactions"]:
            messages = [dict(m) for m in turn["messages"]]
            if turns and turns[-1]["id"] == turn["id"]:  # the next piece of a split turn
                if messages and messages[0].pop("continues", False):
                    turns[-1]["messages"][-1]["content"] += messages.pop(0)["content"]
                turns[-1]["messages"] += messages
            else:
                turns.append({**turn, "messages": messages})
    return turns


def test_a_turn_near_the_cap_is_read_back_in_pages(store: Path) -> None:
    cap = 3 * 1024 * 1024
    line = 'line {:07d}: "quoted" \\ back\tslash, é ü 漢字 and a tab\n'
    big = (
        "".join(line.format(i) for i in range(cap // 50))
        .encode()[: cap - 4000]
        .decode("utf-8", "ignore")
    )
    assert cap - 10_000 < len(big.encode()) <= cap - 2000

    async def main(url: str) -> list[dict[str, Any]]:
        async with http_session(url) as session:
            saved = await session.call_tool(
                "save_interaction", {"session": "big", "user": big, "assistant": "noted"}
            )
            assert not is_error(saved), text_of(saved)
            for i in range(3):
                done = await session.call_tool(
                    "save_interaction", {"session": "big", "user": f"small {i}", "assistant": "ok"}
                )
                assert not is_error(done), text_of(done)
            pages = []
            cursor = None
            while True:  # the default answer, then every next page, fits the client's limit
                args = (
                    {"session": "big"} if cursor is None else {"session": "big", "cursor": cursor}
                )
                got = await session.call_tool("load_session", args)
                assert not is_error(got), text_of(got)[:500]
                pages.append(structured(got))
                cursor = pages[-1]["next"]
                if cursor is None:
                    break
                assert f"cursor={cursor!r}" in text_of(got) or cursor in text_of(got)
                assert len(pages) < 100
            # a small session is one page, as before
            small = await session.call_tool("save_interaction", {"session": "tiny", "user": "hi"})
            assert not is_error(small)
            one = structured(await session.call_tool("load_session", {"session": "tiny"}))
            assert one["next"] is None and len(one["interactions"]) == 1
            # limit: at most that many turns a page
            two = structured(
                await session.call_tool(
                    "load_session", {"session": "big", "cursor": "1", "limit": 2}
                )
            )
            assert [t["messages"][0]["content"] for t in two["interactions"]] == [
                "small 0",
                "small 1",
            ] and two["next"] == "3"
            bad = await session.call_tool("load_session", {"session": "big", "cursor": "x.y"})
            assert is_error(bad) and "cursor" in text_of(bad)
            return pages

    with http_server(store, "--init", "--max-bytes", str(cap)) as url:
        pages = asyncio.run(main(url))
    assert len(pages) > 3
    turns = _joined(pages)
    assert [t["messages"][0]["content"] for t in turns[1:]] == ["small 0", "small 1", "small 2"]
    assert turns[0]["messages"][0]["content"] == big
    assert turns[0]["messages"][1]["content"] == "noted"
    assert all(p["total_interactions"] == 4 for p in pages)
