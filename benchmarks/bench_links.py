"""The link graph and link following on a large store (wiki links), in one run.

    python benchmarks/bench_links.py                      # 10,000 sessions of 10 turns
    python benchmarks/bench_links.py --path /tmp/bl --sessions 2000 --repeat 10

The store is bench_search.py's synthetic corpus with links added: every 10th session's
first turn says ``see [[an earlier session of its topic]]``, every 25th has a ``links``
metadata line to another (``--path`` keeps the store and reuses it). Measured, same run, same index:
  link_graph            ``mm.link_graph()``: from the links table, kept until the index
                        changes (now), against the scan of every session row's link
                        columns it did before, and the older text scan
  text scan (before)    what link_graph did before: every document whose text holds
                        ``[[``, cut with the wiki-link pattern, plus the metadata links
                        (the same SQL and regex, on the same index file)
  backlinks             the sessions linking to 10 sessions: the links table's index on
                        the target (now), against the instr scan of every session row's
                        link columns it replaced (before), on the same index file
  search --links        ``mm.search(q, include_links=True)``, against plain ``mm.search(q)``
Both graphs, and both backlink answers, are checked to be equal before timing.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sqlite3
import tempfile
import time
from pathlib import Path

from bench_search import Corpus
from timing import median_p95_ms, print_comparison, timed

from gitmem import MemoryManager
from gitmem.models import Message, Session
from gitmem.search.browse import graph
from gitmem.search.catchup import index_path
from gitmem.store.repository import Housekeeping

_OLD_RULE = re.compile(r"\[\[([^\[\]\n]{1,240})\]\]")
_SEP = "\x1f"
TOPICS = 400  # Corpus(): session n talks about topic n % 400; links join sessions of a topic


def linked_session(corpus: Corpus, n: int, turns: int) -> Session:
    """The corpus's session ``n``, with a text link every 10th and a metadata link every
    25th, to an earlier session of the same topic."""
    session = corpus.session(n, turns)
    update: dict[str, object] = {}
    if n >= TOPICS and n % 10 == 0:
        first = session.interactions[0]
        said = first.messages[0]
        told = Message(speaker=said.speaker, content=f"{said.content} See [[s{n - TOPICS:05d}]].")
        update["interactions"] = [
            first.model_copy(update={"messages": [told, *first.messages[1:]]}),
            *session.interactions[1:],
        ]
    if n >= 2 * TOPICS and n % 25 == 0:
        update["links"] = [f"s{n - 2 * TOPICS:05d}"]
    return session.model_copy(update=update)


def store_with_links(path: Path, sessions: int, turns: int) -> MemoryManager:
    built = path.exists()
    mm = MemoryManager.init(path, agent="bench", housekeeping=Housekeeping(enabled=False))
    if not built:
        corpus = Corpus()
        for first in range(0, sessions, 500):
            with mm.batch(f"Linked sessions {first}-"):
                for n in range(first, min(first + 500, sessions)):
                    mm.put_session(linked_session(corpus, n, turns))
    return mm


def old_graph(db: sqlite3.Connection, known: set[str]) -> dict[str, list[str]]:
    """The graph as link_graph computed it before the index kept text links."""
    edges: list[tuple[str, list[str]]] = [
        (str(sid), [v for v in str(links).split(_SEP) if v])
        for sid, links in db.execute(
            "SELECT session_id, links FROM sessions WHERE links != ?", (_SEP + _SEP,)
        )
    ]
    for sid, text in db.execute(
        "SELECT s.session_id, d.text FROM docs d JOIN sessions s"
        " ON s.skey = d.skey WHERE instr(d.text, '[[') > 0"
    ):
        edges.append((str(sid), _OLD_RULE.findall(str(text))))
    return graph(edges, known, None).links


def column_graph(db: sqlite3.Connection, known: set[str]) -> dict[str, list[str]]:
    """The graph as link_graph read it before the links table: a scan of every session
    row's link columns, each time."""
    empty = _SEP + _SEP
    edges = [
        (str(sid), [v for v in f"{meta}{_SEP}{text}".split(_SEP) if v])
        for sid, meta, text in db.execute(
            "SELECT session_id, links, text_links FROM sessions"
            " WHERE substr(path, 1, 9) = 'sessions/' AND (links != ? OR text_links NOT IN ('', ?))",
            (empty, empty),
        )
    ]
    return graph(edges, known, None).links


def old_links_to(db: sqlite3.Connection, wanted: list[str]) -> dict[str, list[str]]:
    """The sessions linking to each of ``wanted`` as found before the links table: one
    instr scan of every session row per 100 ids."""
    out: dict[str, dict[str, None]] = {}
    for at in range(0, len(wanted), 100):
        chunk = wanted[at : at + 100]
        where = " OR ".join(["instr(links, ?) > 0 OR instr(text_links, ?) > 0"] * len(chunk))
        rows = db.execute(
            f"SELECT session_id, links, text_links FROM sessions WHERE {where} ORDER BY skey",
            [_SEP + sid + _SEP for sid in chunk for _ in (0, 1)],
        ).fetchall()
        for source, meta, text in rows:
            targets = {v for v in f"{meta}{_SEP}{text}".split(_SEP) if v}
            for sid in targets.intersection(chunk):
                out.setdefault(sid, {})[str(source)] = None
    return {sid: list(sources) for sid, sources in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=10, help="interactions per session")
    parser.add_argument("--path", help="keep the store here (reused when it exists)")
    parser.add_argument("--repeat", type=int, default=20, help="timed calls of each")
    parser.add_argument("--queries", type=int, default=30, help="search queries")
    args = parser.parse_args()
    # a new store goes in a folder of its own: mkdtemp's folder exists, and would be reused
    base = Path(args.path) if args.path else Path(tempfile.mkdtemp(prefix="gitmem-links-")) / "s"
    started = time.perf_counter()
    mm = store_with_links(base, args.sessions, args.turns)
    print(
        f"store: {args.sessions} sessions x {args.turns} turns at {base} "
        f"(ready in {time.perf_counter() - started:.1f} s)"
    )
    new = mm.link_graph()  # catches the index up (a first build when the store is new)
    assert new.links, f"no session links another in {base}: not a store this script built"
    db = sqlite3.connect(f"file:{index_path(mm.repository)}?mode=ro", uri=True)
    known = {str(r[0]) for r in db.execute("SELECT session_id FROM sessions")}
    assert old_graph(db, known) == new.links, "the two graphs differ"
    assert column_graph(db, known) == new.links, "the two graphs differ"
    print(f"graph: {len(new.links)} linking sessions, {len(new.missing)} missing targets")

    targets = sorted({t for ts in new.links.values() for t in ts})
    picked = random.Random(5).sample(targets, min(10, len(targets)))
    index = mm._search._store_index()
    assert index.run(lambda ix: ix.links_to(picked)) == old_links_to(db, picked)

    samples: dict[str, list[float]] = {
        "graph": [],
        "scan": [],
        "plain": [],
        "links": [],
        "back": [],
        "instr": [],
        "columns": [],
    }
    for _ in range(args.repeat):
        samples["graph"].append(timed(mm.link_graph))
        samples["scan"].append(timed(lambda: old_graph(db, known)))
        samples["columns"].append(timed(lambda: column_graph(db, known)))
        samples["back"].append(timed(lambda: index.run(lambda ix: ix.links_to(picked))))
        samples["instr"].append(timed(lambda: old_links_to(db, picked)))
    rng = random.Random(3)
    corpus = Corpus()
    queries = [
        " ".join(rng.sample(corpus.topics[rng.randrange(len(corpus.topics))], 2))
        for _ in range(args.queries)
    ]
    pulled = 0
    for query in queries:
        mm.search(query)  # warm
        samples["plain"].append(timed(lambda q=query: mm.search(q)))  # type: ignore[misc]
        started = time.perf_counter()
        hits = mm.search(query, include_links=True)
        samples["links"].append(time.perf_counter() - started)
        pulled += sum(1 for h in hits if "link" in h.components)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"search --links pulled {pulled / len(queries):.1f} linked hits per query\n")
    medians = {name: median_p95_ms(values) for name, values in samples.items()}
    print_comparison(
        [
            ("link_graph (links table, kept)", "≤ 10 ms", "row scan (before)", "columns"),
            ("row scan (before)", "-", "-", ""),
            ("text scan (before)", "-", "-", ""),
            ("backlinks of 10, links table", "≤ 10 ms", "instr scan (before)", "instr"),
            ("instr scan (before)", "-", "-", ""),
            ("search, include_links", "-", "search", "plain"),
            ("search", "≤ 10 ms", "-", ""),
        ],
        {
            "link_graph (links table, kept)": medians["graph"],
            "row scan (before)": medians["columns"],
            "columns": medians["columns"],
            "text scan (before)": medians["scan"],
            "backlinks of 10, links table": medians["back"],
            "instr scan (before)": medians["instr"],
            "instr": medians["instr"],
            "search, include_links": medians["links"],
            "search": medians["plain"],
            "scan": medians["scan"],
            "plain": medians["plain"],
        },
    )


if __name__ == "__main__":
    main()
