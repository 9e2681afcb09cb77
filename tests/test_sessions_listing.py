"""``list_sessions`` reads the search index's session rows and parses only the files it
returns: the same sessions, in the same order, as reading every file of the tree."""

from __future__ import annotations

import gc
import marshal
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import gitmem.core
from gitmem import MemoryManager
from gitmem.format.paths import session_path
from gitmem.models import Session, SessionInfo
from gitmem.search.indexfile import IndexFile
from gitmem.summary.triggers import SummaryConfig
from tests.conftest import git

START = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)

FILTERS: list[dict[str, Any]] = [
    {},
    {"tags": ["b"]},
    {"tags": ["a", "b"], "project": "beta"},
    {"participant": "Carol"},
    {"participant": "carol"},  # the index's match ignores case; list_sessions does not
    {"since": "2026-01-08", "until": "2026-01-12"},
    {"since": START + timedelta(days=10)},  # exactly one session's last activity
    {"until": START + timedelta(days=3, hours=1)},
    {"metadata": {"mood": "calm"}},
    {"tags": ["hand"]},
    {"project": "nope"},
]


def _store(store: Path, namespace: str | None = None) -> MemoryManager:
    """Twelve sessions with tags, projects, a third speaker in some, one archived part,
    a hand-committed file, a broken one, and an uncommitted hand edit."""
    mm = MemoryManager.init(store, agent="tester", namespace=namespace)
    mm.summary_config = SummaryConfig(archive="archive")
    for n in range(12):
        at = START + timedelta(days=n)
        mm.save_interaction(
            f"s{n:02d}",
            f"question {n}",
            f"answer {n}",
            at,
            tags=["a"] + (["b"] if n % 3 == 0 else []),
            metadata={"project": "alpha" if n % 2 else "beta", "mood": "calm" if n < 5 else "x"},
        )
        if n % 4 == 0:
            mm.save_messages(
                f"s{n:02d}", [{"speaker": "Carol", "content": "me too"}], at + timedelta(hours=1)
            )
    for n in range(3):
        mm.save_interaction("s01", f"more {n}", "ok", START + timedelta(days=1, minutes=n + 1))
    mm.summarize("s01", count=3, offline=True)  # turns move to the archive part
    text = (store / session_path("s03", namespace)).read_text()
    added = store / session_path("by-hand", namespace)
    added.parent.mkdir(parents=True, exist_ok=True)
    added.write_text(
        text.replace("s03", "by-hand")
        .replace("2026-01-08", "2027-05-01")
        .replace("**Tags**: a", "**Tags**: hand")
    )
    broken = store / session_path("s05", namespace)
    broken.write_text("not a session file\n")
    git(store, "add", "-A")
    git(store, "commit", "-qm", "a person adds a session and breaks another")
    edited = store / session_path("s07", namespace)
    edited.write_text(edited.read_text().replace("answer 7", "answer seven"))  # not committed
    return mm


def _listed(mm: MemoryManager, filters: dict[str, Any], *, index: bool) -> list[Session]:
    store = mm._store
    listing = store.listing
    store.listing = listing if index else None
    try:
        return mm.list_sessions(**filters)
    finally:
        store.listing = listing


@pytest.mark.parametrize("namespace", [None, "team"])
def test_the_index_lists_what_every_file_lists(store: Path, namespace: str | None) -> None:
    mm = _store(store, namespace)
    assert mm._store.listing is not None
    for filters in FILTERS:
        from_files = _listed(mm, filters, index=False)
        mm._store._sessions.clear()
        from_index = _listed(mm, filters, index=True)
        assert from_index == from_files, filters
    assert [s.id for s in mm.list_sessions(tags=["hand"])] == ["by-hand"]
    everything = [s.id for s in mm.list_sessions()]
    assert everything[0] == "by-hand" and "s05" not in everything and len(everything) == 12


def test_a_listing_parses_only_the_files_it_returns(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mm = _store(store)
    mm.search("question")  # the index is built
    mm._store._sessions.clear()
    parsed: list[str] = []
    parse = gitmem.core.parse_bytes

    def counting(data: bytes, path: str) -> Session:
        parsed.append(path)
        return parse(data, path)

    monkeypatch.setattr(gitmem.core, "parse_bytes", counting)
    found = mm.list_sessions(tags=["b"])
    assert [s.id for s in found] == ["by-hand", "s09", "s06", "s03", "s00"]
    assert sorted(parsed) == sorted(session_path(s.id) for s in found)


def test_a_listing_of_a_past_commit_reads_its_tree(store: Path) -> None:
    mm = _store(store)
    old = mm.head()
    mm.delete_session("s02")
    assert "s02" not in [s.id for s in mm.list_sessions()]
    assert "s02" in [s.id for s in mm.list_sessions(commit=old)]


def _infos(mm: MemoryManager, filters: dict[str, Any], *, index: bool) -> list[SessionInfo]:
    store = mm._store
    listing = store.listing
    store.listing = listing if index else None
    try:
        return mm.list_session_infos(**filters)
    finally:
        store.listing = listing


@pytest.mark.parametrize("namespace", [None, "team"])
def test_session_infos_from_the_index_equal_those_of_every_parsed_file(
    store: Path, namespace: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    mm = _store(store, namespace)
    mm.save_interaction(  # a title and links (s01 has a summary)
        "s04",
        "q",
        "a",
        START + timedelta(days=4, hours=2),
        metadata={"title": "Fourth", "links": ["s02"]},
    )
    for filters in FILTERS:
        parsed = [SessionInfo.of(s) for s in _listed(mm, filters, index=False)]
        assert _infos(mm, filters, index=False) == parsed, filters
        mm._store._sessions.clear()
        assert _infos(mm, filters, index=True) == parsed, filters
    # the dates keep the offset they were written with, not only the instant
    every = mm.list_session_infos()
    assert [(i.created.isoformat(), i.last_active.isoformat()) for i in every] == [
        (s.created.isoformat(), s.last_active.isoformat()) for s in mm.list_sessions()
    ]
    assert {i.id: i.summary is not None for i in every}["s01"]
    assert {i.id: i.title for i in every}["s04"] == "Fourth"
    # no file is parsed for the index's listing
    monkeypatch.setattr(gitmem.core, "parse_bytes", lambda data, path: pytest.fail(path))
    mm._store._sessions.clear()
    assert mm.list_session_infos() == every


def test_session_infos_catch_up_with_commits_the_index_has_not_seen(store: Path) -> None:
    mm = _store(store)
    assert len(mm.list_session_infos()) == 12  # the index is built
    # a person's commit behind the index's back: a new file, a changed one, a removed one
    text = (store / session_path("s02")).read_text()
    (store / session_path("s02")).write_text(text.replace("**Tags**: a", "**Tags**: a, late"))
    (store / session_path("s08")).unlink()
    other = MemoryManager(store, agent="other")
    other.save_interaction("fresh", "new", "yes", START + timedelta(days=40), tags=["late"])
    git(store, "add", "-A")
    git(store, "commit", "-qm", "a person retags s02 and drops s08")
    from_files = [SessionInfo.of(s) for s in _listed(mm, {}, index=False)]
    assert mm.list_session_infos() == from_files
    assert [i.id for i in mm.list_session_infos(tags=["late"])] == ["fresh", "s02"]
    assert "s08" not in [i.id for i in from_files]
    # another process saves and brings the shared index up to date itself
    assert "fresher" not in [i.id for i in mm.list_session_infos()]
    other.save_interaction("fresher", "newer", "yes", START + timedelta(days=41))
    other.search("newer")
    assert "fresher" in [i.id for i in mm.list_session_infos()]


def test_a_past_commit_lists_infos_from_its_tree(store: Path) -> None:
    mm = _store(store)
    old = mm.head()
    mm.delete_session("s02")
    assert "s02" in [i.id for i in mm.list_session_infos(commit=old)]
    assert "s02" not in [i.id for i in mm.list_session_infos()]


def test_session_infos_in_a_new_process_equal_those_of_every_parsed_file(store: Path) -> None:
    mm = _store(store)
    mm.search("question")  # the index is built, then read by a store opened afresh
    mm.close()
    fresh = MemoryManager(store)
    from_files = [SessionInfo.of(s) for s in _listed(fresh, {}, index=False)]
    assert fresh.list_session_infos() == from_files
    assert gc.isenabled()  # paused while the listings were built, and only then
    assert [i.id for i in fresh.list_session_infos(tags=["b"])] == [
        i.id for i in from_files if "b" in i.tags
    ]
    # one save later, the listings kept by content and the changed one read again
    fresh.save_interaction("s03", "later", "yes", START + timedelta(days=600))
    from_files = [SessionInfo.of(s) for s in _listed(fresh, {}, index=False)]
    assert fresh.list_session_infos() == from_files
    assert fresh.list_session_infos()[0].id == "s03"


def test_session_infos_after_a_pull_list_the_sessions_it_brought(tmp_path: Path) -> None:
    url = tmp_path / "memory.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(url))
    a = MemoryManager.clone(url.as_uri(), tmp_path / "a", agent="alice")
    a.save_interaction("mine", "q", "a", START)
    a.sync()
    b = MemoryManager.clone(url.as_uri(), tmp_path / "b", agent="bob")
    assert [i.id for i in b.list_session_infos()] == ["mine"]
    a.save_interaction("theirs", "q", "a", START + timedelta(days=1), tags=["far"])
    a.save_interaction("mine", "more", "ok", START + timedelta(days=2))
    a.sync()
    b.pull()
    infos = b.list_session_infos()
    assert infos == [SessionInfo.of(s) for s in _listed(b, {}, index=False)]
    assert [(i.id, i.interactions) for i in infos] == [("mine", 2), ("theirs", 1)]
    assert [i.id for i in b.list_session_infos(tags=["far"])] == ["theirs"]


def _kept(store: Path) -> tuple[str, bytes] | None:
    db = sqlite3.connect(store / ".git" / "gitmem" / "index.sqlite")
    try:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name='kept'").fetchall():
            return None
        row = db.execute("SELECT stamp, data FROM kept WHERE name LIKE 'listing:%'").fetchone()
    finally:
        db.close()
    return None if row is None else (str(row[0]), bytes(row[1]))


def _put_kept(store: Path, stamp: str, data: bytes) -> None:
    db = sqlite3.connect(store / ".git" / "gitmem" / "index.sqlite", isolation_level=None)
    try:
        db.execute("UPDATE kept SET stamp=?, data=? WHERE name LIKE 'listing:%'", (stamp, data))
    finally:
        db.close()


def _listing_of_a_new_process(store: Path) -> list[SessionInfo]:
    fresh = MemoryManager(store)
    try:
        return fresh.list_session_infos()
    finally:
        fresh.close()


def test_a_new_process_reads_the_listing_the_last_one_kept_until_a_write(store: Path) -> None:
    mm = _store(store)
    mm.search("question")
    mm.close()
    from_files = [SessionInfo.of(s) for s in _listed(MemoryManager(store), {}, index=False)]
    assert _kept(store) is None
    assert _listing_of_a_new_process(store) == from_files
    kept = _kept(store)
    assert kept is not None
    # the next process reads the kept value, not the rows: a planted title shows
    rows, parts = marshal.loads(kept[1])
    rows[0] = (*rows[0][:9], '{"title": "planted"}', *rows[0][10:])  # its extra
    _put_kept(store, kept[0], marshal.dumps((rows, parts)))
    assert _listing_of_a_new_process(store)[0].title == "planted"
    assert _listing_of_a_new_process(store)[1:] == from_files[1:]
    # a save voids it: the rows are read again, and kept anew
    other = MemoryManager(store, agent="other")
    other.save_interaction("s09", "late", "yes", START + timedelta(days=600))
    other.close()
    from_files = [SessionInfo.of(s) for s in _listed(MemoryManager(store), {}, index=False)]
    listing = _listing_of_a_new_process(store)
    assert listing == from_files
    assert listing[0].id == "s09" and "planted" not in [i.title for i in listing]
    assert _kept(store) not in (None, kept)
    assert _listing_of_a_new_process(store) == from_files


def test_a_kept_listing_is_void_after_a_catch_up_that_counts_no_write(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mm = _store(store)
    mm.close()
    assert len(_listing_of_a_new_process(store)) == 12
    # a gitmem that does not count its writes (an older one) catches the index up
    monkeypatch.setattr(IndexFile, "count_write", lambda self: None)
    other = MemoryManager(store, agent="other")
    other.save_interaction("newer", "q", "a", START + timedelta(days=600))
    other.search("q")
    other.close()
    monkeypatch.undo()
    assert [i.id for i in _listing_of_a_new_process(store)][:1] == ["newer"]


def test_a_damaged_kept_listing_is_read_from_the_rows(store: Path) -> None:
    mm = _store(store)
    mm.close()
    every = _listing_of_a_new_process(store)
    kept = _kept(store)
    assert kept is not None
    for damage in (b"\x00garbage", marshal.dumps(([("blob", "x")], {})), marshal.dumps((1, []))):
        _put_kept(store, kept[0], damage)
        assert _listing_of_a_new_process(store) == every


def test_keeping_does_not_wait_for_another_writer(tmp_path: Path) -> None:
    file = IndexFile(tmp_path / "index.sqlite")
    other = sqlite3.connect(tmp_path / "index.sqlite", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    assert not file.keep("listing:x", "1", b"data")  # at once, not after the busy timeout
    other.execute("ROLLBACK")
    other.close()
    assert file.db.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000
    assert file.kept("listing:x") is None
    assert file.keep("listing:x", "1", b"data")
    assert file.kept("listing:x") == ("1", b"data")
    file.close()
