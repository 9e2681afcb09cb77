"""``list_sessions`` on a large store: from the search index's session rows vs every file.

    python benchmarks/bench_list_sessions.py [--sessions 10000] [--runs 5] [--path DIR]

Builds (or reuses, with ``--path``) the synthetic store of ``bench_search.py`` and times
``list_sessions`` with a few filters two ways in the same run: as it is (the index's rows
name the files, only those are parsed) and the comparator, reading the tree and parsing
every file (the store's ``listing`` hook off). "cold" empties the parsed-session cache
before each call (a new process), "warm" does not. The index is built before timing.
Then ``list_session_infos`` (the same sessions without their turns, from the index's rows
alone, no file parsed) against the same comparator, after checking that both give equal
listings: cold empties the index's caches of listings too (as in a new process), warm
asks again with nothing changed. Last, ``list_session_infos()`` unfiltered in a new process
(opening the store included, imports not), wall and CPU: as it runs (the listing the last
process kept in the index is read), with nothing kept (the rows are read, and the listing
kept), and with ``--baseline DIR`` the same in another checkout of gitmem, runs alternating.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_search import Corpus, synthetic_store
from timing import median_p95_ms, timed

from gitmem.manager import MemoryManager
from gitmem.models import SessionInfo

CASES: list[tuple[str, dict[str, Any]]] = [
    ("tags=[topic7] (1 in 20)", {"tags": ["topic7"]}),
    ("since (the newest ~12%)", {"since": "2030-01-01"}),
    ("project, no match", {"project": "nope"}),
    ("no filter (every session)", {}),
]


def _time(
    mm: MemoryManager, filters: dict[str, Any], runs: int, *, index: bool, cold: bool
) -> tuple[tuple[float, float], int]:
    store = mm._store
    hook = store.listing
    store.listing = hook if index else None
    samples: list[float] = []
    found = 0
    try:
        for _ in range(runs):
            if cold:
                store._sessions.clear()
            samples.append(timed(lambda: mm.list_sessions(**filters)))
        found = len(mm.list_sessions(**filters))
    finally:
        store.listing = hook
    return median_p95_ms(samples), found


def _forget(index: Any) -> None:
    """Empty the index's caches of listings: as in a new process."""
    index.session_table._infos.clear()
    index.session_table._last_listed = (None, {})
    index.session_table._last_infos = (None, [], {})


def _time_infos(mm: MemoryManager, filters: dict[str, Any], runs: int, *, cold: bool) -> float:
    forget = _forget
    samples = []
    for _ in range(runs):
        if cold:
            mm._search._store_index().run(forget)
        samples.append(timed(lambda: mm.list_session_infos(**filters)))
    return median_p95_ms(samples)[0]


def _infos_table(mm: MemoryManager, runs: int) -> None:
    print(
        "\n| list_session_infos filter | sessions | index cold median ms | index warm median ms "
        "| list_sessions, every file (comparator) median ms | cold / comparator | target |"
    )
    print("|---|---|---|---|---|---|---|")
    store = mm._store
    hook = store.listing
    for name, filters in CASES:
        store.listing = None
        store._sessions.clear()
        scan = median_p95_ms([timed(lambda: mm.list_sessions(**filters)) for _ in range(2)])[0]  # noqa: B023
        parsed = [SessionInfo.of(s) for s in mm.list_sessions(**filters)]
        store.listing = hook
        assert mm.list_session_infos(**filters) == parsed, name  # the same answer
        cold = _time_infos(mm, filters, runs, cold=True)
        warm = _time_infos(mm, filters, runs, cold=False)
        print(
            f"| {name} | {len(parsed)} | {cold:.1f} | {warm:.1f} | {scan:.0f} "
            f"| {cold / scan:.4f}x | ≤ 50 ms |"
        )


# run in a child: opening the store and the first listing, as a new process does them
_CHILD = """
import sys, time
from gitmem.manager import MemoryManager
wall, cpu = time.perf_counter(), time.process_time()
mm = MemoryManager(sys.argv[1])
n = len(mm.list_session_infos())
print(time.perf_counter() - wall, time.process_time() - cpu, n)
"""


def _forget_kept(store: Path) -> None:
    """Drop the listing the last process kept in the index (if this gitmem keeps one)."""
    db = sqlite3.connect(store / ".git" / "gitmem" / "index.sqlite", isolation_level=None)
    try:
        db.execute("DELETE FROM kept")
    except sqlite3.OperationalError:  # no such table
        pass
    finally:
        db.close()


def _new_process(
    store: Path, tree: Path, runs: int, *, forget: bool = False
) -> list[tuple[float, float]]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: modules read from bytecode
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "gitmem")], env=env)
    out = []
    for _ in range(runs):
        if forget:
            _forget_kept(store)
        done = subprocess.run(
            [sys.executable, "-P", "-c", _CHILD, str(store)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        wall, cpu, _n = done.stdout.split()
        out.append((float(wall), float(cpu)))
    return out


def _new_process_table(store: Path, runs: int, baseline: str | None) -> None:
    here = Path(__file__).resolve().parent.parent
    trees = {"this tree": here, "this tree, nothing kept": here}
    if baseline:
        trees["baseline"] = Path(baseline).resolve()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    for _ in range(runs):  # alternating, so all see the same load
        for name, tree in trees.items():
            samples[name] += _new_process(store, tree, 1, forget=name.endswith("nothing kept"))
    print(
        f"\n`list_session_infos()` unfiltered in a new process (load {os.getloadavg()[0]:.1f})"
        "\n\n| tree | wall median ms | CPU median ms | CPU / this tree | target |"
        "\n|---|---|---|---|---|"
    )
    mine = median_p95_ms([cpu for _w, cpu in samples["this tree"]])[0]
    for name, got in samples.items():
        wall = median_p95_ms([w for w, _c in got])[0]
        cpu = median_p95_ms([c for _w, c in got])[0]
        print(f"| {name} | {wall:.1f} | {cpu:.1f} | {cpu / mine:.2f}x | ≤ 50 ms |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--path", help="keep the store here (reused when it exists)")
    parser.add_argument("--baseline", help="another gitmem source tree, timed in new processes")
    parser.add_argument("--new-process-only", action="store_true", help="only the new-process rows")
    args = parser.parse_args()
    base = Path(args.path) if args.path else Path(tempfile.mkdtemp(prefix="gitmem-list-"))
    mm, _texts, _ids = synthetic_store(base / "store", Corpus(), args.sessions, args.turns)
    mm.search("warm up")  # the index is built (or caught up) before timing
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
        f"{args.sessions} sessions of {args.turns} turns at {base / 'store'}"
    )
    print(
        "\n| filter | sessions | index cold median / p95 ms | index warm median ms "
        "| every file (comparator) median ms | cold / comparator | target |"
    )
    if args.new_process_only:
        mm.close()
        _new_process_table(base / "store", max(args.runs, 5), args.baseline)
        return
    print("|---|---|---|---|---|---|---|")
    for name, filters in CASES:
        runs = 1 if not filters else args.runs
        (cold, cold95), found = _time(mm, filters, runs, index=True, cold=True)
        (warm, _), _ = _time(mm, filters, runs, index=True, cold=False)
        (scan, _), _ = _time(mm, filters, runs, index=False, cold=True)
        print(
            f"| {name} | {found} | {cold:.1f} / {cold95:.1f} | {warm:.1f} | {scan:.0f} "
            f"| {cold / scan:.3f}x | ≤ 50 ms |"
        )
    _infos_table(mm, args.runs)
    mm.close()
    _new_process_table(base / "store", max(args.runs, 5), args.baseline)


if __name__ == "__main__":
    main()
