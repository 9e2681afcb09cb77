"""A huge session continues in part files beside its file: a save rewrites only the file
(the hot part), and load, search, history and listing see one session."""

from __future__ import annotations

import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from gitmem.errors import ValidationError
from gitmem.format.paths import part_of, part_path, session_path
from gitmem.manager import MemoryManager
from gitmem.models import Interaction, Message, Session
from gitmem.store.repository import Housekeeping
from tests.conftest import git

START = datetime(2024, 1, 1, tzinfo=timezone.utc)


def _huge(sid: str, count: int) -> Session:
    turns = [
        Interaction(
            id=f"t{n:05d}",
            timestamp=START + timedelta(minutes=n),
            messages=[
                Message(speaker="User", content=f"question {n} word{n}"),
                Message(speaker="Assistant", content=f"answer {n}"),
            ],
        )
        for n in range(count)
    ]
    return Session(
        id=sid,
        created=START,
        last_active=turns[-1].timestamp,
        participants=["User", "Assistant"],
        interactions=turns,
    )


def _changed(store: Path, rev: str = "HEAD") -> set[str]:
    out = git(store, "diff-tree", "-r", "--no-commit-id", "--name-only", f"{rev}~1", rev)
    return set(out.split())


@pytest.fixture
def mm(store: Path) -> MemoryManager:
    manager = MemoryManager.init(store, agent="bot", housekeeping=Housekeeping(enabled=False))
    manager._store.parts.turns_per_part = 1_000_000  # an existing huge session, made before parts
    manager.put_session(_huge("big", 120))
    manager._store.parts.turns_per_part = 25
    return manager


def test_the_first_save_splits_a_huge_session_in_one_commit(mm: MemoryManager, store: Path) -> None:
    before = git(store, "rev-list", "--count", "HEAD").strip()
    mm.save_interaction("big", "new question", "new answer")
    assert int(git(store, "rev-list", "--count", "HEAD")) == int(before) + 1
    parts = [part_path("big", n) for n in range(1, 5)]
    assert _changed(store) == {session_path("big"), *parts}
    assert [part_of(p) for p in parts] == [("big", n) for n in range(1, 5)]
    session = mm.load_memory("big")
    assert session is not None
    assert [t.id for t in session.interactions[:120]] == [f"t{n:05d}" for n in range(120)]
    assert session.interactions[-1].messages[0].content == "new question"
    assert git(store, "status", "--porcelain") == ""


def test_a_save_into_a_split_session_rewrites_only_its_file(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("big", "first", "ok")
    for n in range(3):
        mm.save_interaction("big", f"hot {n}", "ok")
        assert _changed(store) == {session_path("big")}
    mm.update_metadata("big", add_tags=["huge"])
    assert _changed(store) == {session_path("big")}
    session = mm.load_memory("big")
    assert session is not None and len(session.interactions) == 124 and "huge" in session.tags


def test_the_file_rolls_over_into_a_new_part(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("big", "first", "ok")  # 4 parts of 25, 21 turns in the file
    changed: list[set[str]] = []
    for n in range(6):
        mm.save_interaction("big", f"more {n}", "ok")
        changed.append(_changed(store))
    assert {session_path("big"), part_path("big", 5)} in changed
    session = mm.load_memory("big")
    assert session is not None and len(session.interactions) == 127
    assert len({t.id for t in session.interactions}) == 127


def test_a_split_session_reads_searches_and_lists_as_one(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("big", "first", "ok")
    mm.save_interaction("big", "second", "ok")
    listed = mm.list_sessions()
    assert [s.id for s in listed] == ["big"] and len(listed[0].interactions) == 122
    assert [len(s.interactions) for s in mm.list_sessions(commit=mm.head())] == [122]
    assert mm.session_ids() == ["big"]
    page = mm.browse_sessions()
    assert page.total == 1 and [(s.session_id, s.turns) for s in page.sessions] == [("big", 122)]
    hits = mm.search("word7", session="big")
    assert hits and {h.session_id for h in hits} == {"big"}
    assert any(h.interaction_id == "t00007" for h in hits)
    assert len(mm.history("big")) >= 3
    assert mm.check() == []
    with pytest.raises(ValidationError, match="t00003"):
        mm.save_interaction("big", "again", "ok", interaction_id="t00003")


def test_a_committed_hand_edit_of_a_part_is_read(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("big", "first", "ok")
    part = store / part_path("big", 2)
    part.write_text(part.read_text().replace("question 30 word30", "edited by hand"))
    git(store, "commit", "-qam", "edit a part")
    session = mm.load_memory("big")
    assert session is not None
    assert session.interactions[30].messages[0].content == "edited by hand"
    mm.save_interaction("big", "after the edit", "ok")
    assert _changed(store) == {session_path("big")}
    again = mm.load_memory("big")
    assert again is not None and again.interactions[30].messages[0].content == "edited by hand"


def test_deleting_a_split_session_deletes_its_parts(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("big", "first", "ok")
    mm.delete_session("big")
    assert _changed(store) == {session_path("big"), *(part_path("big", n) for n in range(1, 5))}
    assert mm.load_memory("big") is None


def test_an_import_that_changes_an_old_turn_rewrites_its_part(
    mm: MemoryManager, store: Path
) -> None:
    mm.save_interaction("big", "first", "ok")

    def change(current: Session | None) -> Session:
        assert current is not None and len(current.interactions) == 121
        turns = list(current.interactions)
        turns[3] = turns[3].model_copy(update={"messages": [Message(speaker="User", content="x")]})
        return current.model_copy(update={"interactions": turns})

    mm.change_session("big", change, op="import", subject="Fix a turn")
    assert _changed(store) == {part_path("big", 1)}
    session = mm.load_memory("big")
    assert session is not None and session.interactions[3].messages[0].content == "x"
    assert len(session.interactions) == 121


def test_purging_a_split_session_removes_its_parts_from_history(
    mm: MemoryManager, store: Path
) -> None:
    mm.save_interaction("small", "keep me", "ok")
    mm.save_interaction("big", "first", "ok")
    mm.purge(session="big")
    everything = git(store, "log", "--all", "--name-only", "--format=")
    assert "~0001" not in everything and session_path("big") not in everything
    assert "question 3 word3" not in git(store, "log", "--all", "-p")
    assert mm.load_memory("small") is not None


def test_purging_a_turn_of_a_part_removes_it_there(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("big", "first", "ok")
    mm.purge(turn="big#t00030")
    assert "word30\n" not in git(store, "log", "--all", "-p")
    session = mm.load_memory("big")
    assert session is not None and "t00030" not in {t.id for t in session.interactions}
    assert len(session.interactions) == 120


def test_diff_and_blame_see_one_session(mm: MemoryManager, store: Path) -> None:
    created = git(store, "rev-parse", "HEAD").strip()
    mm.save_interaction("big", "first", "ok")  # the split: one turn added, none moved
    split = mm.diff("big", text=False).sessions[0]
    assert len(split.interactions_added) == 1 and not split.interactions_removed
    assert not split.interactions_changed

    def change(current: Session | None) -> Session:
        assert current is not None
        turns = list(current.interactions)
        turns[3] = turns[3].model_copy(update={"messages": [Message(speaker="User", content="x")]})
        return current.model_copy(update={"interactions": turns})

    sha = mm.change_session("big", change, op="import", subject="Fix a turn")
    for found in (mm.diff("big"), mm.diff()):
        (one,) = found.sessions
        assert one.session_id == "big" and one.interactions_changed == ["t00003"]
        assert not one.interactions_added
        assert part_path("big", 1) in one.unified and "+> x" in one.unified
    blame = {b.interaction_id: b.sha for b in mm.blame("big") if b.interaction_id}
    assert blame["t00003"] == sha
    assert blame["t00050"] == created
    assert len(blame) == 121


def test_stores_that_split_a_session_apart_sync_into_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # git runs the merge driver as `python -m gitmem`: make that this checkout
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent))
    remote = tmp_path / "memory.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    a = MemoryManager.clone(remote.as_uri(), tmp_path / "a", agent="alice")
    a._store.parts.turns_per_part = 1_000_000
    a.put_session(_huge("big", 120))
    a.sync()
    b = MemoryManager.clone(remote.as_uri(), tmp_path / "b", agent="bob")
    b._store.parts.turns_per_part = 1_000_000
    a._store.parts.turns_per_part = 25
    a.save_interaction("big", "from alice", "ok", timestamp=START + timedelta(days=1))
    b.save_interaction("big", "from bob", "ok", timestamp=START + timedelta(days=2))
    a.sync()
    b.sync()
    a.sync()
    assert a.head() == b.head()
    for mm in (a, b):
        session = mm.load_memory("big")
        assert session is not None
        said = [t.messages[0].content for t in session.interactions]
        assert said[:120] == [f"question {n} word{n}" for n in range(120)]
        assert said[120:] == ["from alice", "from bob"]
    assert (tmp_path / "b" / part_path("big", 4)).exists()


def test_rollback_and_restore_bring_the_parts_back(mm: MemoryManager, store: Path) -> None:
    unsplit = git(store, "rev-parse", "HEAD").strip()
    mm.save_interaction("big", "first", "ok")
    mm.rollback("big", unsplit)
    assert _changed(store) == {session_path("big"), *(part_path("big", n) for n in range(1, 5))}
    session = mm.load_memory("big")
    assert session is not None and len(session.interactions) == 120
    mm.save_interaction("big", "again", "ok")  # splits again
    mm.delete_session("big")
    mm.restore_session("big")
    session = mm.load_memory("big")
    assert session is not None and len(session.interactions) == 121
    assert session.interactions[-1].messages[0].content == "again"


def test_an_uncommitted_hand_edit_of_a_part_is_kept(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("big", "first", "ok")
    part = store / part_path("big", 2)
    part.write_text(part.read_text().replace("question 30 word30", "edited by hand"))
    mm.save_interaction("big", "a save leaves the part alone", "ok")
    assert _changed(store) == {session_path("big")}
    assert "edited by hand" in part.read_text()

    def change(current: Session | None) -> Session:
        assert current is not None
        assert current.interactions[30].messages[0].content == "edited by hand"
        turns = list(current.interactions)
        turns[3] = turns[3].model_copy(update={"messages": [Message(speaker="User", content="x")]})
        return current.model_copy(update={"interactions": turns})

    mm.change_session("big", change, op="import", subject="Fix a turn")
    assert _changed(store) == {part_path("big", 1)}
    assert _changed(store, "HEAD~1") == {part_path("big", 2)}  # the hand edit, recorded first
    session = mm.load_memory("big")
    assert session is not None
    assert session.interactions[30].messages[0].content == "edited by hand"
    assert session.interactions[3].messages[0].content == "x"
    assert git(store, "status", "--porcelain") == ""


def test_a_new_process_refuses_a_turn_id_a_part_has(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("big", "first", "ok")
    mm.close()
    fresh = MemoryManager(store, agent="bot", housekeeping=Housekeeping(enabled=False))
    fresh._store.parts.turns_per_part = 25
    with pytest.raises(ValidationError, match="t00040"):
        fresh.save_interaction("big", "again", "ok", interaction_id="t00040")
    fresh.save_interaction("big", "new", "ok", interaction_id="t99999")
    assert _changed(store) == {session_path("big")}
    fresh.close()


def test_the_index_listing_counts_a_split_sessions_turns_once(mm: MemoryManager) -> None:
    mm.save_interaction("big", "new question", "new answer")
    mm.save_interaction("small", "hello", "hi", tags=["few"])
    infos = mm.list_session_infos()
    assert [i.id for i in infos] == [s.id for s in mm.list_sessions()]
    by_id = {i.id: i for i in infos}
    assert by_id["big"].interactions == 121 and by_id["small"].interactions == 1
    assert [i.id for i in mm.list_session_infos(tags=["few"])] == ["small"]
