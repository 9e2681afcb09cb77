"""Curated facts: the cost of remember, facts(query=...) and retrieve_context with facts.

    python benchmarks/bench_facts.py                 # 10,000 facts; 100,000 interactions
    python benchmarks/bench_facts.py --small         # 1,000 facts; 10,000 interactions
    python benchmarks/bench_facts.py --path /tmp/bf  # keep (and reuse) the large store
    python benchmarks/bench_facts.py --writes-only   # remember and the first facts() only
    PYTHONPATH=/tmp/main python benchmarks/bench_facts.py --writes-only  # another gitmem

Prints one Markdown table (median, p95, ratio to the comparator measured in the same run)
against the issue-15 targets:
  remember @ N facts      mm.remember(text) on a memory file of N facts, next to
                          save_interaction on the same store (target: save + 1 ms); the
                          "(size)" row sets it against the 100-fact file (target: 2x)
  first facts() @ N       the first mm.facts() of a new process (target 50 ms at 10,000),
                          against the same on the 100-fact file
  facts(query) @ 10,000   mm.facts(query=...) on a warm index (target 5 ms), next to a plain
                          scan of every fact's words (what a store without the index does)
  retrieve_context        with the facts (``with_facts=True``, the default) against the same
                          call without them, on 100,000 interactions (target 15 ms)
The synthetic conversations come from bench_search's corpus; the facts are sentences of the
same topic words, so a query matches some of them.
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
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # PYTHONPATH comes first

from bench_search import Corpus, synthetic_store  # a sibling script: the same corpus
from timing import median_p95_ms, print_comparison, timed

import gitmem
from gitmem import MemoryManager
from gitmem.format.facts import Fact, MemoryFile
from gitmem.store.repository import Housekeeping
from gitmem.text import terms


def fact_texts(corpus: Corpus, count: int) -> list[str]:
    """``count`` distinct fact sentences made of topic and common words."""
    out: dict[str, None] = {}
    while len(out) < count:
        topic = corpus.topics[len(out) % len(corpus.topics)]
        out[corpus.sentence(topic, corpus.rng.randint(5, 12))] = None
    return list(out)


def fill(mm: MemoryManager, texts: list[str]) -> None:
    """Write ``texts`` as facts in one commit (the fast way to a big file)."""
    facts = [
        Fact(id=f"f{n:07x}", text=text, section=f"Topic {n % 12}", sources=(), by="bench")
        for n, text in enumerate(texts)
    ]

    def change(memory: MemoryFile) -> MemoryFile:
        return memory.with_facts([*memory.facts, *facts])

    mm.change_facts(change, op="remember", subject=f"Bench: {len(facts)} facts")


def bench_writes(
    base: Path,
    corpus: Corpus,
    sizes: list[int],
    rounds: int,
    medians: dict[str, tuple[float, float]],
) -> list[tuple[str, str, str, str]]:
    rows = []
    for size in sizes:
        mm = MemoryManager.init(
            base / f"writes-{size}", agent="bench", housekeeping=Housekeeping(enabled=False)
        )
        fill(mm, fact_texts(corpus, size))
        mm.save_interaction("warm", "warm up", "ok")
        mm.remember("Warm up the caches.")
        saves, remembers = [], []
        for n in range(rounds):  # interleaved: both see the same load
            saves.append(
                timed(
                    lambda n=n, mm=mm: mm.save_interaction(  # type: ignore[misc]
                        f"s{n % 7}", f"question {n} about tea", "an answer"
                    )
                )
            )
            remembers.append(
                timed(
                    lambda n=n, mm=mm: mm.remember(  # type: ignore[misc]
                        f"New fact number {n} about green tea.", section="Bench"
                    )
                )
            )
        save_name, name = f"save_interaction @ {size:,} facts", f"remember @ {size:,} facts"
        medians[save_name] = median_p95_ms(saves)
        medians[name] = median_p95_ms(remembers)
        rows.append((save_name, "", "", ""))
        rows.append((name, "save + 1 ms", "save_interaction", save_name))
        mm.close()
        cold = first_read_ms(base / f"writes-{size}", 5, kept=False)
        first = first_read_ms(base / f"writes-{size}", 5)
        medians[f"first facts() of a new process @ {size:,} facts"] = median_p95_ms(first)
        medians[f"first facts(), nothing kept @ {size:,} facts"] = median_p95_ms(cold)
    smallest, largest = min(sizes), max(sizes)
    if largest != smallest:  # the cost of a file's size: the same call on the smallest file
        for what in (
            "remember @ {:,} facts",
            "first facts() of a new process @ {:,} facts",
            "first facts(), nothing kept @ {:,} facts",
        ):
            big, small = what.format(largest), what.format(smallest)
            medians[big + " (size)"] = medians[big]
            target = "≤ 2x" if what.startswith("remember") else "≤ 50 ms"
            rows.append((big + " (size)", target, small, small))
    return rows


def first_read_ms(store: Path, runs: int, *, kept: bool = True) -> list[float]:
    """Seconds the first ``facts()`` of a new process takes on ``store`` (the imports and
    the opening of the store not counted), in ``runs`` processes: after an earlier process
    read the file (its cut lines kept in .git/gitmem/facts-rows), or with ``kept=False``
    with nothing kept (the first read after another process changed the file)."""
    script = (
        "import sys, time\n"
        "from gitmem import MemoryManager\n"
        "from gitmem.store.repository import Housekeeping\n"
        # no repack set off in the background: it would slow the next runs down
        "mm = MemoryManager(sys.argv[1], housekeeping=Housekeeping(enabled=False))\n"
        "mm.head()\n"
        "t = time.perf_counter()\n"
        "mm.facts()\n"
        "print(time.perf_counter() - t)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(gitmem.__file__).resolve().parent.parent)}
    rows = store / ".git" / "gitmem" / "facts-rows"
    if kept:  # one read keeps the lines (a gitmem without the cache: nothing changes)
        subprocess.run(
            [sys.executable, "-c", script, str(store)],
            capture_output=True,
            check=True,
            env=env,
            cwd=store,
        )
    out = []
    for _ in range(runs):
        if not kept:
            shutil.rmtree(rows, ignore_errors=True)
        out.append(
            float(
                subprocess.run(
                    [sys.executable, "-c", script, str(store)],
                    capture_output=True,
                    text=True,
                    check=True,
                    env=env,
                    cwd=store,  # not the current folder's gitmem (python -c puts it first)
                ).stdout
            )
        )
    return out


def bench_query(
    base: Path, corpus: Corpus, count: int, queries: int, medians: dict[str, tuple[float, float]]
) -> list[tuple[str, str, str, str]]:
    mm = MemoryManager.init(base / "query", agent="bench", housekeeping=Housekeeping(enabled=False))
    texts = fact_texts(corpus, count)
    fill(mm, texts)
    asked = [corpus.query(texts[corpus.rng.randrange(count)]) for _ in range(queries)]
    build = timed(lambda: mm.facts(query="warm"))  # parse + index, once per file version
    mm.remember("One more fact after the file was indexed.")
    after = timed(lambda: mm.facts(query="warm"))  # the index of the changed file
    found, scans, hits = [], [], 0
    facts = mm.facts()
    words = [set(terms(f.text)) for f in facts]
    for query in asked:
        found.append(timed(lambda q=query: mm.facts(query=q, limit=10)))  # type: ignore[misc]

        def scan(q: str = query) -> list[Fact]:
            wanted = set(terms(q))
            return [f for f, w in zip(facts, words, strict=True) if wanted & w][:10]

        scans.append(timed(scan))
        hits += bool(mm.facts(query=query, limit=10))
    name, scan_name = f"facts(query) @ {count:,} facts", f"scan of {count:,} facts' terms"
    medians[name] = median_p95_ms(found)
    medians[scan_name] = median_p95_ms(scans)
    medians[f"first facts(query) of a new process @ {count:,}"] = (build * 1000, build * 1000)
    medians[f"first facts(query) after a remember @ {count:,}"] = (after * 1000, after * 1000)
    print(f"facts(query): {hits}/{len(asked)} queries found a fact")
    mm.close()
    return [
        (name, "5 ms", "term scan (pre-tokenised)", scan_name),
        (scan_name, "", "", ""),
        (f"first facts(query) of a new process @ {count:,}", "", "", ""),
        (f"first facts(query) after a remember @ {count:,}", "", "", ""),
    ]


def bench_context(
    store: Path,
    corpus: Corpus,
    sessions: int,
    turns: int,
    facts: int,
    queries: int,
    medians: dict[str, tuple[float, float]],
) -> list[tuple[str, str, str, str]]:
    built = store.exists()
    start = time.perf_counter()
    mm, texts, ids = synthetic_store(store, corpus, sessions, turns)
    if not mm.memory_file().facts:
        fill(mm, fact_texts(corpus, facts))
    print(
        f"context store: {sessions:,} sessions, {len(texts):,} interactions, "
        f"{len(mm.memory_file().facts):,} facts"
        + ("" if built else f" (built in {time.perf_counter() - start:.0f} s)")
    )
    mm.search("warm up")
    mm.retrieve_context(ids[0], "warm up")
    rng = random.Random(3)
    with_facts, without = [], []
    included = 0
    for _ in range(queries):
        at = rng.randrange(len(texts))
        query, session_id = corpus.query(texts[at]), ids[at]
        mm.load_memory(session_id)  # an agent asks in the session it has just used
        pair = ((with_facts, True), (without, False))
        for into, flag in pair if len(with_facts) % 2 else pair[::-1]:  # neither always first
            into.append(
                timed(
                    lambda q=query, s=session_id, f=flag: (  # type: ignore[misc]
                        mm.retrieve_context(s, q, max_tokens=2000, with_facts=f)
                    )
                )
            )
        first = mm.retrieve_context(session_id, query, 2000)[0]["content"]
        included += first.startswith("What you know")
    n = len(texts)
    name, plain = (f"retrieve_context with facts @ {n:,}", f"retrieve_context without @ {n:,}")
    medians[name] = median_p95_ms(with_facts)
    medians[plain] = median_p95_ms(without)
    print(f"retrieve_context: a 'What you know' message in {included}/{queries} contexts")
    mm.close_index()
    mm.close()
    return [(name, "15 ms", "same, with_facts=False", plain), (plain, "", "", "")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--small", action="store_true", help="1,000 facts and 1,000 sessions (a quick run)"
    )
    parser.add_argument("--facts", type=int, default=10_000, help="facts for facts(query)")
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=10, help="interactions per session")
    parser.add_argument(
        "--context-facts", type=int, default=1_000, help="facts in the retrieve_context store"
    )
    parser.add_argument("--rounds", type=int, default=40, help="remember/save pairs per size")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--path", help="keep the 100,000-interaction store here (reused)")
    parser.add_argument(
        "--writes-only", action="store_true", help="only remember and the first facts()"
    )
    args = parser.parse_args()
    facts = 1_000 if args.small else args.facts
    sessions = 1_000 if args.small else args.sessions
    base = Path(tempfile.mkdtemp(prefix="gitmem-bench-facts-"))
    store = Path(args.path) if args.path else base / "context"
    corpus = Corpus()
    print(f"gitmem from {Path(gitmem.__file__).resolve().parent}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at the start")
    medians: dict[str, tuple[float, float]] = {}
    rows = bench_writes(base, corpus, sorted({100, facts}), args.rounds, medians)
    if not args.writes_only:
        rows += bench_query(base, corpus, facts, args.queries, medians)
        rows += bench_context(
            store, corpus, sessions, args.turns, args.context_facts, args.queries // 2, medians
        )
    print()
    print_comparison(rows, medians)
    print(f"\nload average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at the end")


if __name__ == "__main__":
    main()
