"""Server time of the dashboard's pages on a large store, against the library calls they
wrap, and the first paint of the sessions page in Chromium, in one run.

    python benchmarks/bench_web.py                          # 10,000 sessions of 10 turns
    python benchmarks/bench_web.py --path /tmp/bw --sessions 2000 --targets 10 --paints 5

The store is bench_search.py's synthetic one (``--path`` keeps it and reuses it; each run
saves one turn, whose commit is the diff page measured). For each page, ``--targets``
different sessions (or queries, or commits) are asked for: one warm-up request each (its
time is the "first" column: a session parsed cold), then ``--repeat`` timed requests. The
time is the server's own (the ``Server-Timing: app;dur=`` header the security middleware
sets around the whole app), measured two ways:
  in-process   Starlette's TestClient on ``create_app`` (no network, no uvicorn)
  loopback     a real ``gitmem web --port 0`` subprocess, asked with urllib over 127.0.0.1
               (its wall time per request, client side, is shown too)
Comparators, same targets, same run, on a manager of their own: ``mm.load_memory(id)`` for
the session page, ``mm.search(q)`` for the search page, ``mm.diff(b=sha)`` for the diff
page, ``mm.blame(id)`` for the blame view, ``mm.link_graph()`` for the links pages (a store
written by this script links each session to two others, and holds facts learned from
some; the graph draws the 300 most linked, or one session's two hops with ?focus=); the
ratio is the page's p50 (in-process) over the comparator's p50: what the page adds to the library.
First paint: ``--paints`` fresh Chromium contexts (Debian's /usr/bin/chromium through
Playwright) load /sessions from the loopback server; the median first-contentful-paint.
Targets: sessions, session and links page p50 <= 50 ms, search <= 60 ms, diff <= 50 ms, first
paint <= 300 ms. A page that answers other than 200 (a 404 before it exists) is reported
as such, not timed.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from bench_search import START, Corpus, synthetic_store
from timing import median_p95_ms

from gitmem import MemoryManager
from gitmem.store.repository import Housekeeping

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
FACTS = 100  # facts remembered in a store this script writes
_TIMING = re.compile(r"app;dur=([0-9.]+)")
_BANNER = re.compile(r"at (http://[^\s/]+)/")


@dataclass
class Page:
    """One page measured: its URLs (one per target), target, and the library call behind it."""

    name: str
    urls: list[str]
    target: str = "-"
    comparator: str = "-"
    library: Callable[[int], object] | None = None  # called with the target's index
    samples: dict[str, list[float]] = field(default_factory=dict)
    first: list[float] = field(default_factory=list)
    status: dict[str, int] = field(default_factory=dict)


def _server_ms(headers: Any) -> float:
    """The app's own time (seconds) from a response's headers (httpx's or urllib's)."""
    value = headers.get("server-timing") or ""
    found = _TIMING.search(value)
    if not found:
        raise SystemExit(f"no Server-Timing header in the answer ({value!r})")
    return float(found.group(1)) / 1000


def _http_get(url: str) -> tuple[int, float, float]:
    """(status, server seconds, wall seconds) of one GET over loopback."""
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=120) as answer:
            answer.read()
            status, headers = answer.status, answer.headers
    except urllib.error.HTTPError as exc:
        exc.read()
        status, headers = exc.code, exc.headers
    wall = time.perf_counter() - started
    return status, _server_ms(headers) if status == 200 else 0.0, wall


def _pages(
    mm: MemoryManager, ids: list[str], queries: list[str], save_sha: str, shas: list[str]
) -> list[Page]:
    """The pages of the issue's targets, each with its per-target URLs and comparator."""
    q = [f"/search?{urlencode({'q': query})}" for query in queries]
    session = [f"/sessions/{quote(i, safe='')}" for i in ids]
    return [
        Page("sessions list", ["/sessions"] * len(ids), "<= 50"),
        Page("sessions list page 50", ["/sessions?page=50"] * len(ids), "<= 50"),
        Page("session", session, "<= 50", "mm.load_memory(id)", lambda n: mm.load_memory(ids[n])),
        Page(
            "session ?blame=1",
            [u + "?blame=1" for u in session],
            "-",
            "mm.blame(id)",
            lambda n: mm.blame(ids[n]),
        ),
        Page("search", q, "<= 60", "mm.search(q)", lambda n: mm.search(queries[n])),
        Page("links", ["/links"] * len(ids), "<= 50", "mm.link_graph()", lambda n: mm.link_graph()),
        Page(
            "links ?focus=id",
            [f"/links?focus={quote(i, safe='')}" for i in ids],
            "<= 50",
            "mm.link_graph()",
            lambda n: mm.link_graph(),
        ),
        Page(
            "links ?zoom=4",
            ["/links?zoom=4&x=30&y=60"] * len(ids),
            "<= 50",
            "mm.link_graph()",
            lambda n: mm.link_graph(),
        ),
        Page("history", ["/history"] * len(ids)),
        Page(
            "commit diff (one save)",
            [f"/commits/{save_sha}"] * len(ids),
            "<= 50",
            "mm.diff(b=sha)",
            lambda n: mm.diff(None, None, save_sha),
        ),
        Page(
            "commit diff (saves)",
            [f"/commits/{sha}" for sha in shas],
            "<= 50",
            "mm.diff(b=sha)",
            lambda n: mm.diff(None, None, shas[n]),
        ),
    ]


def _measure_in_process(pages: list[Page], web: MemoryManager, repeat: int) -> None:
    from starlette.testclient import TestClient

    from gitmem.web import WebOptions, create_app

    client = TestClient(create_app(web, WebOptions()))
    for page in pages:
        timed: list[float] = []
        for url in page.urls:
            answer = client.get(url)
            page.status["in-process"] = answer.status_code
            if answer.status_code != 200:
                break
            page.first.append(_server_ms(answer.headers))
            for _ in range(repeat):
                timed.append(_server_ms(client.get(url).headers))
        page.samples["in-process"] = timed


def _measure_library(pages: list[Page], repeat: int) -> None:
    for page in pages:
        if page.library is None:
            continue
        timed: list[float] = []
        for n in range(len(page.urls)):
            page.library(n)  # warm-up, as for the pages
            for _ in range(repeat):
                started = time.perf_counter()
                page.library(n)
                timed.append(time.perf_counter() - started)
        page.samples["library"] = timed


def _measure_loopback(pages: list[Page], base: str, repeat: int) -> None:
    for page in pages:
        server: list[float] = []
        wall: list[float] = []
        for url in page.urls:
            status, _, _ = _http_get(base + url)
            page.status["loopback"] = status
            if status != 200:
                break
            for _ in range(repeat):
                _, took, whole = _http_get(base + url)
                server.append(took)
                wall.append(whole)
        page.samples["loopback"] = server
        page.samples["loopback wall"] = wall


def _first_paint(base: str, loads: int) -> tuple[dict[str, list[float]], str]:
    """First-contentful-paint of /sessions in ``loads`` fresh Chromium contexts, with the
    navigation's response start and end (seconds from the navigation's start)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return {}, "playwright is not installed (pip install -e '.[test]')"
    if not Path(CHROMIUM).exists():
        return {}, f"no {CHROMIUM} (apt-get install -y chromium)"
    paints: dict[str, list[float]] = {"fcp": [], "responseStart": [], "responseEnd": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for n in range(loads + 1):  # the first load warms the server and the browser
                context = browser.new_context()
                tab = context.new_page()
                answer = tab.goto(base + "/sessions", wait_until="load")
                if answer is None or answer.status != 200:
                    context.close()
                    return {}, f"/sessions answered HTTP {answer.status if answer else '?'}"
                fcp = tab.evaluate(
                    "() => new Promise(done => { const look = () => { const e = performance"
                    ".getEntriesByName('first-contentful-paint')[0]; if (e) done(e.startTime);"
                    " else setTimeout(look, 20); }; look(); })"
                )
                nav = tab.evaluate(
                    "() => { const e = performance.getEntriesByType("
                    "'navigation')[0]; return [e.responseStart, e.responseEnd]; }"
                )
                context.close()
                if n:
                    paints["fcp"].append(float(fcp) / 1000)
                    paints["responseStart"].append(float(nav[0]) / 1000)
                    paints["responseEnd"].append(float(nav[1]) / 1000)
        finally:
            browser.close()
    return paints, ""


def _start_server(store: Path) -> tuple[subprocess.Popen[str], str]:
    cmd = [
        sys.executable,
        "-m",
        "gitmem",
        "--repo",
        str(store),
        "--agent",
        "bench",
        "web",
        "--port",
        "0",
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stderr is not None
    banner = proc.stderr.readline()
    found = _BANNER.search(banner)
    if not found:
        proc.kill()
        raise SystemExit(f"gitmem web did not start: {banner}{proc.stderr.read()}")
    return proc, found.group(1)


def _cell(samples: list[float] | None, status: int | None) -> tuple[str, str]:
    if status is not None and status != 200:
        return f"HTTP {status}", ""
    if not samples:
        return "-", "-"
    p50, p95 = median_p95_ms(samples)
    return f"{p50:.2f}", f"{p95:.2f}"


def _report(pages: list[Page]) -> None:
    print(
        "| page | target p50 ms | in-process p50 | p95 | loopback p50 | p95 | loopback wall "
        "p50 | first (cold) p50 | comparator | comparator p50 | in-process / comparator |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for page in pages:
        local = _cell(page.samples.get("in-process"), page.status.get("in-process"))
        loop = _cell(page.samples.get("loopback"), page.status.get("loopback"))
        wall = _cell(page.samples.get("loopback wall"), page.status.get("loopback"))[0]
        first = _cell(page.first, page.status.get("in-process"))[0]
        lib = page.samples.get("library")
        lib_p50 = median_p95_ms(lib)[0] if lib else None
        mine = page.samples.get("in-process")
        ratio = (
            f"{median_p95_ms(mine)[0] / lib_p50:.1f}x"
            if mine and lib_p50 and page.status.get("in-process") == 200
            else ""
        )
        print(
            f"| {page.name} | {page.target} | {local[0]} | {local[1]} | {loop[0]} | {loop[1]} "
            f"| {wall} | {first} | {page.comparator} | "
            f"{'' if lib_p50 is None else f'{lib_p50:.2f}'} | {ratio} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=10, help="interactions per session")
    parser.add_argument("--path", help="keep the store here (reused when it exists)")
    parser.add_argument(
        "--targets", type=int, default=20, help="different sessions / queries / commits per page"
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed requests per target")
    parser.add_argument("--paints", type=int, default=10, help="first-paint page loads")
    parser.add_argument("--no-loopback", action="store_true", help="skip the real server")
    args = parser.parse_args()
    base = Path(args.path) if args.path else Path(tempfile.mkdtemp(prefix="gitmem-bench-web-"))
    store = base / "store"
    built = store.exists()
    started = time.perf_counter()
    corpus = Corpus()
    mm, texts, ids = synthetic_store(store, corpus, args.sessions, args.turns, links=2)
    if not mm.facts():  # facts learned from sessions: the graph hangs them beside their sources
        for n in range(0, args.sessions, max(1, args.sessions // FACTS)):  # a commit each
            mm.remember(f"bench fact {n}: " + texts[n * args.turns], source=ids[n * args.turns])
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(
        f"store: {args.sessions} sessions, {len(texts)} interactions at {store}"
        + ("" if built else f" (written in {time.perf_counter() - started:.1f} s)")
    )
    rng = random.Random(16)
    picks = [rng.randrange(len(texts)) for _ in range(args.targets)]
    chosen = [ids[at] for at in picks]
    queries = [corpus.query(texts[at]) for at in picks]
    saved = [
        mm.save_interaction(
            chosen[n],
            f"bench web turn {n}: " + queries[n],
            "noted",
            timestamp=START + timedelta(days=5000, minutes=n),
        )
        for n in range(args.targets)
    ]  # the commits of the diff pages
    shas = [sha for sha in saved if sha]
    mm.search(queries[0])  # the index catches up once, outside the timings
    mm.close()
    library = MemoryManager(store, agent="bench", housekeeping=Housekeeping(enabled=False))
    web = MemoryManager(store, agent="bench", via="web", housekeeping=Housekeeping(enabled=False))
    pages = _pages(library, chosen, queries, shas[-1], shas)
    _measure_library(pages, args.repeat)
    _measure_in_process(pages, web, args.repeat)
    paints: dict[str, list[float]] = {}
    note = "skipped (--no-loopback)"
    if not args.no_loopback:
        proc, url = _start_server(store)
        try:
            _measure_loopback(pages, url, args.repeat)
            paints, note = _first_paint(url, args.paints)
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(60)
            if code != 0:
                print(f"(gitmem web exited with {code})")
    print()
    _report(pages)
    print()
    if paints:
        p50, p95 = median_p95_ms(paints["fcp"])
        print(
            f"first contentful paint of /sessions in Chromium over loopback: median "
            f"{p50:.0f} ms, p95 {p95:.0f} ms over {len(paints['fcp'])} fresh loads (target "
            f"<= 300 ms); of which the HTML: first byte at median "
            f"{median_p95_ms(paints['responseStart'])[0]:.0f} ms, last byte at "
            f"{median_p95_ms(paints['responseEnd'])[0]:.0f} ms"
        )
    else:
        print(f"first contentful paint: not measured: {note}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    library.close()
    web.close()


if __name__ == "__main__":
    main()
