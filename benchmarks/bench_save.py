"""Time one ``save_interaction`` on a large store against the comparators, in one run.

    python benchmarks/bench_save.py --sessions 10000 --saves 200

Comparators, each on a copy of the same store and with the same rendered bytes:
  floor        write + fsync + rename of the session file (no git at all)
  git-cli      write the file, then ``git add <file> && git commit`` through the git binary
  gitpython    write the file, then GitPython ``index.add`` + ``index.commit``
Also reports batch mode (one commit for many sessions) per session. Absolute times drift
on a shared machine; the ratios measured in the same run are the figures to compare.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

from timing import median_p95_ms as _ms

from gitmem import MemoryManager
from gitmem.format.paths import session_path
from gitmem.store.repository import Housekeeping

START = datetime(2024, 1, 1, tzinfo=timezone.utc)


def build_store(path: Path, sessions: int, chunk: int) -> float:
    """Create ``sessions`` sessions with one turn each, in batches; seconds per session."""
    mm = MemoryManager.init(path, agent="bench", housekeeping=Housekeeping(enabled=False))
    started = time.perf_counter()
    for first in range(0, sessions, chunk):
        with mm.batch(f"Import sessions {first}-{first + chunk - 1}"):
            for n in range(first, min(first + chunk, sessions)):
                mm.save_interaction(
                    f"session_{n:05d}",
                    f"question {n} about topic {n % 97}",
                    f"answer {n}",
                    timestamp=START + timedelta(minutes=n),
                )
    elapsed = time.perf_counter() - started
    mm.close()
    subprocess.run(["git", "gc", "-q"], cwd=path, check=True)
    return elapsed / sessions


def object_bytes(path: Path) -> int:
    """Bytes of every file under .git/objects (loose objects and packs)."""
    total = 0
    for item in (path / ".git" / "objects").rglob("*"):
        try:  # background housekeeping may replace packs while this walks
            if item.is_file():
                total += item.stat().st_size
        except FileNotFoundError:
            continue
    return total


def time_gitmem(
    path: Path,
    saves: int,
    sessions: int,
    rng: random.Random,
    *,
    hot: bool = False,
    written: list[int] | None = None,
) -> list[float]:
    """Random sessions (each parsed cold) or, with ``hot``, one session like a live agent.
    ``written`` gets the bytes each save added under .git/objects (measured untimed)."""
    mm = MemoryManager(path, agent="bench", housekeeping=Housekeeping(every_commits=500))
    mm.save_interaction("session_00000", "warm-up", "warm-up")  # fill caches like a live agent
    samples = []
    for n in range(saves):
        sid = "session_00001" if hot else f"session_{rng.randrange(sessions):05d}"
        before = object_bytes(path) if written is not None else 0
        started = time.perf_counter()
        mm.save_interaction(
            sid, f"follow-up {n}", f"reply {n}", timestamp=START + timedelta(days=30, seconds=n)
        )
        samples.append(time.perf_counter() - started)
        if written is not None:
            written.append(object_bytes(path) - before)
    mm.close()
    return samples


def _file_bytes(path: Path, n: int) -> bytes:
    return path.read_bytes() + f"\n<!-- comparator edit {n} -->\n".encode()


def _rel(n: int) -> str:
    return session_path(f"session_{n:05d}")


def time_floor(path: Path, saves: int, sessions: int, rng: random.Random) -> list[float]:
    samples = []
    for n in range(saves):
        target = path / _rel(rng.randrange(sessions))
        data = _file_bytes(target, n)
        started = time.perf_counter()
        tmp = target.with_suffix(".tmp")
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
        samples.append(time.perf_counter() - started)
    return samples


def time_git_cli(path: Path, saves: int, sessions: int, rng: random.Random) -> list[float]:
    samples = []
    for n in range(saves):
        rel = _rel(rng.randrange(sessions))
        data = _file_bytes(path / rel, n)
        started = time.perf_counter()
        (path / rel).write_bytes(data)
        subprocess.run(["git", "add", rel], cwd=path, check=True)
        subprocess.run(["git", "commit", "-q", "-m", f"save {n}"], cwd=path, check=True)
        samples.append(time.perf_counter() - started)
    return samples


def time_gitpython(path: Path, saves: int, sessions: int, rng: random.Random) -> list[float]:
    import git  # the comparator itself; gitmem's code imports GitPython only in repository.py

    repo = git.Repo(path)
    samples = []
    for n in range(saves):
        rel = _rel(rng.randrange(sessions))
        data = _file_bytes(path / rel, n)
        started = time.perf_counter()
        (path / rel).write_bytes(data)
        repo.index.add([rel])
        repo.index.commit(f"save {n}")
        samples.append(time.perf_counter() - started)
    return samples


def time_batch(path: Path, count: int) -> float:
    mm = MemoryManager(path, agent="bench", housekeeping=Housekeeping(enabled=False))
    started = time.perf_counter()
    with mm.batch(f"Import {count} sessions"):
        for n in range(count):
            mm.save_interaction(
                f"batch_{n:05d}",
                f"imported question {n}",
                f"answer {n}",
                timestamp=START + timedelta(seconds=n),
            )
    elapsed = time.perf_counter() - started
    mm.close()
    return elapsed / count * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--saves", type=int, default=200, help="gitmem and floor saves")
    parser.add_argument(
        "--comparator-saves",
        type=int,
        default=30,
        help="saves for the slow git-cli and gitpython comparators",
    )
    parser.add_argument("--batch", type=int, default=1000, help="sessions in the batch run")
    parser.add_argument("--keep", type=Path, help="build the stores here and keep them")
    args = parser.parse_args(argv)

    work = args.keep or Path(tempfile.mkdtemp(prefix="gitmem-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    base = work / "store"
    print(f"building a store with {args.sessions} sessions in {base} ...", file=sys.stderr)
    build_per_session = build_store(base, args.sessions, chunk=2000)
    copies = {}
    for name in ("floor", "git-cli", "gitpython"):
        copies[name] = work / name
        subprocess.run(
            ["git", "clone", "-q", "--no-hardlinks", str(base), str(copies[name])], check=True
        )
    rng = random.Random(7)
    written: list[int] = []
    runs: dict[str, Callable[[], list[float]]] = {
        "gitmem save_interaction": lambda: time_gitmem(
            base, args.saves, args.sessions, rng, written=written
        ),
        "gitmem save_interaction, one hot session": lambda: time_gitmem(
            base, args.saves, args.sessions, rng, hot=True
        ),
        "floor: write+fsync+rename": lambda: time_floor(
            copies["floor"], args.saves, args.sessions, rng
        ),
        "git add && git commit (CLI)": lambda: time_git_cli(
            copies["git-cli"], args.comparator_saves, args.sessions, rng
        ),
        "GitPython index.add+commit": lambda: time_gitpython(
            copies["gitpython"], args.comparator_saves, args.sessions, rng
        ),
    }
    results = {}
    for name, run in runs.items():
        print(f"timing {name} ...", file=sys.stderr)
        results[name] = _ms(run())
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=base, capture_output=True, text=True, check=True
    ).stdout
    batch_ms = time_batch(base, args.batch)

    ours = results["gitmem save_interaction"][0]
    print(
        f"\nsave benchmark: {args.sessions} sessions, {args.saves} gitmem saves, "
        f"{args.comparator_saves} saves per slow comparator\n"
    )
    print("| path | median ms | p95 ms | median / gitmem |")
    print("|---|---|---|---|")
    for name, (median, p95) in results.items():
        print(f"| {name} | {median:.2f} | {p95:.2f} | {median / ours:.1f}x |")
    grew = sorted(w for w in written if w >= 0)  # a repack during the run shrinks .git
    print(
        f"\nnew object bytes per gitmem save: median {statistics.median(grew) / 1024:.1f} KiB, "
        f"p95 {grew[int(len(grew) * 0.95)] / 1024:.1f} KiB, max {grew[-1] / 1024:.1f} KiB"
    )
    print(f"\nbatch mode: {batch_ms:.3f} ms per session ({args.batch} sessions, one commit)")
    print(f"store build (batches of 2000): {build_per_session * 1000:.3f} ms per session")
    print(f"git status --porcelain after the gitmem saves: {'clean' if not status else 'DIRTY'}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if not status else 1


if __name__ == "__main__":
    sys.exit(main())
