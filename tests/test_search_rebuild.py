"""Rebuilding the derived index: a crash half-way, layout versions, term ids shared by
processes, and blobs streamed through one git process."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem import MemoryManager
from gitmem.cli import cli
from gitmem.models import Interaction, Message, Session
from gitmem.search import catchup
from gitmem.search.catchup import index_path
from gitmem.search.index import SearchIndex
from gitmem.search.indexfile import SCHEMA_VERSION
from gitmem.store.repository import Repository
from tests.conftest import git

ROOT = Path(__file__).resolve().parent.parent


def _session(sid: str, *texts: str) -> Session:
    when = datetime(2024, 4, 15, tzinfo=UTC)
    turns = [
        Interaction(id=f"t{n}", timestamp=when, messages=[Message(speaker="user", content=text)])
        for n, text in enumerate(texts)
    ]
    return Session(
        id=sid, created=when, last_active=when, participants=["user"], interactions=turns
    )


def _ids(hits: object) -> set[str]:
    return {h.session_id for h in hits}  # type: ignore[attr-defined]


def _path_of(store: Path, session_id: str) -> str:
    """The committed file of a session, wherever the layout puts it."""
    names = git(store, "ls-files", "sessions").split()
    return next(name for name in names if name.endswith(f"/{session_id}.md"))


def test_a_rebuild_killed_half_way_leaves_the_last_good_index(tmp_path: Path) -> None:
    store = tmp_path / "memory"
    mm = MemoryManager.init(store)
    with mm.batch("many sessions"):
        for n in range(catchup.STREAM_FROM + 16):  # enough to stream the blobs
            mm.put_session(_session(f"s{n}", f"note {n} about the lighthouse", "tides"))
    assert len(_ids(mm.search("lighthouse", k=200))) == catchup.STREAM_FROM + 16
    indexed = mm.repository.head()
    mm.save_interaction("late", "the zeppelin arrived", "ok")  # not indexed yet
    mm.close_index()
    code = (
        "import os, signal, sys\n"
        "from gitmem import MemoryManager\n"
        "def progress(done, total):\n"
        "    if done == total // 2:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "MemoryManager(sys.argv[1]).reindex(progress)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(store)], cwd=ROOT, check=False)
    assert done.returncode == -signal.SIGKILL
    # the half-written rebuild is gone: the file is the index as it was, whole and usable
    db = sqlite3.connect(index_path(mm.repository))
    assert db.execute("PRAGMA quick_check").fetchone() == ("ok",)
    assert db.execute("SELECT value FROM meta WHERE key='commit'").fetchone() == (indexed,)
    assert db.execute("SELECT name FROM sqlite_master WHERE name='docs_session'").fetchone()
    db.close()
    fresh = MemoryManager(store)
    report = fresh._search._store_index().catch_up()
    assert not report.rebuilt and report.indexed == 1  # caught up, not rebuilt
    assert _ids(fresh.search("zeppelin")) == {"late"}
    assert len(_ids(fresh.search("lighthouse", k=200))) == catchup.STREAM_FROM + 16


def test_an_index_of_an_older_layout_is_rebuilt(tmp_path: Path) -> None:
    store = tmp_path / "memory"
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "a walrus on the ice", "ok")
    assert _ids(mm.search("walrus")) == {"s"}
    mm.close_index()
    db = sqlite3.connect(index_path(mm.repository))
    db.execute("UPDATE meta SET value='4' WHERE key='schema'")
    db.execute("INSERT INTO meta VALUES('left-over', 'from layout 4')")
    db.commit()
    db.close()
    fresh = MemoryManager(store)
    assert _ids(fresh.search("walrus")) == {"s"}
    index = SearchIndex(index_path(mm.repository))
    assert index.get_meta("schema") == SCHEMA_VERSION
    assert index.get_meta("left-over") is None  # a new file, not the old one patched
    index.close()


def test_terms_another_process_added_are_read_and_rolled_back_ids_are_forgotten(
    tmp_path: Path,
) -> None:
    path = tmp_path / "index.sqlite"
    one, two = SearchIndex(path), SearchIndex(path)
    with one.writing():
        one.put_session(_session("a", "apples and pears"), "a.md", "b1")
    assert [d.terms for d in one.session_docs(one.session_keys())] == ["appl pear"]
    with two.writing():  # new terms, new ids: `one` has never seen them
        two.put_session(_session("b", "quinces"), "b.md", "b2")
    assert sorted(d.terms for d in one.session_docs(one.session_keys())) == ["appl pear", "quinc"]
    with pytest.raises(RuntimeError), one.writing():
        one.put_session(_session("c", "zucchini"), "c.md", "b3")
        raise RuntimeError("the catch-up failed half-way")
    with two.writing():  # takes the id `one` gave to "zucchini" before rolling back
        two.put_session(_session("d", "radishes"), "d.md", "b4")
    assert sorted(d.terms for d in one.session_docs(one.session_keys())) == [
        "appl pear",
        "quinc",
        "radish",
    ]
    assert one.df(["zucchini", "radish"]) == {"radish": 1}
    one.close()
    two.close()


def test_a_rebuild_keeps_term_ids_and_drops_unused_terms_from_the_vocabulary(
    tmp_path: Path,
) -> None:
    index = SearchIndex(tmp_path / "index.sqlite")
    with index.writing():
        index.put_session(_session("a", "violins"), "a.md", "b1")
    with index.writing(bulk=True):
        index.clear()
        index.put_session(_session("a", "cellos"), "a.md", "b2")
    assert index.vocabulary() == ["cello"]
    assert index.df(["violin", "cello"]) == {"cello": 1}
    assert [d.terms for d in index.session_docs(index.session_keys())] == ["cello"]
    index.close()


def test_blobs_stream_in_order_and_a_missing_one_is_none(tmp_path: Path) -> None:
    store = tmp_path / "memory"
    mm = MemoryManager.init(store)
    mm.save_interaction("a", "first", "ok")
    mm.save_interaction("b", "second", "ok")
    repo = Repository(store)
    blobs = [git(store, "rev-parse", f"HEAD:{_path_of(store, sid)}").strip() for sid in ("b", "a")]
    missing = "0123456789abcdef0123456789abcdef01234567"
    got = list(repo.stream_blobs([blobs[0], missing, blobs[1]]))
    assert [sha for sha, _data in got] == [blobs[0], missing, blobs[1]]
    assert b"second" in (got[0][1] or b"") and got[1][1] is None
    assert b"first" in (got[2][1] or b"")
    assert list(repo.stream_blobs([])) == []
    repo.close()


def test_a_streamed_rebuild_skips_an_unreadable_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(catchup, "STREAM_FROM", 1)
    store = tmp_path / "memory"
    mm = MemoryManager.init(store)
    mm.save_interaction("good", "penguins in the snow", "cold")
    mm.save_interaction("bad", "this file will be garbled", "ok")
    bad = _path_of(store, "bad")
    (store / bad).write_bytes(b"\xff\xfe not a session")
    git(store, "commit", "-qam", "broken file")
    report = mm.reindex()
    assert report.unreadable == [bad] and report.indexed == 1
    assert _ids(mm.search("penguins")) == {"good"}


def test_search_and_context_answer_when_the_index_cannot_be_written(tmp_path: Path) -> None:
    store = tmp_path / "memory"
    mm = MemoryManager.init(store)
    mm.save_interaction("trip", "We booked the night train to Vienna.", "Enjoy Vienna!")
    mm.close()
    state = store / ".git" / "gitmem"
    for found in state.glob("index*.sqlite*"):
        found.unlink()
    # a folder where the index file goes: opening it fails as on a read-only store or a
    # full disk (tests run as root, for whom file modes do not)
    (state / "index.sqlite").mkdir()
    fresh = MemoryManager(store)
    hits = fresh.search("night train", k=3)
    assert [h.session_id for h in hits] == ["trip"]
    assert any("answered from the files" in note for note in hits.notes)
    messages = fresh.retrieve_context("trip", "Vienna train", max_tokens=500)
    assert any("Vienna" in m["content"] for m in messages)
    out = CliRunner().invoke(cli, ["--repo", str(store), "search", "night train"])
    assert out.exit_code == 0 and "trip" in out.output, out.output
    out = CliRunner().invoke(cli, ["--repo", str(store), "context", "trip", "Vienna"])
    assert out.exit_code == 0 and "Vienna" in out.output, out.output
    assert git(store, "status", "--porcelain") == ""
