"""What a tool call through ``gitmem mcp`` costs over gitmem's own call, in one run.

    python benchmarks/bench_mcp.py --sessions 10000 --calls 200 --clients 8 --client-saves 100

Builds one store of ``--sessions`` one-turn sessions (as bench_save.py does), then three
identical copies of it, one per path, so no path pays for another's commits:
  in-process   ``MemoryManager.save_interaction`` / ``search`` (the comparator)
  stdio        ``gitmem mcp`` as a subprocess, the ``mcp`` client over stdin/stdout
  HTTP         ``gitmem mcp --transport streamable-http`` on 127.0.0.1, one client
The calls are interleaved (a save on each path to the same random session, then a search on
each path for the same query, then a ``ping`` on each transport), so machine noise falls on
every path alike. Reported: p50 and p95 per path, the overhead p50(mcp) - p50(in-process)
against the issue's targets (+3 ms stdio, +5 ms HTTP), the ratio, and how much of the
overhead is left once the transport's own round trip (the ping: SDK client and server, no
tool, no gitmem) is taken off. Then ``--clients`` HTTP clients save ``--client-saves``
turns each at once to the HTTP store: every turn must be in its session afterwards (none
lost), with the total time and saves/s. ``GITMEM_MCP_PROFILE=DIR`` makes each server write
a cProfile of itself to DIR when it stops.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench_save import build_store
from mcp import ClientSession, StdioServerParameters
from mcp import types as mcp_types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from timing import median_p95_ms as _ms

from gitmem import MemoryManager

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"stdio": 3.0, "HTTP": 5.0}
PATHS = ("in-process", "stdio", "HTTP")
_BANNER = re.compile(r"at (http://\S+) ")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _server_cmd(store: Path, *args: str) -> list[str]:
    """The server's command line; under cProfile when GITMEM_MCP_PROFILE names a folder."""
    lead = [sys.executable]
    profile = os.environ.get("GITMEM_MCP_PROFILE")
    if profile:
        Path(profile).mkdir(parents=True, exist_ok=True)
        lead += ["-m", "cProfile", "-o", str(Path(profile) / f"{store.name}.prof")]
    return [*lead, "-m", "gitmem", "--repo", str(store), "--agent", "bench", "mcp", *args]


def _info(name: str) -> Any:
    return mcp_types.Implementation(name=name, version="1.0")


@contextlib.asynccontextmanager
async def stdio_session(store: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=_server_cmd(store)[1:], env=_env())
    async with (
        stdio_client(params) as streams,
        ClientSession(streams[0], streams[1], client_info=_info("bench-stdio")) as session,
    ):
        await session.initialize()
        yield session


@contextlib.contextmanager
def http_server(store: Path) -> Any:
    """``gitmem mcp`` over streamable HTTP on a free loopback port; yields its URL."""
    proc = subprocess.Popen(
        _server_cmd(store, "--transport", "streamable-http", "--port", "0"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = _BANNER.search(line)
        if not found:
            raise SystemExit(f"gitmem mcp did not start: {line}{proc.stderr.read()}")
        yield found.group(1)
    finally:
        proc.send_signal(2)  # SIGINT: a clean stop, so a profile gets written
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.asynccontextmanager
async def http_session(url: str, client: str) -> AsyncIterator[ClientSession]:
    async with (
        create_mcp_http_client() as http,
        streamable_http_client(url, http_client=http) as streams,
        ClientSession(streams[0], streams[1], client_info=_info(client)) as session,
    ):
        await session.initialize()
        yield session


def _failed(result: Any) -> bool:
    return bool(getattr(result, "is_error", None) or getattr(result, "isError", None))


def _data(result: Any) -> dict[str, Any]:
    data = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
    return dict(data or {})


def _copy(base: Path, name: str) -> Path:
    target = base.parent / name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(base, target, symlinks=True)
    return target


async def latency(
    stores: dict[str, Path], url: str, calls: int, sessions: int, rng: random.Random
) -> dict[str, list[float]]:
    """Interleaved save and search calls on each path; seconds per call, by row name."""
    times: dict[str, list[float]] = {
        f"{op} {path}": [] for op in ("save_interaction", "search") for path in PATHS
    }
    times.update({f"ping {path}": [] for path in PATHS[1:]})
    mm = MemoryManager(stores["in-process"], agent="bench")
    async with stdio_session(stores["stdio"]) as stdio, http_session(url, "bench-http") as web:
        clients = {"stdio": stdio, "HTTP": web}

        async def save(path: str, sid: str, n: int) -> float:
            started = time.perf_counter()
            if path == "in-process":
                mm.save_interaction(sid, f"follow-up {n}", f"reply {n}")
                return time.perf_counter() - started
            result = await clients[path].call_tool(
                "save_interaction",
                {"session": sid, "user": f"follow-up {n}", "assistant": f"reply {n}"},
            )
            took = time.perf_counter() - started
            if _failed(result):
                raise SystemExit(f"save over {path} failed: {result}")
            return took

        async def search(path: str, query: str) -> float:
            started = time.perf_counter()
            if path == "in-process":
                found = len(mm.search(query, 10))
                took = time.perf_counter() - started
            else:
                result = await clients[path].call_tool("search", {"query": query, "k": 10})
                took = time.perf_counter() - started
                found = len(_data(result).get("hits", []))
            if not found:
                raise SystemExit(f"search over {path} found nothing for {query!r}")
            return took

        for n in range(-5, calls):  # the first five warm caches, the index and the managers
            sid = f"session_{rng.randrange(sessions):05d}"
            query = f"question about topic {rng.randrange(97)}"
            for path in PATHS:
                took = await save(path, sid, n)
                if n >= 0:
                    times[f"save_interaction {path}"].append(took)
            for path in PATHS:
                took = await search(path, query)
                if n >= 0:
                    times[f"search {path}"].append(took)
            for path in PATHS[1:]:  # the protocol's round trip alone: no tool, no gitmem
                started = time.perf_counter()
                await clients[path].send_ping()
                if n >= 0:
                    times[f"ping {path}"].append(time.perf_counter() - started)
    mm.close()
    return times


async def concurrent_saves(
    url: str, clients: int, saves: int, sessions: int
) -> tuple[float, list[tuple[str, str]]]:
    """``clients`` HTTP clients saving ``saves`` turns each at once; the seconds it took and
    every (session, interaction id) the server answered with."""
    saved: list[tuple[str, str]] = []

    async def client(n: int) -> None:
        rng = random.Random(100 + n)
        async with http_session(url, f"bench-client-{n}") as session:
            for k in range(saves):
                sid = f"session_{rng.randrange(sessions):05d}"
                result = await session.call_tool(
                    "save_interaction",
                    {"session": sid, "user": f"client {n} turn {k}", "assistant": "ok"},
                )
                if _failed(result):
                    raise SystemExit(f"client {n} save {k} failed: {result}")
                saved.append((sid, _data(result)["interaction_id"]))

    started = time.perf_counter()
    await asyncio.gather(*(client(n) for n in range(clients)))
    return time.perf_counter() - started, saved


def _count_commits(store: Path) -> int:
    return int(
        subprocess.run(
            ["git", "rev-list", "--count", "HEAD"],
            cwd=store,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )


def _missing(store: Path, saved: list[tuple[str, str]]) -> int:
    wanted: dict[str, set[str]] = {}
    for sid, iid in saved:
        wanted.setdefault(sid, set()).add(iid)
    missing = 0
    with MemoryManager(store, agent="bench") as mm:
        for sid, ids in wanted.items():
            found = mm.load_memory(sid)
            have = {t.id for t in found.interactions} if found is not None else set()
            missing += len(ids - have)
    return missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200, help="timed calls per op and path")
    parser.add_argument("--clients", type=int, default=8, help="concurrent HTTP clients")
    parser.add_argument("--client-saves", type=int, default=100, help="saves per client")
    parser.add_argument("--keep", type=Path, help="build the stores here and keep them")
    args = parser.parse_args(argv)

    work = args.keep or Path(tempfile.mkdtemp(prefix="gitmem-mcp-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    base = work / "store"
    if not (base / ".git").exists():
        print(f"building a store with {args.sessions} sessions in {base} ...", file=sys.stderr)
        started = time.perf_counter()
        build_store(base, args.sessions, chunk=2000)
        with MemoryManager(base, agent="bench") as mm:
            mm.search("warm the index", 1)  # build the search index once, copied below
        print(f"built in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    stores = {path: _copy(base, f"store-{path.lower()}") for path in PATHS}
    load_before = os.getloadavg()
    rng = random.Random(7)
    with http_server(stores["HTTP"]) as url:
        print(f"timing {args.calls} calls per op and path, interleaved ...", file=sys.stderr)
        times = asyncio.run(latency(stores, url, args.calls, args.sessions, rng))
        before = _count_commits(stores["HTTP"])
        print(f"{args.clients} clients x {args.client_saves} saves over HTTP ...", file=sys.stderr)
        took, saved = asyncio.run(
            concurrent_saves(url, args.clients, args.client_saves, args.sessions)
        )
    load_after = os.getloadavg()
    added = _count_commits(stores["HTTP"]) - before
    missing = _missing(stores["HTTP"], saved)
    dirty = [
        path
        for path, store in stores.items()
        if subprocess.run(
            ["git", "status", "--porcelain"], cwd=store, capture_output=True, text=True, check=True
        ).stdout
    ]

    medians = {name: _ms(samples) for name, samples in times.items()}
    print(
        f"\nMCP benchmark: {args.sessions:,} sessions, {args.calls} timed calls per op and "
        f"path (interleaved), mcp client and server in separate processes\n"
    )
    print(
        "| call | p50 ms | p95 ms | overhead p50 - in-process ms | target | met | "
        "p50 / in-process | overhead - ping p50 ms |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for op in ("save_interaction", "search"):
        own = medians[f"{op} in-process"][0]
        for path in PATHS:
            median, p95 = medians[f"{op} {path}"]
            if path == "in-process":
                print(f"| {op} in-process | {median:.2f} | {p95:.2f} | | | | 1.00x | |")
                continue
            over = median - own
            goal = TARGETS[path]
            print(
                f"| {op} {path} | {median:.2f} | {p95:.2f} | {over:+.2f} | +{goal:.0f} | "
                f"{'yes' if over <= goal else 'NO'} | {median / own:.2f}x | "
                f"{over - medians[f'ping {path}'][0]:+.2f} |"
            )
    for path in PATHS[1:]:
        median, p95 = medians[f"ping {path}"]
        print(f"| ping {path} (round trip, no tool) | {median:.2f} | {p95:.2f} | | | | | |")
    total = args.clients * args.client_saves
    own_rate = 1000 / medians["save_interaction in-process"][0]
    print(
        "\n| concurrent HTTP saves | clients x saves | answered | commits added | "
        "missing | seconds | saves/s | in-process sequential saves/s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print(
        f"| {args.clients} clients | {args.clients} x {args.client_saves} | {len(saved)} | "
        f"{added} | {missing} | {took:.1f} | {total / took:.1f} | {own_rate:.1f} |"
    )
    print(
        f"\nload average (1 min) before / after: {load_before[0]:.1f} / {load_after[0]:.1f} "
        f"on {os.cpu_count()} cores"
    )
    print(f"git status --porcelain after the run: {'DIRTY ' + str(dirty) if dirty else 'clean'}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    ok = not dirty and missing == 0 and added == total and len(saved) == total
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
