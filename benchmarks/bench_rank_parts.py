"""What the ranking's newer parts cost: search with the default RankConfig against the same
search with some fields changed, interleaved query by query on one store, in one run.

    python benchmarks/bench_rank_parts.py --path /tmp/bs_17        # a bench_search.py store
    python benchmarks/bench_rank_parts.py --path P --set hop_weight=0 --set answer_weight=0

Without ``--set`` the comparator turns off the second-round parts: the second (multi-hop) round,
the answer component and the speaker share. Prints p50/p95 wall and cpu of both and their
ratio (the machine is shared: the ratio is the figure to read).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_search import Corpus, _stats, _timed, synthetic_store

from gitmem.search.rankconfig import RankConfig

PARTS_OFF = {"hop_weight": 0.0, "answer_weight": 0.0, "speaker_share": 0.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--path", help="the store of bench_search.py (reused when it exists)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="the comparator's RankConfig changes (default: the second-round parts off)",
    )
    args = parser.parse_args()
    changes = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)} or PARTS_OFF
    corpus = Corpus()
    base = Path(args.path) if args.path else Path(tempfile.mkdtemp(prefix="gitmem-bench-"))
    mm, texts, _ids = synthetic_store(base / "store", corpus, args.sessions, args.turns)
    queries = [corpus.query(texts[corpus.rng.randrange(len(texts))]) for _ in range(args.queries)]
    default, other = RankConfig(), RankConfig().tuned(**changes)
    mm.search(queries[0])  # catch up and warm the caches
    runs: dict[str, tuple[list[float], list[float]]] = {"default": ([], []), "other": ([], [])}
    pair = (("default", default), ("other", other))
    for at, query in enumerate(queries):
        # the second search of a query finds SQLite's pages and the term caches warm:
        # which configuration goes first alternates
        for name, config in pair if at % 2 == 0 else pair[::-1]:
            mm.rank_config = config
            wall, cpu = runs[name]
            _timed(wall, cpu, lambda q=query: mm.search(q, k=10))  # type: ignore[misc]
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
        f"{len(texts)} interactions"
    )
    print(f"search, default RankConfig  {_stats(*runs['default'])}")
    print(f"search, {changes}  {_stats(*runs['other'])}")
    ratio = statistics.median(runs["default"][0]) / statistics.median(runs["other"][0])
    print(f"default / comparator (p50 wall): {ratio:.2f}x")
    mm.close_index()
    mm.close()


if __name__ == "__main__":
    main()
