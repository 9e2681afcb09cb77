"""Time huge sessions (10,000 and 1,000 turns) against small ones and git, in one run.

    python benchmarks/bench_huge.py                  # 10,000-turn "big", 1,000-turn "mid"
    python benchmarks/bench_huge.py --scale 0.1      # a quick run

The store holds "small" (10 turns), "mid" (1,000 turns, then 60 revisions that append a turn
or change one in the middle) and "big" (10,000 turns). Rows and their comparators:

* save to big vs save to small: hot (the manager has the session, like a live agent) and
  cold (a new manager and empty format caches before every save: a fresh process);
* ``mm.diff('mid', v, v+1, text=False)`` over adjacent revisions in random order with a new
  manager (the first pair parses from scratch, later ones reuse the turns they share), and
  the same with every cache emptied first; comparator: one full parse of a version;
* ``mm.at(rev).load_memory('mid')`` of revisions in random order, each read once;
  comparator ``git show rev:path``;
* ``mm.history('big')`` against ``git log -- path``, ``gitmem log big`` (a process)
  against ``gitmem log small``;
* the merge: ``merge_texts`` of three versions of big in-process, and ``gitmem merge-file``
  as git runs it (a new process per file) on big and on small, against ``git merge-file``.

The machine is shared: the load average is printed, and the ratios are the figures to read.
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
from datetime import datetime, timedelta, timezone
from pathlib import Path

from timing import median_p95_ms as _ms
from timing import print_comparison
from timing import timed as _timed

from gitmem import MemoryManager
from gitmem.format import parse as markdown
from gitmem.format import render as rendering
from gitmem.format import turns
from gitmem.format.paths import session_path
from gitmem.models import Interaction, Message, Session
from gitmem.store.repository import Housekeeping
from gitmem.sync.merge import merge_texts

START = datetime(2024, 1, 1, tzinfo=timezone.utc)

Row = tuple[str, list[float], str, str]  # name, samples, target, comparator row


def _session(sid: str, count: int) -> Session:
    interactions = [
        Interaction(
            id=f"t{n:06d}",
            timestamp=START + timedelta(minutes=n),
            messages=[
                Message(speaker="User", content=f"question {n} about topic {n % 97}\nand more"),
                Message(speaker="Assistant", content=f"answer {n}, " * 6),
            ],
        )
        for n in range(count)
    ]
    return Session(
        id=sid,
        created=START,
        last_active=interactions[-1].timestamp,
        participants=["User", "Assistant"],
        interactions=interactions,
    )


def _forget(mm: MemoryManager | None = None) -> MemoryManager:
    """A new manager with empty format caches: what a new process starts from."""
    turns.CACHE.clear()
    rendering.clear_cache()
    return mm or MemoryManager(
        _forget.path,
        agent="bench",  # type: ignore[attr-defined]
        housekeeping=Housekeeping(enabled=False),
    )


def git(path: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=path, capture_output=True, check=True).stdout


def build(path: Path, big: int, mid: int, revisions: int) -> None:
    mm = MemoryManager.init(path, agent="bench", housekeeping=Housekeeping(enabled=False))
    for sid, count in (("small", 10), ("mid", mid), ("big", big)):
        mm.put_session(_session(sid, count))
    for n in range(revisions):
        when = START + timedelta(days=400, minutes=n)
        if n % 4 == 3:  # change a turn in the middle

            def change(s: Session | None, n: int = n) -> Session:
                assert s is not None
                at = len(s.interactions) // 2 + n
                old = s.interactions[at]
                new = old.model_copy(
                    update={
                        "messages": [Message(speaker="User", content=f"edited in revision {n}")]
                    }
                )
                return s.model_copy(
                    update={"interactions": [*s.interactions[:at], new, *s.interactions[at + 1 :]]}
                )

            mm.change_session("mid", change, op="edit", subject=f"Edit a turn of mid ({n})")
        else:
            mm.save_interaction("mid", f"follow-up {n}", f"reply {n}", timestamp=when)
    mm.repository.pack()
    mm.repository.index_history()
    mm.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="fraction of the turn counts (1.0: 10,000 and 1,000)",
    )
    parser.add_argument("--samples", type=int, default=20)
    args = parser.parse_args(argv)
    big_n, mid_n = max(200, int(10_000 * args.scale)), max(50, int(1_000 * args.scale))
    n = args.samples
    work = Path(tempfile.mkdtemp(prefix="gitmem-bench-huge-"))
    base = work / "store"
    load_before = os.getloadavg()
    started = time.perf_counter()
    build(base, big_n, mid_n, max(20, n * 3))
    built = time.perf_counter() - started
    _forget.path = base  # type: ignore[attr-defined]
    rows: list[Row] = []

    # --- saves ------------------------------------------------------------------------------
    mm = _forget()
    mm.load_memory("big")
    mm.load_memory("small")
    hot: dict[str, list[float]] = {"small": [], "big": []}
    for k in range(n):
        for sid in ("small", "big"):
            hot[sid].append(_timed(lambda s=sid, k=k: mm.save_interaction(s, f"hot {k}", "o")))
    rows.append(("save to small (10 turns), hot", hot["small"], "", ""))
    rows.append(
        (f"save to big ({big_n} turns), hot", hot["big"], "2x", "save to small (10 turns), hot")
    )
    mm.close()
    cold: dict[str, list[float]] = {"small": [], "big": []}
    for k in range(max(3, n // 4)):
        for sid in ("small", "big"):
            fresh = _forget()
            save = fresh.save_interaction
            cold[sid].append(_timed(lambda s=sid, k=k, f=save: f(s, f"cold {k}", "ok")))
            fresh.close()
    rows.append(("save to small, cold (new manager, empty caches)", cold["small"], "", ""))
    rows.append(
        (
            "save to big, cold (new manager, empty caches)",
            cold["big"],
            "",
            "save to small, cold (new manager, empty caches)",
        )
    )

    # --- structured diff and the past of mid ------------------------------------------------
    mm = _forget()
    versions = [r.sha for r in mm.history("mid")]
    rng = random.Random(7)
    pairs = rng.sample(range(len(versions) - 1), min(n, len(versions) - 1))
    raw = [git(base, "show", f"{versions[i]}:sessions/f2/mid.md") for i in pairs]
    full = [
        _timed(lambda d=d: markdown.parse_lenient(d.decode(), "mid.md", shortcut=False))
        for d in raw
    ]
    rows.append((f"full parse of one mid version ({mid_n}+ turns)", full, "", ""))
    rows.append(
        (
            "diff('mid', v, v+1, text=False), neighbours in random order",
            [
                _timed(lambda i=i: mm.diff("mid", versions[i + 1], versions[i], text=False))
                for i in pairs
            ],
            "10",
            f"full parse of one mid version ({mid_n}+ turns)",
        )
    )
    mm.close()
    emptied = []
    for i in pairs[: max(3, n // 4)]:
        fresh = _forget()
        emptied.append(
            _timed(lambda i=i, f=fresh: f.diff("mid", versions[i + 1], versions[i], text=False))
        )
        fresh.close()
    rows.append(("diff('mid', v, v+1, text=False), every cache empty", emptied, "", ""))
    mm = _forget()
    revs = rng.sample(versions, min(n, len(versions)))
    rows.append(
        (
            "git show rev:sessions/f2/mid.md",
            [_timed(lambda r=r: git(base, "show", f"{r}:sessions/f2/mid.md")) for r in revs],
            "",
            "",
        )
    )
    mm.load_memory("mid")  # a live manager has read the session once
    rows.append(
        (
            "at(rev).load_memory('mid'), each revision once",
            [_timed(lambda r=r: mm.at(r).load_memory("mid")) for r in revs],
            "5",
            "git show rev:sessions/f2/mid.md",
        )
    )

    # --- history ---------------------------------------------------------------------------
    rows.append(
        (
            "git log --format=%H -- sessions/95/big.md",
            [
                _timed(lambda: git(base, "log", "--format=%H", "--", "sessions/95/big.md"))
                for _ in range(n)
            ],
            "",
            "",
        )
    )
    rows.append(
        (
            "history('big')",
            [_timed(lambda: mm.history("big")) for _ in range(n)],
            "",
            "git log --format=%H -- sessions/95/big.md",
        )
    )
    rows.append(
        (
            "history('mid', changes=True)",
            [_timed(lambda: mm.history("mid", changes=True)) for _ in range(max(3, n // 4))],
            "",
            "",
        )
    )
    gitmem_cli = [sys.executable, "-m", "gitmem", "--repo", str(base)]
    logs: dict[str, list[float]] = {"small": [], "big": []}
    for _ in range(max(3, n // 4)):
        for sid in ("small", "big"):
            logs[sid].append(
                _timed(
                    lambda s=sid: subprocess.run(
                        [*gitmem_cli, "log", s], check=True, capture_output=True
                    )
                )
            )
    rows.append(("gitmem log small (process)", logs["small"], "", ""))
    rows.append(("gitmem log big (process)", logs["big"], "", "gitmem log small (process)"))
    mm.close()

    # --- merge -----------------------------------------------------------------------------
    files: dict[str, list[Path]] = {}
    for sid in ("small", "big"):
        data = (base / session_path(sid)).read_bytes()
        versions3 = [data]
        for side in ("ours", "theirs"):
            versions3.append(
                data
                + f"\n### 2030-01-01T00:00:00+00:00 {{#{side}}}\n**User**:\n"
                f"> from {side}\n".encode()
            )
        files[sid] = []
        for name, content in zip(("base", "ours", "theirs"), versions3, strict=True):
            path = work / f"{sid}.{name}.md"
            path.write_bytes(content)
            files[sid].append(path)
    b, o, t = (p.read_bytes() for p in files["big"])
    rows.append(
        (
            "merge_texts(big), empty caches",
            [
                _timed(lambda: (_forget(mm), merge_texts(b, o, t, "big.md")))
                for _ in range(max(3, n // 4))
            ],
            "",
            "",
        )
    )
    rows.append(
        (
            "merge_texts(big), warm",
            [_timed(lambda: merge_texts(b, o, t, "big.md")) for _ in range(n)],
            "",
            "",
        )
    )

    def merge_process(sid: str) -> None:
        scratch = work / f"{sid}.scratch.md"
        shutil.copy(files[sid][1], scratch)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "gitmem",
                "merge-file",
                str(files[sid][0]),
                str(scratch),
                str(files[sid][2]),
                f"sessions/{sid}.md",
            ],
            check=True,
            capture_output=True,
        )

    def git_merge(sid: str) -> None:
        scratch = work / f"{sid}.scratch.md"
        shutil.copy(files[sid][1], scratch)
        subprocess.run(
            ["git", "merge-file", str(scratch), str(files[sid][0]), str(files[sid][2])],
            capture_output=True,
        )

    reps = max(3, n // 4)
    rows.append(
        (
            "git merge-file (big, lines)",
            [_timed(lambda: git_merge("big")) for _ in range(reps)],
            "",
            "",
        )
    )
    rows.append(
        (
            "gitmem merge-file small (process)",
            [_timed(lambda: merge_process("small")) for _ in range(reps)],
            "150",
            "",
        )
    )
    rows.append(
        (
            "gitmem merge-file big (process)",
            [_timed(lambda: merge_process("big")) for _ in range(reps)],
            "",
            "gitmem merge-file small (process)",
        )
    )

    medians = {name: _ms(samples) for name, samples, _, _ in rows}
    # the session's file and its parts
    size = sum(p.stat().st_size for p in (base / "sessions" / "95").glob("big*.md"))
    print(
        f"\nhuge-session benchmark: big {big_n} turns ({size / 1e6:.1f} MB), mid {mid_n} "
        f"turns + {len(versions)} revisions; {n} samples per row (fewer for cold rows); "
        f"store built in {built:.1f} s; load average {load_before[0]:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after ({os.cpu_count()} CPUs)\n"
    )
    print_comparison([(name, target, comp, comp) for name, _s, target, comp in rows], medians)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
