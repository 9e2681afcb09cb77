"""How big ``.git`` gets as a store takes saves, against a fresh ``git gc --aggressive``.

    python benchmarks/bench_repack.py --sessions 1000,10000 --checkpoints 1000,5000,10000,20000

For each store size: ``--sessions`` sessions (one turn each, written in batches), then saves
of one turn to random sessions, one commit each, with the store's default housekeeping (as an
agent runs it: ``MemoryManager(path)``). At each checkpoint (saves so far) the background
housekeeping is waited for, and the table gets:

  objects         bytes under ``.git/objects`` (what housekeeping governs)
  .git            bytes of the whole ``.git`` (index, derived state under ``.git/gitmem``)
  packs, loose    pack files and loose objects at that moment
  aggressive      ``.git/objects`` of a ``git clone --bare --no-local`` of the same history
                  after ``git gc --aggressive --prune=now`` (the comparator)
  ratio           objects / aggressive (target: <= 2); packs written since the last run
                  stay unmerged, so this moves with the phase of the housekeeping cycle
  settled         objects / aggressive after one more housekeeping run, done right then
  save p50/p95    wall time of the saves since the previous checkpoint (housekeeping runs in
                  a background thread: a save should not wait for it)
  housekeeping    runs (whole, or packs only) and their wall time since the previous
                  checkpoint

Sizes do not depend on machine load; times do (say how loaded it was).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

from gitmem import MemoryManager
from gitmem.store.repository import Housekeeping, Repository

START = datetime(2024, 1, 1, tzinfo=timezone.utc)


def tree_bytes(folder: Path) -> int:
    total = 0
    for top, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):  # a temp file gone while walking
                total += os.lstat(os.path.join(top, name)).st_size
    return total


def count_objects(git_dir: Path) -> tuple[int, int]:
    """(pack files, loose objects)."""
    packs = len(list((git_dir / "objects" / "pack").glob("*.pack")))
    loose = sum(
        len(files)
        for top, _d, files in os.walk(git_dir / "objects")
        if len(os.path.basename(top)) == 2
    )
    return packs, loose


def aggressive_size(store: Path, work: Path) -> int:
    clone = work / "aggressive.git"
    subprocess.run(["rm", "-rf", str(clone)], check=True)
    subprocess.run(
        ["git", "clone", "-q", "--bare", "--no-local", str(store), str(clone)], check=True
    )
    subprocess.run(["git", "-C", str(clone), "gc", "-q", "--aggressive", "--prune=now"], check=True)
    size = tree_bytes(clone / "objects")
    subprocess.run(["rm", "-rf", str(clone)], check=True)
    return size


class TimedRepository:
    """Wraps ``Repository.pack`` to add up the time housekeeping runs take."""

    spent = 0.0
    runs = 0

    @classmethod
    def install(cls) -> None:
        # pack: a whole run; merge_packs (where it exists): a run for the bytes alone
        for name in ("pack", "merge_packs"):
            if hasattr(Repository, name):
                setattr(Repository, name, cls._timed(getattr(Repository, name)))

    @classmethod
    def _timed(cls, original: Callable[[Repository], None]) -> Callable[[Repository], None]:
        def run(self: Repository) -> None:
            began = time.perf_counter()
            try:
                original(self)
            finally:
                cls.spent += time.perf_counter() - began
                cls.runs += 1

        return run


def wait_for_housekeeping(mm: MemoryManager) -> None:
    thread = mm.repository._gc_thread
    if thread is not None:
        thread.join()


def run(sessions: int, checkpoints: list[int], work: Path, seed: int) -> None:
    store = work / f"store-{sessions}"
    mm = MemoryManager.init(store, agent="bench", housekeeping=Housekeeping(enabled=False))
    for first in range(0, sessions, 2000):
        with mm.batch(f"Seed sessions {first}-{first + 1999}"):
            for n in range(first, min(sessions, first + 2000)):
                mm.save_interaction(
                    f"s{n:06d}", f"first question {n}", f"first answer {n}", timestamp=START
                )
    mm.close()
    mm = MemoryManager(store, agent="bench")  # default housekeeping
    rng = random.Random(seed)
    git_dir = store / ".git"
    done = 0
    print(f"\n### {sessions} sessions\n")
    print(
        "| saves | objects MiB | .git MiB | packs | loose | aggressive MiB | ratio | "
        "settled | save p50 ms | save p95 ms | housekeeping runs, s |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for checkpoint in checkpoints:
        TimedRepository.spent, TimedRepository.runs = 0.0, 0
        took = []
        while done < checkpoint:
            n = rng.randrange(sessions)
            when = START + timedelta(minutes=done + 1)
            began = time.perf_counter()
            mm.save_interaction(
                f"s{n:06d}",
                f"question {done} about topic {rng.random():.6f}",
                f"answer {done} " * rng.randint(1, 20),
                timestamp=when,
            )
            took.append(time.perf_counter() - began)
            done += 1
        wait_for_housekeeping(mm)
        objects = tree_bytes(git_dir / "objects")
        whole = tree_bytes(git_dir)
        packs, loose = count_objects(git_dir)
        best = aggressive_size(store, work)
        runs = TimedRepository.runs, TimedRepository.spent
        mm.repository.pack()  # what the next housekeeping run leaves
        settled = tree_bytes(git_dir / "objects")
        ordered = sorted(took)
        p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
        mib = 1024 * 1024
        print(
            f"| {checkpoint} | {objects / mib:.1f} | {whole / mib:.1f} | {packs} | {loose} | "
            f"{best / mib:.1f} | {objects / best:.2f} | {settled / best:.2f} | "
            f"{statistics.median(took) * 1000:.1f} | "
            f"{p95 * 1000:.1f} | {runs[0]}, {runs[1]:.1f} |",
            flush=True,
        )
    mm.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="1000", help="store sizes, comma-separated")
    parser.add_argument(
        "--checkpoints",
        default="1000,5000",
        help="saves after which to measure, comma-separated, ascending",
    )
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    TimedRepository.install()
    load = os.getloadavg()
    print(
        f"load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on "
        f"{os.cpu_count()} cores; housekeeping: {Housekeeping()}"
    )
    checkpoints = sorted(int(c) for c in args.checkpoints.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        for sessions in (int(s) for s in args.sessions.split(",")):
            run(sessions, checkpoints, Path(tmp), args.seed)
    load = os.getloadavg()
    print(f"\nload average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
