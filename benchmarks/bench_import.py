"""Turns per second of ``gitmem import nanobot`` on a generated nanobot home, and its peak memory.

    python benchmarks/bench_import.py --mb 100 --runs 3

The generated home has nanobot 0.3.5's layout (``sessions/<workspace id>/<base64url(key)>.jsonl``
plus a workspace with ``memory/history.jsonl``), sessions of ~400 turns of varied text with a
tool call now and then, a hidden checkpoint and a ``_last_summary``. Each run imports it into
a fresh store (batch mode: one commit) in a child process, which reports its own wall time and
peak RSS. Comparators measured in the same run, on the same files:

  read-json   only reading the files: ``json.loads`` of every line (the floor any importer
              pays), in turns/s
  re-import   the same import again over the imported store (nothing new: no commit)

Absolute times drift on a shared machine; the ratios measured in the same run are the figures.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

WORDS = (
    "invoice",
    "ledger",
    "postgres",
    "docker",
    "pagination",
    "cursor",
    "deploy",
    "review",
    "budget",
    "meeting",
    "travel",
    "Lisbon",
    "Berlin",
    "family",
    "birthday",
    "hiking",
    "recipe",
    "garden",
    "guitar",
    "concert",
    "sprint",
    "migration",
    "index",
    "query",
    "latency",
    "cache",
    "token",
    "summary",
    "memory",
    "schedule",
    "reminder",
)

WORKSPACE_ID = "0123456789abcdef0123456789abcdef"


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def write_session(folder: Path, key: str, turns: int, rng: random.Random, start: datetime) -> int:
    """One nanobot session file; returns the number of turns written."""
    when = start
    lines = [
        json.dumps(
            {
                "_type": "metadata",
                "key": key,
                "created_at": start.isoformat(),
                "updated_at": (start + timedelta(minutes=turns)).isoformat(),
                "metadata": {
                    "_last_summary": {
                        "text": "- [permanent] "
                        + sentence(rng, 12)
                        + "\n- [durable] "
                        + sentence(rng, 10),
                        "last_active": start.isoformat(),
                    }
                },
                "last_archived": 0,
            }
        )
    ]
    for n in range(turns):
        when += timedelta(seconds=37)
        lines.append(
            json.dumps(
                {
                    "role": "user",
                    "content": sentence(rng, rng.randint(8, 30)),
                    "timestamp": when.isoformat(),
                }
            )
        )
        if n % 9 == 4:
            call = {
                "id": f"c{n}",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a.md"}'},
            }
            lines.append(
                json.dumps(
                    {
                        "role": "assistant",
                        "content": "Let me look.",
                        "tool_calls": [call],
                        "timestamp": when.isoformat(),
                    }
                )
            )
            lines.append(
                json.dumps(
                    {
                        "role": "tool",
                        "tool_call_id": f"c{n}",
                        "name": "read_file",
                        "content": sentence(rng, 40),
                        "timestamp": when.isoformat(),
                    }
                )
            )
        lines.append(
            json.dumps(
                {
                    "role": "assistant",
                    "content": sentence(rng, rng.randint(15, 60)),
                    "timestamp": (when + timedelta(seconds=2)).isoformat(),
                    "latency_ms": rng.randint(100, 900),
                }
            )
        )
    lines.append(
        json.dumps(
            {
                "role": "user",
                "content": "Continue the active task.",
                "_hidden_history": True,
                "timestamp": when.isoformat(),
            }
        )
    )
    name = base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")
    (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return turns


def make_home(root: Path, megabytes: float, seed: int = 7) -> tuple[int, int]:
    """A nanobot home of about ``megabytes``; (turns, bytes)."""
    rng = random.Random(seed)
    sessions = root / "sessions" / WORKSPACE_ID
    sessions.mkdir(parents=True)
    workspace = root / "workspace"
    (workspace / ".nanobot").mkdir(parents=True)
    (workspace / ".nanobot" / "workspace-id").write_text(WORKSPACE_ID)
    (workspace / "memory").mkdir()
    (workspace / "memory" / "MEMORY.md").write_text("# Long-term Memory\n\n- " + sentence(rng, 20))
    with open(workspace / "memory" / "history.jsonl", "w") as handle:
        for n in range(200):
            handle.write(
                json.dumps(
                    {
                        "cursor": n + 1,
                        "timestamp": "2026-01-01 10:00",
                        "content": sentence(rng, 30),
                        "session_key": "cli:direct",
                    }
                )
                + "\n"
            )
    turns = total = 0
    start = datetime(2026, 1, 1, 9, 0)
    number = 0
    while total < megabytes * 1e6:
        key = f"telegram:{100000 + number}" if number % 3 else f"cli:direct-{number}"
        turns += write_session(sessions, key, 400, rng, start + timedelta(days=number))
        total = sum(p.stat().st_size for p in sessions.iterdir())
        number += 1
    return turns + 201, total  # 200 history entries, 1 MEMORY.md version


CHILD = """
import json, resource, sys, time
from gitmem import MemoryManager
from gitmem.importers.nanobot import import_nanobot
from gitmem.store.repository import Housekeeping
store, home = sys.argv[1], sys.argv[2]
mm = MemoryManager(store, init=True, agent="bench", housekeeping=Housekeeping(enabled=False))
ready_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
started = time.perf_counter()
result = import_nanobot(mm, home, tz="UTC")
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "added": len(result.added), "commit": result.commit,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "ready_mb": ready_mb}))
"""


def child(store: Path, home: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(store), str(home)],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def read_json(home: Path) -> float:
    started = time.perf_counter()
    for path in (home / "sessions").rglob("*.jsonl"):
        with open(path, "rb") as handle:
            for line in handle:
                json.loads(line)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=100.0, help="size of the session files")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home = root / "home"
        started = time.perf_counter()
        turns, size = make_home(home, args.mb)
        print(
            f"generated {size / 1e6:.1f} MB, {turns} turns in "
            f"{time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
        imports, again, reads, peaks, ready = [], [], [], [], []
        for run in range(args.runs):
            store = root / f"store{run}"
            first = child(store, home)
            assert first["added"] == turns, (first["added"], turns)
            imports.append(first["seconds"])
            peaks.append(first["peak_mb"])
            ready.append(first["ready_mb"])
            second = child(store, home)
            assert second["commit"] is None and second["added"] == 0
            again.append(second["seconds"])
            reads.append(read_json(home))
            shutil.rmtree(store)
        rate = turns / statistics.median(imports)
        rows = [
            ("import (batch, one commit)", statistics.median(imports), rate),
            ("re-import (no change)", statistics.median(again), turns / statistics.median(again)),
            ("read-json (floor)", statistics.median(reads), turns / statistics.median(reads)),
        ]
        mine = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        largest = max(p.stat().st_size for p in (home / "sessions").rglob("*.jsonl")) / 1e6
        peak, base = statistics.median(peaks), statistics.median(ready)
        print(
            f"\n{size / 1e6:.1f} MB nanobot home, {turns} turns, {args.runs} runs "
            f"(median); peak RSS of an import {peak:.0f} MB, {base:.0f} MB of it before "
            f"the import started, so {peak - base:.0f} MB for the import; the largest source "
            f"session {largest:.2f} MB (this process: {mine:.0f} MB)\n"
        )
        print("| what | median s | turns/s | import time / this |")
        print("|---|---|---|---|")
        for name, seconds, per in rows:
            print(
                f"| {name} | {seconds:.2f} | {per:,.0f} | "
                f"{statistics.median(imports) / seconds:.2f} |"
            )
        print(
            f"\ntarget >= 25,000 turns/s in batch mode: "
            f"{'met' if rate >= 25000 else 'NOT met'} ({rate:,.0f}); memory for the import "
            f"<= 2x the largest source session and flat in the total size: compare "
            f"{peak - base:.0f} MB across --mb"
        )


if __name__ == "__main__":
    main()
