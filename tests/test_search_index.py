"""The derived index: catch-up from git, rebuilds, corruption, foreign files."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gitmem import MemoryManager
from gitmem.search.catchup import StoreIndex, catch_up, index_path
from gitmem.search.index import SearchIndex
from tests.conftest import git


@pytest.fixture
def mm(store: Path) -> MemoryManager:
    return MemoryManager.init(store, agent="tester")


def _ids(hits: list[object]) -> list[str]:
    return [h.session_id for h in hits]  # type: ignore[attr-defined]


def test_index_lives_under_the_git_dir_and_is_never_tracked(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("s", "the lighthouse keeper", "kept the light")
    assert _ids(mm.search("lighthouse")) == ["s"]
    path = store / ".git" / "gitmem" / "index.sqlite"
    assert path.is_file()
    assert git(store, "status", "--porcelain") == ""
    assert "index.sqlite" not in git(store, "ls-files")


def test_catch_up_after_saves_by_another_manager(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("a", "first topic: violins", "ok")
    assert _ids(mm.search("violins")) == ["a"]
    other = MemoryManager(store, agent="other")
    other.save_interaction("b", "second topic: trombones", "ok")
    other.save_interaction("a", "more about violins and bows", "ok")
    report = mm._search._store_index().catch_up()
    assert not report.rebuilt and report.indexed == 2
    assert _ids(mm.search("trombones")) == ["b"]
    assert {h.interaction_id for h in mm.search("violins")} == {
        i.id for i in (mm.load_memory("a") or pytest.fail()).interactions
    }


def test_catch_up_after_a_save_by_another_process(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("a", "the harbour at dawn", "ok")
    assert _ids(mm.search("harbour")) == ["a"]
    code = (
        "import sys; from gitmem import MemoryManager; "
        "MemoryManager(sys.argv[1]).save_interaction('p', 'submarine periscope', 'ok')"
    )
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-c", code, str(store)], check=True, cwd=root)
    assert _ids(mm.search("periscope")) == ["p"]


def test_catch_up_after_a_hand_commit_with_git(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("notes", "we discussed the red bicycle", "nice")
    mm.save_interaction("gone", "a session about marmalade", "sweet")
    assert _ids(mm.search("bicycle")) == ["notes"]
    path = store / "sessions" / "3a" / "notes.md"
    path.write_text(path.read_text().replace("red bicycle", "blue tandem"))
    git(store, "rm", "-q", "sessions/a6/gone.md")
    git(store, "commit", "-qam", "hand edit")
    assert list(mm.search("bicycle")) == []
    assert _ids(mm.search("tandem")) == ["notes"]
    assert list(mm.search("marmalade")) == []


def test_unreadable_file_is_skipped_not_fatal(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("good", "penguins in the snow", "cold")
    (store / "sessions" / "19").mkdir()
    (store / "sessions" / "19" / "bad.md").write_bytes(b"\xff\xfe not a session")
    git(store, "add", "sessions/19/bad.md")
    git(store, "commit", "-qm", "broken file")
    assert _ids(mm.search("penguins")) == ["good"]
    report = mm.reindex()
    assert report.unreadable == ["sessions/19/bad.md"] and report.indexed == 1


def test_corrupted_index_is_rebuilt_and_never_breaks_a_save(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("s", "the orchard has apricots", "tasty")
    assert _ids(mm.search("apricots")) == ["s"]
    mm.close_index()
    path = index_path(mm.repository)
    path.write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    # a save does not touch the index
    mm.save_interaction("t", "plums in the orchard", "ok")
    fresh = MemoryManager(store)
    assert set(_ids(fresh.search("orchard"))) == {"s", "t"}
    # and a manager that had the file open recovers too
    path.write_bytes(b"\x00" * 4096)
    assert set(_ids(mm.search("orchard"))) == {"s", "t"}


def test_index_from_another_repository_is_replaced(tmp_path: Path) -> None:
    one = MemoryManager.init(tmp_path / "one")
    one.save_interaction("x", "only in store one: kangaroos", "ok")
    assert _ids(one.search("kangaroos")) == ["x"]
    one.close_index()
    two = MemoryManager.init(tmp_path / "two")
    two.save_interaction("y", "only in store two: koalas", "ok")
    shutil.copy(index_path(one.repository), index_path(two.repository))
    assert list(two.search("kangaroos")) == []
    assert _ids(two.search("koalas")) == ["y"]


def test_index_for_a_foreign_commit_is_rebuilt(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("s", "meteor showers in august", "ok")
    index = SearchIndex(index_path(mm.repository))
    index.set_meta("commit", "0" * 40)  # a commit this repository does not have
    index.close()
    fresh = MemoryManager(store)
    assert fresh._search._store_index().catch_up().rebuilt
    assert _ids(fresh.search("meteor")) == ["s"]


def test_reindex_reports_progress(mm: MemoryManager) -> None:
    for n in range(5):
        mm.save_interaction(f"s{n}", f"topic number {n} about gardening", "ok")
    seen: list[tuple[int, int]] = []
    report = mm.reindex(lambda done, total: seen.append((done, total)))
    assert report.rebuilt and report.indexed == 5
    assert seen[-1] == (5, 5)


def test_incremental_sync_matches_a_rebuild(mm: MemoryManager, store: Path) -> None:
    for n in range(6):
        mm.save_interaction(f"s{n % 3}", f"alpha beta {n}", f"gamma {n}")
        mm.search("alpha")
    mm.delete_session("s1")
    mm.save_interaction("s2", "alpha delta", "epsilon")
    incremental = [(h.session_id, h.interaction_id, h.score) for h in mm.search("alpha", k=50)]
    fresh = SearchIndex(":memory:")
    catch_up(fresh, mm.repository)
    rebuilt = StoreIndex(mm.repository)
    rebuilt.reindex()
    again = [(h.session_id, h.interaction_id, h.score) for h in mm.search("alpha", k=50)]
    assert incremental == again
    assert fresh.stats() == rebuilt.run(lambda index: index.stats())


def test_namespaces_have_their_own_index(store: Path) -> None:
    MemoryManager.init(store)
    work = MemoryManager(store, namespace="work")
    home = MemoryManager(store, namespace="home")
    work.save_interaction("w", "quarterly report", "ok")
    home.save_interaction("h", "quarterly garden plan", "ok")
    assert _ids(work.search("quarterly")) == ["w"]
    assert _ids(home.search("quarterly")) == ["h"]


def test_only_a_damaged_file_is_thrown_away() -> None:
    import sqlite3

    from gitmem.errors import IndexCorrupted
    from gitmem.search.indexfile import damaged

    assert damaged(sqlite3.DatabaseError("file is not a database"))
    assert damaged(IndexCorrupted("layout 1"))
    # a locked, read-only or full index is somebody else's problem: never delete it
    assert not damaged(sqlite3.OperationalError("database is locked"))
    assert not damaged(sqlite3.OperationalError("attempt to write a readonly database"))


def test_turns_moved_to_the_archive_stay_searchable(
    mm: MemoryManager, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitmem.summary.triggers import SummaryConfig

    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    mm.summary_config = SummaryConfig(archive="archive")
    mm.save_interaction("trip", "We should visit the azulejo museum in Lisbon", "Good idea")
    mm.save_interaction("trip", "Book the tram 28 tickets too", "Done")
    mm.save_interaction("trip", "And a fado evening on Friday", "Booked")
    first = mm.load_memory("trip")
    assert first is not None
    mm.search("tram")  # the index reflects the session before it is summarized
    mm.summarize("trip", count=2)
    assert (store / "archive" / "fd" / "trip.md").is_file()
    hits = mm.search("azulejo museum")
    assert [(h.session_id, h.interaction_id) for h in hits][:1] == [
        ("trip", first.interactions[0].id)
    ]
    assert _ids(mm.search("fado evening"))[0] == "trip"
    mm.reindex()
    assert _ids(mm.search("azulejo museum"))[0] == "trip"


def test_a_view_of_the_past_searches_as_of_then(mm: MemoryManager) -> None:
    first = mm.save_interaction("s", "we planted cherry trees", "ok")
    mm.save_interaction("s", "the cherry trees now bear fruit", "ok")
    past = mm.at(first)
    assert len(past.search("cherry")) == 1
    assert len(mm.search("cherry")) == 2
    messages = past.retrieve_context("other", "cherry trees", max_tokens=300)
    assert "bear fruit" not in messages[-1]["content"]
    assert "planted" in messages[-1]["content"]
