"""Does a save cost the same in a small and in a huge store? One run, saves interleaved.

    python benchmarks/bench_scale.py --sizes 1000,100000 --saves 200

Builds one store per size (one turn per session, in batches, then ``git gc``), opens all of
them, and saves to a random session of each store in turn, so that machine noise falls on
every size alike. Per size it reports the save median and p95 (each save parses its session
cold), the bytes of new git objects per save and the bytes ``.git/index`` (with any split
index base) written per save, then the ratio of each median to the smallest store's.
Comparator: ``git add && git commit`` through the git binary on a clone of each store
(fewer saves: it is slow), interleaved the same way.
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
from datetime import datetime, timedelta, timezone
from pathlib import Path

from timing import median_p95_ms as _ms

from gitmem import MemoryManager
from gitmem.store.repository import Housekeeping

START = datetime(2024, 1, 1, tzinfo=timezone.utc)


def build(path: Path, sessions: int) -> float:
    """A store of ``sessions`` one-turn sessions; returns the build seconds."""
    mm = MemoryManager.init(path, agent="bench", housekeeping=Housekeeping(enabled=False))
    started = time.perf_counter()
    for first in range(0, sessions, 2000):
        with mm.batch(f"Import sessions {first}-{first + 1999}"):
            for n in range(first, min(first + 2000, sessions)):
                mm.save_interaction(
                    f"session_{n:06d}",
                    f"question {n} about topic {n % 97}",
                    f"answer {n}",
                    timestamp=START + timedelta(minutes=n),
                )
    mm.close()
    subprocess.run(["git", "gc", "-q"], cwd=path, check=True)
    return time.perf_counter() - started


def _object_files(git_dir: Path) -> dict[str, int]:
    sizes = {}
    for folder, _dirs, files in os.walk(git_dir / "objects"):
        for name in files:
            full = os.path.join(folder, name)
            try:
                sizes[full] = os.stat(full).st_size
            except FileNotFoundError:
                continue  # removed by a repack meanwhile
    return sizes


def _index_files(git_dir: Path) -> dict[str, tuple[int, int]]:
    found = {}
    for name in os.listdir(git_dir):
        if name == "index" or name.startswith("sharedindex."):
            info = os.stat(git_dir / name)
            found[name] = (info.st_mtime_ns, info.st_size)
    return found


def _written(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> int:
    # the index counts when its modification time changed, a shared index only when it is
    # new: gitmem touches the one in use so that git's expiry keeps it, without writing it
    return sum(
        size
        for name, (mtime, size) in after.items()
        if (name == "index" and before.get(name, (None, 0))[0] != mtime)
        or (name != "index" and name not in before)
    )


class Sampler:
    """One store under test: its manager, timings and byte counts."""

    def __init__(self, path: Path, sessions: int) -> None:
        self.path, self.sessions = path, sessions
        self.git_dir = path / ".git"
        self.mm = MemoryManager(path, agent="bench", housekeeping=Housekeeping())
        self.mm.save_interaction("session_000000", "warm-up", "warm-up")
        self.times: list[float] = []
        self.object_bytes: list[int] = []
        self.index_bytes: list[int] = []

    def save(self, n: int, rng: random.Random) -> None:
        sid = f"session_{rng.randrange(self.sessions):06d}"
        objects, index = _object_files(self.git_dir), _index_files(self.git_dir)
        started = time.perf_counter()
        self.mm.save_interaction(
            sid, f"follow-up {n}", f"reply {n}", timestamp=START + timedelta(days=400, seconds=n)
        )
        self.times.append(time.perf_counter() - started)
        after = _object_files(self.git_dir)
        # new files only: a repack rewrites packs, which is housekeeping, not this save
        self.object_bytes.append(sum(s for f, s in after.items() if f not in objects))
        self.index_bytes.append(_written(index, _index_files(self.git_dir)))


def time_git_cli(path: Path, n: int, sessions: int, rng: random.Random) -> float:
    rel = _session_file(path, f"session_{rng.randrange(sessions):06d}")
    data = (path / rel).read_bytes() + f"\n<!-- comparator edit {n} -->\n".encode()
    started = time.perf_counter()
    (path / rel).write_bytes(data)
    subprocess.run(["git", "add", rel], cwd=path, check=True)
    subprocess.run(["git", "commit", "-q", "-m", f"save {n}"], cwd=path, check=True)
    return time.perf_counter() - started


def _session_file(path: Path, session_id: str) -> str:
    # whatever layout the store uses, the file name is the encoded id
    out = subprocess.run(
        ["git", "ls-files", "--", f"*/{session_id}.md"],
        cwd=path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return out[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,100000", help="store sizes, comma-separated")
    parser.add_argument("--saves", type=int, default=200, help="gitmem saves per store")
    parser.add_argument("--comparator-saves", type=int, default=20)
    parser.add_argument("--keep", type=Path, help="build the stores here and keep them")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    work = args.keep or Path(tempfile.mkdtemp(prefix="gitmem-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    built = {}
    for size in sizes:
        store = work / f"store-{size}"
        if not (store / ".git").exists():
            print(f"building {size} sessions in {store} ...", file=sys.stderr)
            built[size] = build(store, size)
        clone = work / f"git-cli-{size}"
        if not clone.exists():
            subprocess.run(
                ["git", "clone", "-q", "--no-hardlinks", str(store), str(clone)], check=True
            )
    samplers = {size: Sampler(work / f"store-{size}", size) for size in sizes}
    rng = random.Random(7)
    print("timing gitmem saves, interleaved ...", file=sys.stderr)
    for n in range(args.saves):
        for size in sizes:
            samplers[size].save(n, rng)
    cli: dict[int, list[float]] = {size: [] for size in sizes}
    print("timing git add && git commit, interleaved ...", file=sys.stderr)
    for n in range(args.comparator_saves):
        for size in sizes:
            cli[size].append(time_git_cli(work / f"git-cli-{size}", n, size, rng))
    dirty = []
    for size, sampler in samplers.items():
        sampler.mm.close()
        status = subprocess.run(
            ["git", "status", "--porcelain"],
            cwd=sampler.path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        if status:
            dirty.append(size)

    first = sizes[0]
    base_ms = _ms(samplers[first].times)[0]
    base_cli = _ms(cli[first])[0]
    print(
        f"\nsave scale benchmark: {args.saves} gitmem saves and {args.comparator_saves} "
        "git CLI saves per store, interleaved\n"
    )
    print(
        "| sessions | gitmem median ms | p95 ms | ratio to smallest | new object KiB/save "
        "(median, max) | index KiB written/save (median, max) | git add+commit median ms "
        "| its ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for size in sizes:
        s = samplers[size]
        median, p95 = _ms(s.times)
        obj = sorted(s.object_bytes)
        idx = sorted(s.index_bytes)
        cli_median = _ms(cli[size])[0]
        print(
            f"| {size:,} | {median:.2f} | {p95:.2f} | {median / base_ms:.2f}x | "
            f"{statistics.median(obj) / 1024:.1f}, {obj[-1] / 1024:.1f} | "
            f"{statistics.median(idx) / 1024:.1f}, {idx[-1] / 1024:.1f} | "
            f"{cli_median:.1f} | {cli_median / base_cli:.2f}x |"
        )
    for size, seconds in built.items():
        print(f"build of {size:,} sessions: {seconds:.1f} s")
    print(f"git status --porcelain after the saves: {'DIRTY ' + str(dirty) if dirty else 'clean'}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if dirty else 0


if __name__ == "__main__":
    sys.exit(main())
