"""Time the time machine on a long store against the git CLI, in one run.

    python benchmarks/bench_history.py                 # 10,000 sessions, 10,000 commits
    python benchmarks/bench_history.py --scale 0.1     # a quick run

The store: 10,000 sessions created in a few batch commits, then single saves up to 10,000
commits in all, of which 1,000 append a turn to one session ("big") and 50 to another ("mid"),
spread evenly through the history; then what housekeeping runs (repack, commit-graph with
changed-path Bloom filters). Targets: history of "big" <= 50 ms, structured diff of two
adjacent versions <= 10 ms, rollback <= 10 ms, ``at(rev).load_memory`` <= 5 ms. Comparators,
measured in the same run: ``git log -- path`` (the history), ``git show rev:path`` (reading
the past), ``git restore --source`` + ``git commit`` (rollback, on a clone), a plain
``save_interaction`` (the commit path a rollback shares) and one ``markdown.parse`` of the
version being diffed (the floor a cold structured diff pays twice).
Blame of "big" (cold: no version parsed before) is timed against the walk it replaced,
which parsed the version before every commit (checked equal first; target <= 50 ms), and
in new processes (opening the store included, imports not).
Housekeeping builds a per-file commit cache under ``.git/gitmem/history`` (its build time is
reported; history before it exists, through ``git log -- path``, is a row of its own); the
other rows read it. Absolute times drift on a shared machine; the
ratios are the figures to compare.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.reference_blame

from timing import median_p95_ms as _ms
from timing import print_comparison
from timing import timed as _timed

from gitmem import MemoryManager
from gitmem.format import parse as markdown
from gitmem.format.paths import session_path
from gitmem.store.repository import Housekeeping
from tests.reference_blame import blame_every_version

START = datetime(2024, 1, 1, tzinfo=timezone.utc)


def _path(session_id: str) -> str:
    return session_path(session_id)


def build_store(path: Path, sessions: int, commits: int, big: int, mid: int) -> float:
    """Build the store; returns seconds taken."""
    started = time.perf_counter()
    mm = MemoryManager.init(
        path, agent="bench", model="bench-model", housekeeping=Housekeeping(enabled=False)
    )
    chunk = 2000
    for first in range(0, sessions, chunk):
        with mm.batch(f"Import sessions {first}-{first + chunk - 1}"):
            for n in range(first, min(first + chunk, sessions)):
                mm.save_interaction(
                    f"session_{n:05d}",
                    f"question {n} about topic {n % 97}",
                    f"answer {n}",
                    timestamp=START + timedelta(minutes=n),
                )
    made = int(mm.repository.run_git("rev-list", "--count", "HEAD")[1])
    singles = max(0, commits - made)
    rng = random.Random(11)
    big_every = max(1, singles // max(1, big))
    mid_every = max(1, singles // max(1, mid))
    big_done = mid_done = 0
    for n in range(singles):
        when = START + timedelta(days=30, seconds=n)
        if n % big_every == 0 and big_done < big:
            sid, big_done = "big", big_done + 1
        elif n % mid_every == 1 and mid_done < mid:
            sid, mid_done = "mid", mid_done + 1
        else:
            sid = f"session_{rng.randrange(sessions):05d}"
        mm.save_interaction(sid, f"follow-up {n} on topic {n % 89}", f"reply {n}", timestamp=when)
    mm.repository.pack()
    mm.close()
    return time.perf_counter() - started


# run in a child: opening the store and blaming "big", as a new process does them
_BLAME_CHILD = """
import sys, time
from gitmem import MemoryManager
from gitmem.store.repository import Housekeeping
started = time.perf_counter()
MemoryManager(sys.argv[1], housekeeping=Housekeeping(enabled=False)).blame("big")
print(time.perf_counter() - started)
"""


def blame_in_new_processes(store: Path, runs: int) -> list[float]:
    """Seconds each new process takes to open the store and blame "big" (imports not
    counted; modules read from bytecode, as installed)."""
    tree = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "gitmem")], env=env)
    out = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-P", "-c", _BLAME_CHILD, str(store)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        out.append(float(done.stdout))
    return out


def git(path: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=path, capture_output=True, check=True).stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="fraction of the full size (1.0: 10,000 sessions and commits)",
    )
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--keep", type=Path, help="build the store here and keep it")
    parser.add_argument("--reuse", action="store_true", help="reuse a store built in --keep")
    args = parser.parse_args(argv)
    sessions = max(100, int(10_000 * args.scale))
    commits = max(200, int(10_000 * args.scale))
    big = max(20, int(1_000 * args.scale))
    mid = 50

    work = args.keep or Path(tempfile.mkdtemp(prefix="gitmem-bench-history-"))
    work.mkdir(parents=True, exist_ok=True)
    base = work / "store"
    build = 0.0
    if not (args.reuse and (base / ".git").exists()):
        shutil.rmtree(base, ignore_errors=True)
        print(f"building {sessions} sessions / {commits} commits in {base} ...", file=sys.stderr)
        build = build_store(base, sessions, commits, big, mid)
    total = int(git(base, "rev-list", "--count", "HEAD"))
    clone = work / "clone"
    shutil.rmtree(clone, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", str(base), str(clone)], check=True)
    for key, value in (("user.name", "bench"), ("user.email", "bench@example.com")):
        git(clone, "config", key, value)

    mm = MemoryManager(base, agent="bench", housekeeping=Housekeeping(enabled=False))
    rng = random.Random(5)
    n = args.samples
    rows: list[tuple[str, list[float], str, str]] = []  # name, samples, target, comparator

    # --- history ---------------------------------------------------------------------------
    shutil.rmtree(base / ".git" / "gitmem" / "history", ignore_errors=True)
    uncached = [_timed(lambda: mm.history("big")) for _ in range(max(3, n // 5))]
    started = time.perf_counter()
    mm.repository.index_history()  # what housekeeping does: the per-file commit cache
    cache_build = time.perf_counter() - started
    versions = [r.sha for r in mm.history("big")]
    big_now = mm.load_memory("big")
    big_turns = len(big_now.interactions) if big_now else 0
    rows.append(
        (
            "history('big')",
            [_timed(lambda: mm.history("big")) for _ in range(n)],
            "50",
            "git log -- big",
        )
    )
    rows.append(
        ("history('big') before the cache exists (git log)", uncached, "", "git log -- big")
    )
    rows.append(
        (
            "git log --format=%H -- sessions/big.md",
            [_timed(lambda: git(base, "log", "--format=%H", "--", _path("big"))) for _ in range(n)],
            "",
            "",
        )
    )
    small = [f"session_{rng.randrange(sessions):05d}" for _ in range(n)]
    rows.append(
        (
            "history(small session)",
            [_timed(lambda s=s: mm.history(s)) for s in small],
            "",
            "git log -- small",
        )
    )
    rows.append(
        (
            "git log --format=%H -- small session",
            [_timed(lambda s=s: git(base, "log", "--format=%H", "--", _path(s))) for s in small],
            "",
            "",
        )
    )
    rows.append(
        (
            "history(limit=100), store-wide",
            [_timed(lambda: mm.history(limit=100)) for _ in range(n)],
            "",
            "",
        )
    )

    # --- structured diff of adjacent versions (cold: every pair parsed for the first time) ---
    pairs = rng.sample(range(0, len(versions) - 1, 2), min(n, (len(versions) - 1) // 2))
    rows.append(
        (
            "diff('big', v, v+1, text=False), cold",
            [
                _timed(lambda i=i: mm.diff("big", versions[i + 1], versions[i], text=False))
                for i in pairs
            ],
            "10",
            "markdown.parse x1",
        )
    )
    raw = [git(base, "show", f"{versions[i]}:{_path('big')}") for i in pairs]
    rows.append(
        (
            "markdown.parse of one such version",
            [_timed(lambda d=d: markdown.parse_bytes(d, "big.md")) for d in raw],
            "",
            "",
        )
    )
    rows.append(
        (
            "diff('big', v, v+1) + unified text, warm",
            [_timed(lambda i=i: mm.diff("big", versions[i + 1], versions[i])) for i in pairs],
            "",
            "",
        )
    )
    mid_versions = [r.sha for r in mm.history("mid")]
    mid_pairs = list(range(len(mid_versions) - 1))
    rows.append(
        (
            "diff('mid', v, v+1, text=False), cold",
            [
                _timed(lambda i=i: mm.diff("mid", mid_versions[i + 1], mid_versions[i], text=False))
                for i in mid_pairs[:n]
            ],
            "10",
            "",
        )
    )

    # --- reading the past -------------------------------------------------------------------
    revs = [versions[rng.randrange(len(versions))] for _ in range(n)]
    views = [mm.at(rev) for rev in revs]
    readers = [(view, f"session_{rng.randrange(sessions):05d}") for view in views]
    rows.append(
        (
            "at(rev).load_memory(small), cold rev",
            [_timed(lambda v=v, s=s: v.load_memory(s)) for v, s in readers],
            "5",
            "git show rev:path",
        )
    )
    rows.append(
        (
            "git show rev:sessions/<small>.md",
            [
                _timed(lambda r=r, s=s: git(base, "show", f"{r}:{_path(s)}"))
                for r, (_, s) in zip(revs, readers, strict=True)
            ],
            "",
            "",
        )
    )
    rows.append(
        ("at(rev) (resolving a full sha)", [_timed(lambda r=r: mm.at(r)) for r in revs], "", "")
    )
    rows.append(
        (
            "at(rev).load_memory('big'), cold",
            [_timed(lambda v=v: v.load_memory("big")) for v in views[: max(5, n // 3)]],
            "",
            "",
        )
    )

    # --- blame ------------------------------------------------------------------------------
    assert mm.blame("big") == blame_every_version(mm, "big"), "the two blames differ"

    def cold(work: Callable[[], object]) -> float:
        mm._store._sessions.clear()  # no version parsed before: a new process
        return _timed(work)

    blame_n = max(3, n // 5)
    rows.append(
        (
            f"blame('big'), {big_turns} turns, cold",
            [cold(lambda: mm.blame("big")) for _ in range(blame_n)],
            "50",
            "blame, every version parsed",
        )
    )
    rows.append(
        (
            "blame('big') in a new process (opening included, imports not)",
            blame_in_new_processes(base, blame_n),
            "50",
            "blame, every version parsed",
        )
    )
    rows.append(
        (
            "blame, every version parsed",
            [cold(lambda: blame_every_version(mm, "big")) for _ in range(blame_n)],
            "",
            "",
        )
    )

    # --- rollback ---------------------------------------------------------------------------
    targets = [versions[rng.randrange(1, len(versions))] for _ in range(n)]
    rows.append(
        (
            "rollback('big', to=older version)",
            [_timed(lambda t=t: mm.rollback("big", to=t)) for t in targets],
            "10",
            "git restore + commit",
        )
    )
    small_targets = []
    for sid in small[:n]:
        hist = mm.history(sid)
        if len(hist) > 1:
            small_targets.append((sid, hist[-1].sha))
    rows.append(
        (
            "rollback(small, to=first version)",
            [_timed(lambda s=s, t=t: mm.rollback(s, to=t)) for s, t in small_targets],
            "10",
            "gitmem save",
        )
    )

    rows.append(
        (
            "save_interaction(small) (same commit path)",
            [
                _timed(lambda s=s: mm.save_interaction(s, "reference", "save"))
                for s, _ in small_targets
            ],
            "",
            "",
        )
    )

    def git_rollback(target: str) -> None:
        git(clone, "restore", f"--source={target}", "--staged", "--worktree", _path("big"))
        git(clone, "commit", "-q", "--allow-empty", "-m", f"roll back to {target}")

    rows.append(
        (
            "git restore --source + git commit (clone)",
            [_timed(lambda t=t: git_rollback(t)) for t in targets[: max(5, n // 2)]],
            "",
            "",
        )
    )
    status = git(base, "status", "--porcelain")
    fsck = subprocess.run(["git", "fsck", "--strict"], cwd=base, capture_output=True).returncode
    mm.close()

    medians = {name: _ms(samples) for name, samples, _, _ in rows}
    comparators = {
        "git log -- big": "git log --format=%H -- sessions/big.md",
        "git log -- small": "git log --format=%H -- small session",
        "git show rev:path": "git show rev:sessions/<small>.md",
        "git restore + commit": "git restore --source + git commit (clone)",
        "gitmem save": "save_interaction(small) (same commit path)",
        "markdown.parse x1": "markdown.parse of one such version",
        "blame, every version parsed": "blame, every version parsed",
    }
    print(
        f"\nhistory benchmark: {sessions} sessions, {total} commits ('big': "
        f"{len(versions)} commits, {big_turns} turns at HEAD; 'mid': {len(mid_versions)} "
        f"commits), {n} samples per row\n"
    )
    print_comparison(
        [(name, target, comp, comparators.get(comp, "")) for name, _s, target, comp in rows],
        medians,
        target="target ms",
    )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(
        f"\nbuilding the per-file history cache (housekeeping; all {total} commits): "
        f"{cache_build * 1000:.0f} ms"
    )
    if build:
        print(f"store build: {build:.1f} s")
    print(
        f"git status --porcelain after the rollbacks: {'clean' if not status else 'DIRTY'}; "
        f"git fsck --strict: {'clean' if fsck == 0 else 'FAILED'}"
    )
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if not status and fsck == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
