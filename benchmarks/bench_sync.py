"""Time ``sync`` of two stores that both wrote to the same sessions, against git's text merge.

    python benchmarks/bench_sync.py --sessions 100 --turns 1000 --repeat 3

Setup per repetition: a bare remote; store A with ``--sessions`` sessions (``--base`` turns
each), pushed; store B cloned from it. Then A and B each add ``--turns`` turns spread over
all the shared sessions (one commit per turn, as agents save) and A pushes. Timed, on copies
of the same B:

  gitmem sync           ``B.sync()``: fetch, semantic merge in-process (one merge commit),
                        push
  git pull (text)       ``git pull --no-rebase`` with git's default line merge (the
                        comparator): it conflicts in every shared session file
  git pull (driver)     ``git pull --no-rebase`` running the gitmem merge driver (one Python
                        process per file), i.e. what a person's plain ``git pull`` costs

Absolute times drift on a shared machine; compare the ratios measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from gitmem import MemoryManager
from gitmem.store.repository import Housekeeping

ROOT = Path(__file__).resolve().parent.parent
START = datetime(2024, 1, 1, tzinfo=timezone.utc)


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=check)


def prepare(work: Path, sessions: int, base_turns: int, turns: int) -> tuple[Path, Path]:
    """Build remote + A + B with diverged histories; returns (B's folder, remote)."""
    remote = work / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    quiet = Housekeeping(enabled=False)
    a = MemoryManager.clone(remote.as_uri(), work / "a", agent="alice", housekeeping=quiet)
    with a.batch("Seed shared sessions"):
        for s in range(sessions):
            for t in range(base_turns):
                a.save_interaction(
                    f"shared_{s:03d}",
                    f"seed question {t} of {s}",
                    "seed answer",
                    timestamp=START + timedelta(minutes=t),
                )
    a.sync()
    b = MemoryManager.clone(remote.as_uri(), work / "b", agent="bob", housekeeping=quiet)
    for n in range(turns):
        when = START + timedelta(hours=1, seconds=n)
        sid = f"shared_{n % sessions:03d}"
        a.save_interaction(sid, f"alice asks {n}", f"answer {n}", timestamp=when)
        b.save_interaction(sid, f"bob asks {n}", f"answer {n}", timestamp=when)
    a.push()
    a.close()
    b.close()
    for store in (work / "a", work / "b"):
        git(store, "gc", "-q")
    return work / "b", remote


def copy_store(source: Path, target: Path, remote: Path) -> Path:
    shutil.copytree(source, target, symlinks=True)
    git(target, "remote", "set-url", "origin", remote.as_uri())
    return target


def time_sync(store: Path) -> tuple[float, int]:
    mm = MemoryManager(store, agent="bob", housekeeping=Housekeeping(enabled=False))
    started = time.perf_counter()
    result = mm.sync()
    elapsed = time.perf_counter() - started
    assert result.action == "merge" and result.pushed, result
    mm.close()
    clean = git(store, "status", "--porcelain").stdout == ""
    assert clean, "git status is not clean after sync"
    return elapsed, len(result.files)


def time_git_pull(store: Path, *, driver: bool) -> tuple[float, int]:
    if not driver:
        git(store, "config", "--remove-section", "merge.gitmem", check=False)
    started = time.perf_counter()
    done = git(store, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main", check=False)
    elapsed = time.perf_counter() - started
    conflicted = git(store, "diff", "--name-only", "--diff-filter=U").stdout.split()
    if driver and done.returncode != 0:
        raise SystemExit(f"git pull with the driver failed: {done.stderr}")
    return elapsed, len(conflicted)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100, help="shared sessions")
    parser.add_argument("--turns", type=int, default=1000, help="turns each store adds")
    parser.add_argument("--base", type=int, default=5, help="turns per session before")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (fresh stores)")
    parser.add_argument("--no-driver", action="store_true", help="skip git pull with the driver")
    args = parser.parse_args()
    # git runs the driver as `python -m gitmem`: make that this checkout
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    samples: dict[str, list[float]] = {"gitmem sync": [], "git pull (text)": []}
    if not args.no_driver:
        samples["git pull (driver)"] = []
    conflicts: list[int] = []
    merged_files: list[int] = []
    for rep in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="gitmem-bench-sync-") as tmp:
            work = Path(tmp)
            print(
                f"[{rep + 1}/{args.repeat}] preparing {args.sessions} sessions, "
                f"{args.turns} turns per store ...",
                file=sys.stderr,
            )
            b, remote = prepare(work, args.sessions, args.base, args.turns)
            # each contender gets its own copy of B and of the remote, the same bytes
            for name in samples:
                slot = work / name.replace(" ", "_").replace("(", "").replace(")", "")
                slot.mkdir()
                their_remote = slot / "remote.git"
                shutil.copytree(remote, their_remote, symlinks=True)
                store = copy_store(b, slot / "b", their_remote)
                if name == "gitmem sync":
                    elapsed, files = time_sync(store)
                    merged_files.append(files)
                else:
                    elapsed, count = time_git_pull(store, driver=name.endswith("(driver)"))
                    if name.endswith("(text)"):
                        conflicts.append(count)
                samples[name].append(elapsed)
    ours = statistics.median(samples["gitmem sync"])
    print(
        f"\nsync benchmark: {args.sessions} shared sessions, {args.turns} turns added by "
        f"each of two stores, {args.repeat} repetitions\n"
    )
    print("| path | median s | min s | median / gitmem sync | result |")
    print("|---|---|---|---|---|")
    for name, values in samples.items():
        median = statistics.median(values)
        if name == "gitmem sync":
            outcome = f"clean merge of {statistics.median(merged_files):.0f} files, pushed"
        elif name.endswith("(text)"):
            outcome = f"{statistics.median(conflicts):.0f} files left with conflict markers"
        else:
            outcome = "clean merge, not pushed"
        print(f"| {name} | {median:.3f} | {min(values):.3f} | {median / ours:.2f}x | {outcome} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
