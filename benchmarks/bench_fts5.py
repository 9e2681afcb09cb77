"""SQLite FTS5 against gitmem's own postings tables, side by side, in one run.

    python benchmarks/bench_fts5.py --path /tmp/store-100k            # reuse bench_search's store
    python benchmarks/bench_fts5.py --path /tmp/s --sessions 1000      # a small store
    python benchmarks/bench_fts5.py --locomo LOCOMO_JSON

Both variants hold the same documents table (text, analysed terms, session, position); they
differ in the inverted index the ranker reads:

  own    gitmem's ``postings`` table: each term's postings packed in one BLOB (5 bytes a
         posting, plus a short tail of recent ones), ordered by a precomputed BM25 impact,
         so the ranker reads only the best postings of a common word
  fts5   a contentless FTS5 table over the documents' analysed terms (``detail=full``; the
         terms stay in the documents table, as an external-content table would read them:
         the inverted index FTS5 builds is the same either way).
         FTS5 cannot order a term's documents by impact, so every posting of a term is read
         (through ``fts5vocab``'s instance table, which gives the term frequency) and the
         best are picked in Python; document frequencies and the vocabulary come from the
         ``fts5vocab`` row table

It reports the index size, the full rebuild time, search and retrieve_context p50 on the
store made by ``bench_search.py`` (``--path``; built here when missing), and with
``--locomo`` the LoCoMo turn R@5 of both through ``bench_locomo.py``'s direct mode.
"""

from __future__ import annotations

import argparse
import os
import statistics
import string
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_search

from gitmem import MemoryManager
from gitmem.search import catchup
from gitmem.search import index as index_module
from gitmem.search.index import SearchIndex
from gitmem.store.repository import Housekeeping

# the analysed terms are space-separated: every other ASCII character is part of a token
_TOKENCHARS = "".join(c for c in string.punctuation).replace("'", "''")
_FTS = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(terms, content='',"
    " detail=full, tokenize=\"ascii tokenchars '{chars}'\");"
    "CREATE VIRTUAL TABLE IF NOT EXISTS fts_rows USING fts5vocab(fts, 'row');"
    "CREATE VIRTUAL TABLE IF NOT EXISTS fts_hits USING fts5vocab(fts, 'instance');"
).format(chars=_TOKENCHARS.replace('"', '""'))


class Fts5Index(SearchIndex):
    """An :class:`SearchIndex` whose inverted index is an FTS5 table instead of ``postings``."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        super().__init__(path)
        self._fts_vocab: tuple[int, list[str]] | None = None
        self._db.executescript(_FTS)

    def _write_postings(self, postings, speakers, *, fresh=False):  # type: ignore[no-untyped-def]
        # postings and term counts live in FTS5: index the new documents' terms there (and
        # leave no blocks to write: a rebuild hands over the postings it collects)
        docs = sorted({(key >> 16) & 0xFFFFFFFF for keys in postings.values() for key in keys})
        postings.clear()
        rows = []
        for at in range(0, len(docs), 500):
            chunk = docs[at : at + 500]
            marks = ",".join("?" * len(chunk))
            rows.extend(
                self._db.execute(f"SELECT id, terms FROM docs WHERE id IN ({marks})", chunk)
            )
        self._db.executemany(
            "INSERT INTO fts(rowid, terms) VALUES(?, ?)",
            [(i, self.vocab.term_text(t)) for i, t in rows],
        )
        self._count_speakers(speakers, 1)

    def _delete_docs(self, doc_ids, keep=None):  # type: ignore[no-untyped-def]
        for at in range(0, len(doc_ids), 500):
            chunk = list(doc_ids[at : at + 500])
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT id, terms FROM docs WHERE id IN ({marks})", chunk
            ).fetchall()
            self._db.executemany(
                "INSERT INTO fts(fts, rowid, terms) VALUES('delete', ?, ?)",
                [(i, self.vocab.term_text(t)) for i, t in rows],
            )
        super()._delete_docs(doc_ids, keep)

    def clear(self) -> None:
        super().clear()
        self._db.execute("INSERT INTO fts(fts) VALUES('delete-all')")

    def df(self, words):  # type: ignore[no-untyped-def]
        wanted = list(dict.fromkeys(words))
        out: dict[str, int] = {}
        with self._lock:
            for term in wanted:
                row = self._db.execute("SELECT doc FROM fts_rows WHERE term=?", (term,)).fetchone()
                if row is not None:
                    out[term] = int(row[0])
        return out

    def vocabulary(self) -> list[str]:
        with self._lock:
            if self._fts_vocab is None or self._fts_vocab[0] != self.generation:
                self._fts_vocab = (
                    self.generation,
                    [r[0] for r in self._db.execute("SELECT term FROM fts_rows")],
                )
            return self._fts_vocab[1]

    def postings(self, term, limit):  # type: ignore[no-untyped-def]
        with self._lock:
            rows = self._db.execute(
                "SELECT d.id, h.tf, d.dl, d.skey, d.pos, d.kind, d.norm FROM"
                " (SELECT doc, COUNT(*) AS tf FROM fts_hits WHERE term=? GROUP BY doc) h"
                " JOIN docs d ON d.id = h.doc",
                (term,),
            ).fetchall()
        rows.sort(key=lambda r: (-self._impact(r[1], r[6]), r[0]))
        return [r[:6] for r in rows[:limit]]


def _size(store: Path) -> int:
    return sum(p.stat().st_size for p in (store / ".git" / "gitmem").glob("index.sqlite*"))


def _text_bytes(index: SearchIndex) -> int:
    row = index._db.execute("SELECT SUM(LENGTH(CAST(text AS BLOB))) FROM docs").fetchone()
    return int(row[0] or 0)


def _measure(name: str, store: Path, queries: list[str], sessions: list[str]) -> list[str]:
    mm = MemoryManager(store, housekeeping=Housekeeping(enabled=False))
    start = time.perf_counter()
    mm.reindex()
    rebuild = time.perf_counter() - start
    size = _size(store)
    text = mm._search._store_index().run(_text_bytes)
    mm.search(queries[0])
    search = []
    for query in queries:
        t0 = time.perf_counter()
        mm.search(query, k=10)
        search.append(time.perf_counter() - t0)
    context = []
    for query, session in zip(queries, sessions, strict=False):
        mm.retrieve_context(session, query, max_tokens=2000)  # parse the session first
        t0 = time.perf_counter()
        mm.retrieve_context(session, query, max_tokens=2000)
        context.append(time.perf_counter() - t0)
    mm.close_index()
    mm.close()
    return [
        name,
        f"{size / 1e6:.0f}",
        f"{size / max(text, 1):.2f}",
        f"{rebuild:.1f}",
        f"{statistics.median(search) * 1000:.1f}",
        f"{statistics.median(context) * 1000:.1f}",
    ]


def _locomo(path: str, variant: type[SearchIndex]) -> str:
    import bench_locomo

    from gitmem.importers import locomo
    from gitmem.search.rankconfig import RankConfig

    bench_locomo.SearchIndex = variant  # type: ignore[attr-defined,misc]
    convs = locomo.load(path)[:3]
    scores = bench_locomo.direct(convs, RankConfig(), 25)
    overall = next(row for row in scores.rows() if row["category"] == "overall")
    return f"{overall['R@5']} / {overall['R@10']} / {overall['S@1']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", required=True, help="bench_search.py's --path (built if missing)")
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--locomo", help="a LoCoMo file: also report turn R@5 of both")
    args = parser.parse_args()
    store = Path(args.path) / "store"
    corpus = bench_search.Corpus()
    if not store.exists():
        sys.argv = [
            sys.argv[0],
            "--path",
            args.path,
            "--sessions",
            str(args.sessions),
            "--queries",
            "10",
            "--scan-queries",
            "1",
        ]
        bench_search.main()
    texts = [corpus.session(n, 10) for n in range(min(args.sessions, 2000))]
    rng = corpus.rng
    picks = [rng.choice(texts) for _ in range(args.queries)]
    queries = [corpus.query(rng.choice(s.interactions).text) for s in picks]
    sessions = [s.id for s in picks]
    rows = []
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for name, variant in (("own postings", SearchIndex), ("fts5 (detail=full)", Fts5Index)):
        # the store's index file is opened by index.open_file: patch its module too
        catchup.SearchIndex = index_module.SearchIndex = variant  # type: ignore[attr-defined,misc]
        (store / ".git" / "gitmem" / "index.sqlite").unlink(missing_ok=True)
        rows.append(_measure(name, store, queries, sessions))
        if args.locomo:
            rows[-1].append(_locomo(args.locomo, variant))
    head = ["index", "MB", "x text", "rebuild s", "search p50 ms", "retrieve p50 ms"]
    if args.locomo:
        head.append("LoCoMo R@5 / R@10 / S@1")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
