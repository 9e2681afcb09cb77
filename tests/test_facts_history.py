"""The curated memory file in history: a revert undoes exactly the facts a commit changed
(keeping facts added after it), conflicts name the fact, and the memory reads as of a
commit or a date (``mm.at(rev).facts()``, ``mm.facts(as_of=...)``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gitmem import MemoryManager
from gitmem.errors import ConflictError
from gitmem.format.facts import Fact, MemoryFile, render_facts
from tests.conftest import git

T0 = datetime(2024, 4, 15, 12, 0, tzinfo=UTC)


@pytest.fixture
def mm(store: Path) -> Iterator[MemoryManager]:
    with MemoryManager(store, init=True, agent="tester") as manager:
        yield manager


def consolidate(mm: MemoryManager, add: list[str], drop: list[str], prefix: str = "c") -> str:
    """One commit that adds facts and removes others, as a consolidation does."""

    def change(memory: MemoryFile) -> MemoryFile:
        kept = [f for f in memory.facts if f.id not in drop]
        new = [
            Fact(id=f"{prefix}{n}", text=text, section="User", by="dreamer")
            for n, text in enumerate(add)
        ]
        return memory.with_facts([*kept, *new])

    sha = mm.change_facts(change, op="consolidate", subject="Consolidate")
    assert sha is not None
    return sha


def ids(mm: MemoryManager) -> list[str]:
    return [f.id for f in mm.facts(include_past=True)]


def test_revert_of_a_consolidation_keeps_the_facts_added_after_it(mm: MemoryManager) -> None:
    mm.remember("Lives in Berlin.", section="User", fact_id="home")
    mm.remember("Likes tea.", section="User", fact_id="tea")
    bad = consolidate(mm, ["A.", "B.", "C."], ["tea"])
    later = mm.remember("Has a cat.", section="User", source=("s9", "i1"))
    mm.update_fact("home", confidence=0.8)  # a later change to a fact the revert leaves alone
    sha = mm.revert(bad)
    assert sha is not None
    assert ids(mm) == ["home", "tea", later.id]
    assert mm.fact("home").confidence == 0.8
    message = git(mm.path, "log", "-1", "--format=%B")
    assert f"Gitmem-Reverts: {bad}" in message
    assert "Gitmem-Fact: tea, c0, c1, c2" in message
    assert git(mm.path, "status", "--porcelain") == ""
    assert mm.revert(bad) is None  # undone already


def test_revert_undoes_an_edit_field_by_field(mm: MemoryManager) -> None:
    mm.remember("Lives in Berlin.", section="User", fact_id="home")
    edit = mm.change_facts(
        lambda m: m.with_facts(f.model_copy(update={"text": "Lives in Bonn."}) for f in m.facts),
        op="update-fact",
        subject="Edit",
    )
    assert edit is not None
    mm.update_fact("home", tags=["city"])  # another field, changed later
    mm.revert(edit)
    home = mm.fact("home")
    assert (home.text, home.tags) == ("Lives in Berlin.", ("city",))


def test_revert_of_a_supersede_brings_the_old_fact_back(mm: MemoryManager) -> None:
    mm.remember("Lives in Berlin.", section="User", fact_id="home")
    new = mm.supersede("home", "Lives in Lisbon.", when="2024-05-01")
    sha = mm.history(op="supersede")[0].sha
    later = mm.remember("Works from home.", section="User")
    mm.revert(sha)
    assert ids(mm) == ["home", later.id] and mm.fact("home").current()
    assert new.id not in ids(mm)


def test_revert_of_a_fact_changed_again_later_is_a_conflict(mm: MemoryManager) -> None:
    mm.remember("Lives in Berlin.", section="User", fact_id="home")
    bad = consolidate(mm, ["Works at ACME."], [])
    mm.update_fact("c0", "Works at ACME since 2020.")
    head = git(mm.path, "rev-parse", "HEAD")
    with pytest.raises(ConflictError) as caught:
        mm.revert(bad)
    message = str(caught.value)
    assert "memory/MEMORY.md" in message and "fact 'c0' was changed by a later commit" in message
    assert "nothing was written" in message and "gitmem facts edit" in message
    assert git(mm.path, "rev-parse", "HEAD") == head
    # the same text changed again on both: a conflict too, naming the fact
    edit = mm.change_facts(
        lambda m: m.with_facts(
            f.model_copy(update={"text": "Lives in Bonn."}) if f.id == "home" else f
            for f in m.facts
        ),
        op="update-fact",
        subject="Edit",
    )
    assert edit is not None
    mm.update_fact("home", "Lives in Köln.")
    with pytest.raises(ConflictError, match="fact 'home' was changed again"):
        mm.revert(edit)
    mm.forget("c0", "wrong")
    with pytest.raises(ConflictError, match="fact 'c0' was deleted by a later commit"):
        mm.revert(mm.history(op="update-fact")[-1].sha)


def test_revert_where_undoes_a_consolidating_agent(mm: MemoryManager) -> None:
    mm.remember("Lives in Berlin.", section="User", fact_id="home")
    consolidate(mm, ["X."], ["home"])
    consolidate(mm, ["Y."], [], prefix="d")
    kept = mm.remember("Z.", section="User")
    dry = mm.revert_where(op="consolidate")
    assert dry.dry_run and len(dry.reverted) == 2 and ids(mm) == ["c0", "d0", kept.id]
    [facts] = dry.facts  # what the undo would do, by fact id
    assert (facts.added, facts.removed, facts.changed) == (["home"], ["c0", "d0"], [])
    assert "-- X. {#c0" in facts.unified
    done = mm.revert_where(op="consolidate", dry_run=False)
    assert done.commit is not None and ids(mm) == ["home", kept.id]


def test_revert_records_a_hand_edit_of_the_memory_file_first(mm: MemoryManager) -> None:
    mm.remember("Lives in Berlin.", section="User", fact_id="home")
    bad = consolidate(mm, ["Q."], [])
    path = mm.path / "memory" / "MEMORY.md"
    path.write_text(path.read_text() + "- Written by a person.\n")
    mm.revert(bad)
    assert [f.text for f in mm.facts()] == ["Lives in Berlin.", "Written by a person."]
    subjects = git(mm.path, "log", "-2", "--format=%s").splitlines()
    assert subjects == ['Revert "Consolidate"', "Record hand edit of memory/MEMORY.md"]
    broken = "# Memory\n\n- Broken. {#bad id}\n"
    path.write_text(broken)
    with pytest.raises(ConflictError, match=r"MEMORY\.md:3: fact braces"):
        mm.revert(mm.history(op="remember")[0].sha)
    assert path.read_text() == broken  # never written over


def test_diff_and_history_describe_fact_changes(mm: MemoryManager) -> None:
    mm.remember("Lives in Berlin.", section="User", fact_id="home")
    mm.remember("Likes tea.", section="User", fact_id="tea")
    sha = consolidate(mm, ["A."], ["tea"])
    mm.update_fact("home", "Lives in Bonn.")
    diff = mm.diff(None, b=sha)
    [facts] = diff.facts
    assert (facts.path, facts.added, facts.removed, facts.changed) == (
        "memory/MEMORY.md",
        ["c0"],
        ["tea"],
        [],
    )
    assert "+- A. {#c0" in facts.unified
    latest = mm.diff()
    assert latest.facts[0].changed == ["home"] and latest.files == ["memory/MEMORY.md"]
    revisions = mm.history(changes=True, limit=4)
    assert revisions[0].changes == {"memory/MEMORY.md": ["changed fact home"]}
    assert revisions[1].changes == {"memory/MEMORY.md": ["added fact c0", "removed fact tea"]}
    assert revisions[1].op == "consolidate"


# --- time travel ------------------------------------------------------------------------


def write_at(mm: MemoryManager, memory: MemoryFile, when: datetime) -> str:
    """Commit a version of the memory file with a chosen commit time."""
    with mm.repository.transaction() as txn:
        txn.write(mm.facts_path, render_facts(memory).encode())
        sha = txn.commit("Facts", when=when, trailers={"Gitmem-Op": "remember"})
    assert sha
    return sha


def test_time_travel_reads_the_facts_as_they_were(mm: MemoryManager) -> None:
    home = Fact(id="home", text="Lives in Berlin.", section="User")
    tea = Fact(id="tea", text="Likes tea.", section="User", valid_from="2024-04-01")
    first = write_at(mm, MemoryFile().with_facts([home, tea]), T0)
    moved = Fact(id="lis", text="Lives in Lisbon.", section="User", valid_from="2024-04-16")
    trip = Fact(
        id="trip", text="Is in Rome.", section="User", valid_until="2024-04-20T10:00:00+00:00"
    )
    ended = home.model_copy(update={"valid_until": "2024-04-16", "replaced_by": "lis"})
    write_at(mm, MemoryFile().with_facts([ended, tea, moved, trip]), T0 + timedelta(days=2))
    assert [f.id for f in mm.at(first).facts()] == ["home", "tea"]
    assert [f.id for f in mm.at("HEAD~1").facts()] == ["home", "tea"]
    assert [f.id for f in mm.facts(as_of=T0 + timedelta(hours=1))] == ["home", "tea"]
    assert [f.id for f in mm.facts(as_of="2024-04-18")] == ["tea", "lis", "trip"]
    assert [f.id for f in mm.facts(as_of="2024-04-20T09:00:00+00:00")] == ["tea", "lis", "trip"]
    assert [f.id for f in mm.facts(as_of="2024-04-20T11:00:00+00:00")] == ["tea", "lis"]
    assert [f.id for f in mm.facts()] == ["tea", "lis"]  # no moment: any end date is past
    assert mm.at(first).fact("home") == home
    assert [f.id for f in mm.at(first).facts(query="Berlin")] == ["home"]


def test_time_travel_compares_moments_in_utc(
    mm: MemoryManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        trip = Fact(
            id="trip", text="Is in Rome.", section="User", valid_until="2024-04-20T10:00:00+00:00"
        )
        write_at(mm, MemoryFile().with_facts([trip]), T0)
        assert [f.id for f in mm.facts(as_of="2024-04-20T09:30:00+00:00")] == ["trip"]
        assert mm.facts(as_of="2024-04-20T10:30:00+00:00") == []
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
