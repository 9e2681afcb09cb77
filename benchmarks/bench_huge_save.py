"""p50 of a hot save into a 10-turn session against one into a 10,000-turn session, in one run.

    python benchmarks/bench_huge_save.py                 # 10,000 turns, parts as shipped
    python benchmarks/bench_huge_save.py --no-parts      # the same with one file per session

Both sessions are written by ``put_session`` first; with parts the first save into the big
one splits it into part files (that one commit is not timed: the migration), and every
later save rewrites only the session's file. ``--no-parts`` sets the part size past the
session's length, which is how every store saved before parts existed: the comparison on
the same machine. Saves alternate between the two sessions, so load drift hits both; the
load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from bench_huge import _session
from timing import median_p95_ms, timed

from gitmem import MemoryManager
from gitmem.store.repository import Housekeeping


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--no-parts", action="store_true", help="one file per session")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="gitmem-bench-huge-save-"))
    load_before = os.getloadavg()[0]
    mm = MemoryManager.init(work / "store", agent="bench", housekeeping=Housekeeping(enabled=False))
    if args.no_parts:
        mm._store.parts.turns_per_part = args.turns * 10
    mm.put_session(_session("small", 10))
    mm.put_session(_session("big", args.turns))
    mm.save_interaction("small", "warm-up", "ok")
    mm.save_interaction("big", "warm-up", "ok")  # with parts: the split, one commit
    samples: dict[str, list[float]] = {"small": [], "big": []}
    for k in range(args.samples):
        for sid in ("small", "big"):
            samples[sid].append(timed(lambda s=sid, k=k: mm.save_interaction(s, f"hot {k}", "o")))
    mm.close()
    small, big = median_p95_ms(samples["small"])[0], median_p95_ms(samples["big"])[0]
    mode = "one file per session" if args.no_parts else "parts"
    print(
        f"hot save ({mode}), {args.samples} samples each; load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after ({os.cpu_count()} CPUs)"
    )
    print(f"  p50 save into 10-turn session:      {small:7.2f} ms")
    print(f"  p50 save into {args.turns}-turn session: {big:7.2f} ms")
    print(f"  ratio big / small: {big / small:.2f}x (target <= 2x)")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
