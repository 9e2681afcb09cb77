"""Server time of the dashboard's sessions, session, links and facts pages on a large store.

    python benchmarks/bench_web_pages.py [--sessions 10000] [--runs 40] [--path DIR]

Builds (or reuses, with ``--path``) the synthetic store of ``bench_search.py``, then asks
each page ``--runs`` times through Starlette's TestClient and reads the ``Server-Timing``
header the security middleware sets (the time from the request's arrival to the response
start: routing, the manager's work, rendering). Prints a Markdown table of medians and p95s,
with the issue's target and the ratio to ``list_sessions`` (what the sessions page would
cost without the index) measured in the same run. The first request of each page is not
counted: it opens (or builds) the search index.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_search import Corpus, synthetic_store
from starlette.testclient import TestClient
from timing import median_p95_ms

from gitmem.web import WebOptions, create_app

_DUR = re.compile(r"app;dur=([0-9.]+)")


def _server_ms(client: TestClient, url: str, runs: int) -> list[float]:
    response = client.get(url)  # the first one opens the index and warms the caches
    assert response.status_code == 200, (url, response.status_code, response.text[:300])
    samples = []
    for _ in range(runs):
        response = client.get(url)
        found = _DUR.search(response.headers["server-timing"])
        assert found is not None
        samples.append(float(found.group(1)) / 1000)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--path", help="keep the store here (reused when it exists)")
    args = parser.parse_args()
    base = Path(args.path) if args.path else Path(tempfile.mkdtemp(prefix="gitmem-web-"))
    mm, _texts, _ids = synthetic_store(base / "store", Corpus(), args.sessions, args.turns)
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
        f"{args.sessions} sessions of {args.turns} turns at {base / 'store'}"
    )
    client = TestClient(create_app(mm, WebOptions()))
    middle = f"s{args.sessions // 2:05d}"
    pages = [
        ("/sessions (page 1)", "/sessions", "50"),
        ("/sessions?tag=topic7&page=3", "/sessions?tag=topic7&page=3", "50"),
        (
            "/sessions?since&until&page=20",
            "/sessions?since=2024-01-01&until=2030-01-01&page=20",
            "50",
        ),
        (f"/sessions/{middle}", f"/sessions/{middle}", "50"),
        (f"/sessions/{middle}?blame=1", f"/sessions/{middle}?blame=1", "50"),
        ("/links", "/links", "-"),
        ("/facts", "/facts", "-"),
    ]
    results = {
        name: median_p95_ms(_server_ms(client, url, args.runs)) for name, url, _target in pages
    }
    started = time.perf_counter()
    mm.list_sessions()
    scan = (time.perf_counter() - started) * 1000
    print("\n| page | median ms | p95 ms | target ms | list_sessions ms | median / list_sessions |")
    print("|---|---|---|---|---|---|")
    for name, _url, target in pages:
        median, p95 = results[name]
        print(
            f"| {name} | {median:.1f} | {p95:.1f} | {target} | {scan:.0f} | {median / scan:.4f} |"
        )
    mm.close()


if __name__ == "__main__":
    main()
