"""A symlink inside the store is never followed for writing, wherever it sits."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gitmem.errors import GitmemError, InvalidSessionId, RepositoryError
from gitmem.manager import MemoryManager
from gitmem.summary.triggers import SummaryConfig
from tests.conftest import git
from tests.reliability.conftest import fsck_problems


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "victim.md").write_text("keep me\n")
    return folder


def _untouched(outside: Path) -> None:
    assert sorted(p.name for p in outside.iterdir()) == ["victim.md"]
    assert (outside / "victim.md").read_text() == "keep me\n"


def _refused(mm: MemoryManager, store: Path, write: object) -> None:
    head = mm.head()
    with pytest.raises(RepositoryError, match="symlink"):
        write()  # type: ignore[operator]
    assert mm.head() == head
    assert fsck_problems(store) == []


def test_sessions_folder_symlinked_outside(store: Path, outside: Path) -> None:
    mm = MemoryManager.init(store)
    (store / "sessions").symlink_to(outside)
    _refused(mm, store, lambda: mm.save_interaction("victim", "x", "y"))
    _refused(mm, store, lambda: mm.save_interaction("new", "x", "y"))
    _untouched(outside)


def test_session_file_symlinked_outside(store: Path, outside: Path) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "first", "ok")
    target = store / "sessions" / "a0" / "s.md"
    target.unlink()
    target.symlink_to(outside / "victim.md")
    _refused(mm, store, lambda: mm.save_interaction("s", "second", "ok"))
    _refused(mm, store, lambda: mm.delete_session("s"))
    _untouched(outside)
    problems = mm.check()  # reported, and nothing is read through the link
    assert [(p.path, p.line) for p in problems] == [("sessions/a0/s.md", 1)]
    assert "symlink" in problems[0].problem


def test_session_file_symlinked_to_another_session(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("a", "alpha", "ok")
    (store / "sessions" / "e9").mkdir()
    (store / "sessions" / "e9" / "b.md").symlink_to("../86/a.md")
    before = (store / "sessions" / "86" / "a.md").read_bytes()
    _refused(mm, store, lambda: mm.save_interaction("b", "beta", "ok"))
    assert (store / "sessions" / "86" / "a.md").read_bytes() == before


def test_archive_folder_symlinked_outside(store: Path, outside: Path) -> None:
    mm = MemoryManager.init(store)
    mm.summary_config = SummaryConfig(archive="archive", offline=True)
    for n in range(3):
        mm.save_interaction("s", f"Alice visited Paris on day {n}", "Noted.")
    (store / "archive").symlink_to(outside)
    _refused(mm, store, lambda: mm.summarize("s"))
    _untouched(outside)


def test_namespace_folder_symlinked_outside(store: Path, outside: Path) -> None:
    MemoryManager.init(store).close()
    (store / "namespaces").mkdir()
    (store / "namespaces" / "team").symlink_to(outside)
    mm = MemoryManager(store, namespace="team")
    _refused(mm, store, lambda: mm.save_interaction("s", "x", "y"))
    _untouched(outside)
    (store / "namespaces" / "team").unlink()
    (store / "namespaces").rmdir()
    (store / "namespaces").symlink_to(outside)
    _refused(mm, store, lambda: mm.save_interaction("s", "x", "y"))
    _untouched(outside)


def test_a_symlink_committed_in_history_is_not_written_through(store: Path, outside: Path) -> None:
    """A remote can carry a symlink (mode 120000); a clone checks it out as a link."""
    mm = MemoryManager.init(store)
    mm.save_interaction("plain", "x", "y")
    link = store / "sessions" / "b6" / "evil.md"
    link.parent.mkdir()
    link.symlink_to(outside / "victim.md")
    git(store, "add", "sessions/b6/evil.md")
    git(store, "commit", "-qm", "a link")
    with pytest.raises(GitmemError):
        mm.load_memory("evil")  # the link's text is not a session: ParseError
    _refused(mm, store, lambda: mm.save_interaction("evil", "x", "y"))
    _untouched(outside)


def test_a_file_where_a_folder_should_be(store: Path) -> None:
    mm = MemoryManager.init(store)
    (store / "sessions").write_text("not a folder\n")
    head = mm.head()
    with pytest.raises(RepositoryError, match="not a folder"):
        mm.save_interaction("s", "x", "y")
    assert mm.head() == head


def test_nothing_is_written_outside_the_store(store: Path, tmp_path: Path) -> None:
    before = {p for p in tmp_path.rglob("*")}
    mm = MemoryManager.init(store)
    for sid in [
        "../escape",
        "/etc/passwd",
        "..",
        ".",
        "a/../../b",
        "~",
        "$HOME",
        "\\..\\x",
        "a\\b",
        ".git",
        "sessions/../../x",
    ]:
        mm.save_interaction(sid, "x", "y")
        session = mm.load_memory(sid)
        assert session is not None and session.id == sid
    for sid in ["con", "nul"]:  # Windows device names: refused
        with pytest.raises(InvalidSessionId, match="reserved device name"):
            mm.save_interaction(sid, "x", "y")
    created = {p for p in tmp_path.rglob("*")} - before
    assert all(p == store or store in p.parents for p in created)
    assert {p.parent for p in (store / "sessions").iterdir()} == {store / "sessions"}
    assert not any(os.path.islink(p) for p in created)
    assert git(store, "status", "--porcelain") == ""
