"""Search speed on a large synthetic store, against a rapidfuzz linear scan, in one run.

    python benchmarks/bench_search.py                    # 100,000 interactions, 10,000 sessions
    python benchmarks/bench_search.py --small            # 10,000 interactions, 1,000 sessions

Reports the median (p50) and p95 of
  search            mm.search(query, k=10) on a warm, up-to-date index
  retrieve_context  mm.retrieve_context(session, query, max_tokens=2000)
  catch-up          the first search after one new save: the index reads that one commit
  linear scan       rapidfuzz process.extract(token_set_ratio) over every turn's text (the
                    comparator: what a store without an index would do per query)
and the full index rebuild: its time, next to the time of parsing every session file alone
(the floor: a rebuild must read every file), the index size on disk and its ratio to the
bytes of text it holds (targets: rebuild of 100,000 interactions <= 10 s, index
<= 2x its text, search p50 <= 10 ms, retrieve_context p50 <= 15 ms).
The corpus is synthetic: sessions about one of a few hundred topics, each with its own
words, mixed with Zipf-distributed common words; queries are a few words of a random stored
turn, some with a typo.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rapidfuzz import fuzz, process

from gitmem import MemoryManager
from gitmem.format.parse import parse_lenient
from gitmem.models import Interaction, Message, Session
from gitmem.search.index import SearchIndex
from gitmem.store.repository import Housekeeping

START = datetime(2023, 1, 1, tzinfo=UTC)
_SYLLABLE_TEXT = "ka li mo ra ne tu si po va de gri lan tor ben mis cal ver dun fel sor pat rin"
SYLLABLES = [*_SYLLABLE_TEXT.split(), "bol", "kes", "mar", "ton", "vel", "zu", "ho", "ja"]


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class Corpus:
    """Deterministic synthetic conversations."""

    def __init__(self, seed: int = 7, topics: int = 400) -> None:
        self.rng = random.Random(seed)
        vocab = _vocabulary(self.rng, 30_000)
        self.common = vocab[:5000]
        self.weights = [1 / (rank + 1) for rank in range(len(self.common))]
        rest = vocab[5000:]
        self.topics = [rest[at * 60 : at * 60 + 60] for at in range(topics)]

    def sentence(self, topic: list[str], length: int) -> str:
        picks = self.rng.choices(self.common, self.weights, k=length)
        for at in range(length):
            if self.rng.random() < 0.35:
                picks[at] = self.rng.choice(topic)
        return " ".join(picks).capitalize() + "."

    def session(self, n: int, turns: int) -> Session:
        topic = self.topics[n % len(self.topics)]
        when = START + timedelta(hours=7 * n)
        interactions = [
            Interaction(
                id=f"t{t}",
                timestamp=when + timedelta(minutes=t),
                messages=[
                    Message(speaker="user", content=self.sentence(topic, self.rng.randint(6, 14))),
                    Message(
                        speaker="assistant", content=self.sentence(topic, self.rng.randint(10, 30))
                    ),
                ],
            )
            for t in range(turns)
        ]
        return Session(
            id=f"s{n:05d}",
            created=when,
            last_active=when + timedelta(minutes=turns),
            participants=["user", "assistant"],
            tags=[f"topic{n % 20}"],
            interactions=interactions,
        )

    def query(self, text: str) -> str:
        words = [w.strip(".").lower() for w in text.split()]
        picked = self.rng.sample(words, min(len(words), self.rng.randint(2, 4)))
        if self.rng.random() < 0.2 and picked and len(picked[0]) > 5:  # a typo
            word = picked[0]
            at = self.rng.randrange(1, len(word) - 1)
            picked[0] = word[:at] + word[at + 1] + word[at] + word[at + 2 :]
        return " ".join(picked)


def _stats(samples: list[float], cpu: list[float] | None = None) -> str:
    ordered = sorted(samples)
    p50 = statistics.median(ordered) * 1000
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000
    text = f"p50 {p50:8.2f} ms   p95 {p95:8.2f} ms"
    if cpu:
        text += f"   cpu p50 {statistics.median(cpu) * 1000:6.2f} ms"
    return text + f"   (n={len(samples)})"


def _timed(samples: list[float], cpu: list[float], work: Callable[[], object]) -> object:
    t0, c0 = time.perf_counter(), time.process_time()
    out = work()
    samples.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
    return out


def _text_bytes(index: SearchIndex) -> int:
    row = index._db.execute("SELECT SUM(LENGTH(CAST(text AS BLOB))) FROM docs").fetchone()
    return int(row[0] or 1)


def _parse_all(mm: MemoryManager) -> tuple[float, float]:
    """Seconds (wall, cpu) to read and parse every session file of HEAD (what any rebuild
    must do)."""
    repo = mm.repository
    listing = repo.git("ls-tree", "-r", "HEAD", "sessions").splitlines()  # any folder layout
    blobs = [line.split()[2] for line in listing if line.split()[1] == "blob"]
    start, cpu = time.perf_counter(), time.process_time()
    for _blob, data in repo.stream_blobs(blobs):
        parse_lenient((data or b"").decode("utf-8", "replace"))
    return time.perf_counter() - start, time.process_time() - cpu


def synthetic_store(
    store: Path, corpus: Corpus, sessions: int, turns: int, links: int = 0
) -> tuple[MemoryManager, list[str], list[str]]:
    """Open (or first write, 500 sessions a commit) a store of the corpus's sessions; returns
    it with every interaction's text and its session id, in order. ``links``: when writing,
    each session's metadata links to that many others (spread, the same every time)."""
    built = store.exists()
    mm = MemoryManager.init(store, agent="bench", housekeeping=Housekeeping(enabled=False))
    texts: list[str] = []
    ids: list[str] = []
    for first in range(0, sessions, 500):
        chunk = [corpus.session(n, turns) for n in range(first, min(first + 500, sessions))]
        if not built:
            with mm.batch(f"Synthetic sessions {first}-{first + len(chunk) - 1}"):
                for session in chunk:
                    n = int(session.id[1:])
                    named = [f"s{(n * 7 + k * 131 + 1) % sessions:05d}" for k in range(links)]
                    mm.put_session(session.model_copy(update={"links": named}))
        for session in chunk:
            texts.extend(item.text for item in session.interactions)
            ids.extend(session.id for _ in session.interactions)
    return mm, texts, ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=10, help="interactions per session")
    parser.add_argument("--small", action="store_true", help="1,000 sessions")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--scan-queries", type=int, default=20)
    parser.add_argument("--path", help="keep the store here (reused when it exists)")
    args = parser.parse_args()
    sessions = 1000 if args.small else args.sessions
    corpus = Corpus()
    base = Path(args.path) if args.path else Path(tempfile.mkdtemp(prefix="gitmem-bench-"))
    store = base / "store"
    built = store.exists()
    start = time.perf_counter()
    mm, texts, ids = synthetic_store(store, corpus, sessions, args.turns)
    interactions = len(texts)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(
        f"store: {sessions} sessions, {interactions} interactions at {store}"
        + ("" if built else f" (written in {time.perf_counter() - start:.1f} s)")
    )

    mm.search("warm up")  # open (or replace) the index file, so only the rebuild is timed
    start, cpu0 = time.perf_counter(), time.process_time()
    report = mm.reindex()
    rebuild, rebuild_cpu = time.perf_counter() - start, time.process_time() - cpu0
    size = sum(p.stat().st_size for p in (store / ".git" / "gitmem").glob("index.sqlite*"))
    text = mm._search._store_index().run(_text_bytes)
    parse, parse_cpu = _parse_all(mm)
    print(
        f"full rebuild: {rebuild:.1f} s (cpu {rebuild_cpu:.1f} s) for {report.indexed} sessions "
        f"({rebuild / max(interactions, 1) * 1e6:.0f} us per interaction); parsing every "
        f"file alone {parse:.1f} s (cpu {parse_cpu:.1f} s): rebuild / parse "
        f"{rebuild_cpu / parse_cpu:.1f}x in cpu"
    )
    print(f"index {size / 1e6:.1f} MB for {text / 1e6:.1f} MB of text: {size / text:.2f}x")

    picks = [corpus.rng.randrange(interactions) for _ in range(args.queries)]
    queries = [corpus.query(texts[at]) for at in picks]
    mm.search(queries[0])  # warm the caches like a live agent
    found = 0
    samples: list[float] = []
    cpu: list[float] = []
    for query, at in zip(queries, picks, strict=True):
        hits = _timed(samples, cpu, lambda q=query: mm.search(q, k=10))  # type: ignore[misc]
        found += any(h.session_id == ids[at] for h in hits)  # type: ignore[attr-defined]
    search_p50 = statistics.median(samples)
    print(
        f"search            {_stats(samples, cpu)}   source session in top 10: "
        f"{100 * found / len(queries):.0f}%"
    )

    # an agent asks for context in the session it is in, which it has just saved to or
    # read (the manager keeps it parsed); "cold" also parses that session's file first
    samples, cpu, cold, cold_cpu = [], [], [], []
    context_queries = [corpus.query(texts[corpus.rng.randrange(interactions)]) for _ in range(200)]
    for n in range(100):
        session_id = ids[corpus.rng.randrange(interactions)]
        for query, into, into_cpu in (
            (context_queries[n], cold, cold_cpu),
            (context_queries[100 + n], samples, cpu),
        ):
            _timed(
                into,
                into_cpu,
                lambda q=query, s=session_id: mm.retrieve_context(  # type: ignore[misc]
                    s, q, max_tokens=2000
                ),
            )
    print(f"retrieve_context  {_stats(samples, cpu)}")
    print(f"  (session cold)  {_stats(cold, cold_cpu)}")

    samples, cpu = [], []
    for n in range(20):
        sid = ids[corpus.rng.randrange(interactions)]
        mm.save_interaction(
            sid,
            corpus.query(texts[n]) + " followup",
            "noted",
            timestamp=START + timedelta(days=4000 + n),
        )
        _timed(samples, cpu, lambda: mm._search._store_index().run(lambda index: None))
    print(f"catch-up 1 commit {_stats(samples, cpu)}")

    samples, cpu = [], []
    found = 0
    for query, at in zip(queries[: args.scan_queries], picks, strict=False):
        best = _timed(
            samples,
            cpu,
            lambda q=query: process.extract(  # type: ignore[misc]
                q, texts, scorer=fuzz.token_set_ratio, limit=10
            ),
        )
        found += any(ids[hit[2]] == ids[at] for hit in best)  # type: ignore[attr-defined]
    print(
        f"linear scan       {_stats(samples, cpu)}   source session in top 10: "
        f"{100 * found / max(len(samples), 1):.0f}%  (rapidfuzz token_set_ratio comparator)"
    )
    print(
        f"linear scan / search (p50): {statistics.median(samples) / search_p50:.0f}x;"
        f" load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    mm.close_index()
    mm.close()


if __name__ == "__main__":
    main()
