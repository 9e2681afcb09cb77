"""The index's links table: the sessions linking to one are an index lookup, and the
answers are those of the scan of every session row it replaced (backlinks, link graph)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gitmem import MemoryManager
from gitmem.format.paths import session_path
from gitmem.search.catchup import index_path
from gitmem.summary.triggers import SummaryConfig
from tests.conftest import git

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
_SEP = "\x1f"


def _split(value: str) -> list[str]:
    return [v for v in value.split(_SEP) if v]


def _scan_links_to(db: sqlite3.Connection, wanted: list[str]) -> dict[str, list[str]]:
    """Backlinks as the instr scan of every row's link columns found them."""
    out: dict[str, dict[str, None]] = {}
    for source, meta, text in db.execute(
        "SELECT session_id, links, text_links FROM sessions ORDER BY skey"
    ):
        for sid in (set(_split(meta)) | set(_split(text))).intersection(wanted):
            out.setdefault(sid, {})[source] = None
    return {sid: list(sources) for sid, sources in out.items()}


def _scan_session_links(db: sqlite3.Connection, folder: str) -> list[tuple[str, tuple[str, ...]]]:
    rows = db.execute(
        "SELECT session_id, links, text_links FROM sessions WHERE substr(path, 1, ?) = ?"
        " ORDER BY skey",
        (len(folder), folder),
    )
    return [
        (sid, tuple(_split(meta) + _split(text)))
        for sid, meta, text in rows
        if _split(meta) + _split(text)
    ]


def _store(store: Path) -> MemoryManager:
    mm = MemoryManager.init(store, agent="tester")
    mm.summary_config = SummaryConfig(archive="archive")
    for n in range(8):
        mm.save_interaction(
            f"s{n}",
            f"about [[s{(n + 1) % 8}]] and [[s{(n + 3) % 8}]]" if n % 2 else f"plain {n}",
            "see [[ghost]]" if n == 4 else "ok",
            T0 + timedelta(days=n),
            metadata={"links": [f"s{(n + 5) % 8}"]} if n % 3 == 0 else None,
        )
    mm.save_interaction("s2", "myself [[s2]] and [[s1]]", "ok", T0 + timedelta(days=9))
    for n in range(3):
        mm.save_interaction("s3", f"more [[s6]] {n}", "ok", T0 + timedelta(days=10, minutes=n))
    mm.summarize("s3", count=3, offline=True)  # linking turns move to the archive part
    mm.save_interaction("s5", "now [[s0]]", "ok", T0 + timedelta(days=11))  # links change
    mm.delete_session("s7")  # its links go, links to it stay
    hand = store / session_path("by-hand")
    hand.parent.mkdir(parents=True, exist_ok=True)
    hand.write_text(
        (store / session_path("s1")).read_text().replace("# Session: s1", "# Session: by-hand")
    )
    git(store, "add", "-A")
    git(store, "commit", "-qm", "a person adds a linking session")
    return mm


def test_backlinks_and_the_graph_from_the_links_table_equal_the_row_scan(store: Path) -> None:
    mm = _store(store)
    ids = [*mm.session_ids(), "ghost", "s7", "nowhere"]
    backlinks = mm._search._store_index().run(lambda index: index.links_to(ids))
    folder = "sessions/"
    linking = mm._search._store_index().run(lambda index: index.session_links(folder))
    db = sqlite3.connect(index_path(mm.repository))
    assert backlinks == _scan_links_to(db, ids)
    assert linking == _scan_session_links(db, folder)
    assert {"s1", "s2", "by-hand"} <= set(backlinks["s2"])  # a self link is kept here
    assert "s6" in backlinks and "s3" in backlinks["s6"]  # from the archive part too
    # the lookup is the table's, not a scan of the rows
    plan = " ".join(
        str(r[-1])
        for r in db.execute(
            "EXPLAIN QUERY PLAN SELECT skey FROM links WHERE target IN ('s1', 's2')"
        )
    )
    assert "links_target" in plan
    db.close()


def test_a_rebuilt_index_holds_the_same_links(store: Path) -> None:
    mm = _store(store)
    ids = [*mm.session_ids(), "ghost"]
    before = mm._search._store_index().run(lambda index: index.links_to(ids))
    graph = mm.link_graph()
    mm.reindex()
    after = mm._search._store_index().run(lambda index: index.links_to(ids))
    with sqlite3.connect(index_path(mm.repository)) as db:
        assert after == _scan_links_to(db, ids)  # in the rebuilt rows' order
    assert {k: set(v) for k, v in after.items()} == {k: set(v) for k, v in before.items()}
    assert mm.link_graph() == graph


def test_the_graph_is_kept_until_the_index_changes(store: Path) -> None:
    mm = _store(store)
    first = mm.link_graph()
    again = mm.link_graph()  # the kept graph, as a copy the caller may change
    assert again == first and again is not first
    again.links.clear()
    assert mm.link_graph() == first
    # another process saves a link and brings the shared index up to date itself
    other = MemoryManager(store, agent="other")
    other.save_interaction("late", "see [[s0]]", "ok", T0 + timedelta(days=30))
    other.link_graph()
    assert mm.link_graph().links["late"] == ["s0"]
    mm.save_interaction("later", "see [[late]]", "ok", T0 + timedelta(days=31))
    assert mm.link_graph().links["later"] == ["late"]
