"""Time live capture per turn: nanobot's plugin, or Claude Code's hook (``--claude-code``).

    python benchmarks/bench_capture.py --lengths 10,100,1000 --turns 20
    python benchmarks/bench_capture.py --claude-code --lengths 10,1000 --turns 20

With ``--claude-code``, per length N: a Claude Code transcript of N turns, captured once; then
timed, as the hook runs it (``gitmem capture claude-code`` in a new process, the hook's JSON on
stdin): ``unchanged`` (the transcript as the last capture left it: the Stop hook firing again),
``new turn`` (one turn appended, then captured: one commit), ``gitmem --version`` (the CLI's
start alone) and ``python -c "import click"`` in the same run, the floor of any Python command
(p50 and the ratio to it).

Setup, per length N: a nanobot 0.3.5 home (its JSONL session format, written here) with one
session of N turns, already captured into a store. Timed, ``--turns`` times each, round robin:

  capture          nanobot appends one turn to the session file, then the event reaches
                   ``Capture.persisted`` and the import commits (``flush`` waits for it): the
                   delay between nanobot saving a turn and gitmem having it
  save_interaction the same turn saved directly (``mm.save_interaction``), the store's
                   plain save path, in another session of the same length
  batch import     ``import_nanobot`` of the whole home after one appended turn: what
                   ``gitmem import nanobot --watch`` runs per change

A capture re-reads the whole session file (the importer has no position to resume from:
nanobot compacts files), so its cost grows with the session; the table shows by how much.
Prints a Markdown table (median and p95 in ms, ratio of the medians to save_interaction) and
the load average; the machine is shared, so compare ratios from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from gitmem import MemoryManager
from gitmem.importers.live import Capture, nanobot_importer
from gitmem.importers.nanobot import import_nanobot

START = datetime(2026, 1, 5, 9, 0)
WORKSPACE_ID = "0123456789abcdef0123456789abcdef"


def message(role: str, text: str, at: datetime) -> str:
    return json.dumps({"role": role, "content": text, "timestamp": at.isoformat()}) + "\n"


def turn_lines(n: int) -> str:
    at = START + timedelta(minutes=n)
    return message("user", f"Question {n}: what did we say about topic {n % 17}?", at) + message(
        "assistant",
        f"Answer {n}: topic {n % 17} was about item {n}. " * 3,
        at + timedelta(seconds=5),
    )


def make_home(folder: Path, key: str, turns: int) -> Path:
    """A nanobot home with one session ``key`` of ``turns`` turns; returns the session file."""
    workspace = folder / "workspace"
    (workspace / ".nanobot").mkdir(parents=True)
    (workspace / ".nanobot" / "workspace-id").write_text(WORKSPACE_ID)
    sessions = folder / "sessions" / WORKSPACE_ID
    sessions.mkdir(parents=True)
    path = sessions / f"{key.replace(':', '_')}.jsonl"
    head = {
        "_type": "metadata",
        "key": key,
        "created_at": START.isoformat(),
        "updated_at": START.isoformat(),
        "metadata": {},
        "last_archived": 0,
    }
    path.write_text(json.dumps(head) + "\n" + "".join(turn_lines(n) for n in range(turns)))
    return path


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(length: int, turns: int, work: Path) -> dict[str, list[float]]:
    key = "telegram:42"
    home = work / f"home-{length}"
    path = make_home(home, key, length)
    capture = Capture(
        work / f"store-{length}", nanobot_importer(home / "workspace", path.parent), agent="nanobot"
    )
    capture.persisted(key)
    capture.flush()
    mm = MemoryManager(work / f"store-{length}")
    with mm.batch("Seed the comparison session"):
        for n in range(length):
            mm.save_interaction("direct", f"Question {n}", f"Answer {n}")
    batch_home = work / f"batch-{length}"
    batch_path = make_home(batch_home, "telegram:43", length)
    import_nanobot(mm, batch_home)
    times: dict[str, list[float]] = {"capture": [], "save_interaction": [], "batch import": []}
    for t in range(turns):
        n = length + t
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(turn_lines(n))
        start = time.perf_counter()
        capture.persisted(key)
        capture.flush()
        times["capture"].append(time.perf_counter() - start)
        start = time.perf_counter()
        mm.save_interaction("direct", f"Question {n}", f"Answer {n}")
        times["save_interaction"].append(time.perf_counter() - start)
        with open(batch_path, "a", encoding="utf-8") as handle:
            handle.write(turn_lines(n))
        start = time.perf_counter()
        import_nanobot(mm, batch_home)
        times["batch import"].append(time.perf_counter() - start)
    assert capture.failures == 0 and capture.last is not None and capture.last.commit
    capture.close()
    mm.close()
    return times


def claude_turn(n: int, session: str) -> str:
    at = START + timedelta(minutes=n)
    common = {"sessionId": session, "cwd": "/home/ann/shop", "isSidechain": False}
    user = {
        **common,
        "type": "user",
        "uuid": f"u{n}",
        "timestamp": at.isoformat() + "Z",
        "message": {"role": "user", "content": f"Question {n} about topic {n % 17}?"},
    }
    reply = {
        **common,
        "type": "assistant",
        "uuid": f"a{n}",
        "timestamp": (at + timedelta(seconds=5)).isoformat() + "Z",
        "message": {
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": f"Answer {n}: item {n}. " * 3}],
        },
    }
    return json.dumps(user) + "\n" + json.dumps(reply) + "\n"


def run_hook(store: Path, payload: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "gitmem", "--repo", str(store), "capture", "claude-code"],
        input=payload,
        text=True,
        check=True,
        env=env,
    )
    return time.perf_counter() - start


def measure_claude_code(length: int, turns: int, work: Path) -> dict[str, list[float]]:
    session = f"00000000-0000-4000-8000-{length:012d}"
    transcript = work / f"cc-{length}" / f"{session}.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text("".join(claude_turn(n, session) for n in range(length)))
    store = work / f"cc-store-{length}"
    MemoryManager(store, init=True).close()
    payload = json.dumps(
        {"session_id": session, "transcript_path": str(transcript), "hook_event_name": "Stop"}
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    run_hook(store, payload)
    times: dict[str, list[float]] = {
        "unchanged": [],
        "new turn": [],
        "gitmem --version": [],
        "import click": [],
    }
    for t in range(turns):
        times["unchanged"].append(run_hook(store, payload))
        with open(transcript, "a", encoding="utf-8") as handle:
            handle.write(claude_turn(length + t, session))
        times["new turn"].append(run_hook(store, payload))
        for name, argv in (
            ("gitmem --version", ["-m", "gitmem", "--version"]),
            ("import click", ["-c", "import click"]),
        ):
            start = time.perf_counter()
            subprocess.run([sys.executable, *argv], check=True, capture_output=True, env=env)
            times[name].append(time.perf_counter() - start)
    log = store / ".git" / "gitmem" / "capture.log"
    assert not log.exists(), log.read_text()
    return times


def main_claude_code(lengths: list[int], turns: int) -> None:
    print("| transcript turns | path | p50 ms | p95 ms | x import click |")
    print("|---:|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="gitmem-bench-capture-cc-") as temp:
        for length in lengths:
            times = measure_claude_code(length, turns, Path(temp))
            base = statistics.median(times["import click"])
            for name, values in times.items():
                median = statistics.median(values)
                print(
                    f"| {length} | {name} | {median * 1e3:.1f} | "
                    f"{percentile(values, 0.95) * 1e3:.1f} | {median / base:.1f} |"
                )
    print(f"\nload average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--lengths", default="10,100,1000", help="session lengths in turns, comma-separated"
    )
    parser.add_argument("--turns", type=int, default=20, help="timed turns per length")
    parser.add_argument(
        "--claude-code", action="store_true", help="time the Claude Code hook instead"
    )
    args = parser.parse_args()
    if args.claude_code:
        main_claude_code([int(x) for x in args.lengths.split(",")], args.turns)
        return
    print("| session turns | path | median ms | p95 ms | x save_interaction |")
    print("|---:|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="gitmem-bench-capture-") as temp:
        for length in (int(x) for x in args.lengths.split(",")):
            times = measure(length, args.turns, Path(temp))
            base = statistics.median(times["save_interaction"])
            for name, values in times.items():
                median = statistics.median(values)
                print(
                    f"| {length} | {name} | {median * 1e3:.1f} | "
                    f"{percentile(values, 0.95) * 1e3:.1f} | {median / base:.1f} |"
                )
    print(f"\nload average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
