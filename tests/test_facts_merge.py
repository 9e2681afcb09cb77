"""Merging the curated memory file by fact id: the rules one by one (pure), then the merge
driver, ``mm.pull`` and plain ``git pull`` of two real clones sharing a remote."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitmem import MemoryManager
from gitmem.format.factmerge import merge_memory
from gitmem.format.facts import Fact, FactSource, MemoryFile, parse_facts, render_facts
from gitmem.format.paths import is_facts_path, memory_path
from gitmem.sync.merge import merge_texts
from tests.conftest import git

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def this_gitmem(monkeypatch: pytest.MonkeyPatch) -> None:
    # git runs the merge driver as `python -m gitmem.sync.driver`: make that this checkout
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


def fact(fid: str, text: str, section: str = "User", **fields: object) -> Fact:
    return Fact(id=fid, text=text, section=section, **fields)  # type: ignore[arg-type]


def memory(*facts: Fact, **fields: object) -> MemoryFile:
    return MemoryFile(**fields).with_facts(facts)  # type: ignore[arg-type]


def texts(merged: MemoryFile) -> list[tuple[str, str]]:
    return [(f.id, f.text) for f in merged.facts]


BERLIN = fact("f1", "Lives in Berlin.")
TEA = fact("f2", "Likes green tea.", "Preferences")
BASE = memory(BERLIN, TEA)


def test_added_on_either_side_is_kept_after_its_predecessor() -> None:
    ours = memory(BERLIN, fact("fa", "Has a cat."), TEA)
    theirs = memory(
        BERLIN, fact("fb", "Speaks Dutch."), TEA, fact("fc", "Hates coffee.", "Preferences")
    )
    merged, notes = merge_memory(BASE, ours, theirs)
    assert texts(merged) == [
        ("f1", "Lives in Berlin."),
        ("fb", "Speaks Dutch."),
        ("fa", "Has a cat."),
        ("f2", "Likes green tea."),
        ("fc", "Hates coffee."),
    ]
    assert notes == []
    # the same result whichever side merges, up to the order of the new facts
    other, _ = merge_memory(BASE, theirs, ours)
    assert sorted(texts(other)) == sorted(texts(merged))


def test_removed_on_one_side_and_unchanged_on_the_other_is_removed() -> None:
    merged, notes = merge_memory(BASE, memory(TEA), BASE)
    assert texts(merged) == [("f2", "Likes green tea.")] and notes == []
    merged, _ = merge_memory(BASE, BASE, memory(BERLIN))
    assert texts(merged) == [("f1", "Lives in Berlin.")]


def test_changed_on_one_side_takes_the_change() -> None:
    moved = BERLIN.model_copy(update={"text": "Lives in Lisbon."})
    merged, notes = merge_memory(BASE, BASE, memory(moved, TEA))
    assert texts(merged)[0] == ("f1", "Lives in Lisbon.") and notes == []


def test_changed_differently_on_both_keeps_ours_and_theirs_as_a_new_fact() -> None:
    ours = memory(BERLIN.model_copy(update={"text": "Lives in Lisbon."}), TEA)
    theirs = memory(BERLIN.model_copy(update={"text": "Lives in Porto.", "tags": ("city",)}), TEA)
    merged, notes = merge_memory(BASE, ours, theirs)
    [note] = notes
    assert note.kind == "copied" and note.fact_id == "f1" and note.other == "Lives in Porto."
    assert texts(merged) == [
        ("f1", "Lives in Lisbon."),
        (note.copy, "Lives in Porto."),
        ("f2", "Likes green tea."),
    ]
    assert merged.get(note.copy) == theirs.facts[0].model_copy(update={"id": note.copy})
    assert "Lives in Porto." in note.describe() and note.copy in note.describe()
    # a deterministic id: the other clone's merge of the same histories agrees on it
    again, _ = merge_memory(BASE, ours, theirs)
    assert again == merged


def test_removed_on_one_side_but_changed_on_the_other_keeps_the_change() -> None:
    edited = BERLIN.model_copy(update={"confidence": 0.9})
    merged, notes = merge_memory(BASE, memory(TEA), memory(edited, TEA))
    assert merged.get("f1") == edited
    assert [(n.kind, n.fact_id) for n in notes] == [("kept", "f1")]
    merged, notes = merge_memory(BASE, memory(edited, TEA), memory(TEA))
    assert merged.get("f1") == edited and notes[0].kind == "kept"


def test_same_text_added_on_both_sides_is_one_fact_with_both_sources() -> None:
    ours = memory(BERLIN, TEA, fact("fx", "Has two kids.", sources=(FactSource(session="a"),)))
    theirs = memory(
        BERLIN,
        TEA,
        fact(
            "fy",
            "Has two kids.",
            tags=("family",),
            sources=(FactSource(session="b", interaction="i1"),),
        ),
        fact("fz", "Was married in 2010.", replaced_by="fy"),
    )
    merged, notes = merge_memory(BASE, ours, theirs)
    kids = merged.get("fx")
    assert kids is not None and merged.get("fy") is None
    assert [str(s) for s in kids.sources] == ["a", "b#i1"] and kids.tags == ("family",)
    assert [(n.kind, n.fact_id, n.copy) for n in notes] == [("same", "fx", "fy")]
    married = merged.get("fz")
    assert married is not None and married.replaced_by == "fx"  # no dangling reference


def test_supersede_on_one_side_and_an_edit_on_the_other_keep_both() -> None:
    ours = memory(
        BERLIN.model_copy(update={"valid_until": "2024-05-01", "replaced_by": "f9"}),
        fact("f9", "Lives in Lisbon."),
        TEA,
    )
    theirs = memory(
        BERLIN.model_copy(update={"text": "Lives in Berlin-Mitte.", "tags": ("home",)}), TEA
    )
    merged, notes = merge_memory(BASE, ours, theirs)
    assert notes == []
    old = merged.get("f1")
    assert old is not None
    assert (old.text, old.valid_until, old.replaced_by, old.tags) == (
        "Lives in Berlin-Mitte.",
        "2024-05-01",
        "f9",
        ("home",),
    )
    assert [f.id for f in merged.facts] == ["f1", "f9", "f2"]


def test_a_field_changed_differently_on_both_keeps_ours_with_a_note() -> None:
    ours = memory(BERLIN.model_copy(update={"confidence": 0.9}), TEA)
    theirs = memory(BERLIN.model_copy(update={"confidence": 0.4}), TEA)
    merged, notes = merge_memory(BASE, ours, theirs)
    assert merged.get("f1") == ours.facts[0]
    [note] = notes
    assert (note.kind, note.fact_id, note.field, note.kept, note.other) == (
        "conflict",
        "f1",
        "confidence",
        "0.9",
        "0.4",
    )


def test_tags_and_sources_merge_as_sets() -> None:
    base = memory(BERLIN.model_copy(update={"tags": ("a", "b")}))
    ours = memory(BERLIN.model_copy(update={"tags": ("a", "c")}))  # removed b, added c
    theirs = memory(BERLIN.model_copy(update={"tags": ("a", "b", "d")}))
    merged, notes = merge_memory(base, ours, theirs)
    assert merged.facts[0].tags == ("a", "c", "d") and notes == []


def test_the_same_id_added_on_both_sides_with_different_texts_keeps_both() -> None:
    merged, notes = merge_memory(None, memory(fact("p", "Ours.")), memory(fact("p", "Theirs.")))
    assert [f.text for f in merged.facts] == ["Ours.", "Theirs."]
    assert notes[0].kind == "copied"


def test_intro_notes_and_sections_merge_like_text() -> None:
    base = memory(BERLIN, intro="Kept by the agent.", notes=(("User", "About the user."),))
    ours = memory(
        BERLIN,
        fact("w", "Works at ACME.", "Work"),
        intro="Kept by the agent.",
        notes=(("User", "About the user."),),
    )
    theirs = memory(
        BERLIN,
        intro="Curated weekly.",
        notes=(("User", "Who they are."),),
        sections=("Travel", "User"),
    )
    merged, notes = merge_memory(base, ours, theirs)
    assert merged.intro == "Curated weekly." and dict(merged.notes)["User"] == "Who they are."
    assert merged.sections == ("Travel", "User", "Work") and notes == []
    both = memory(BERLIN, intro="Ours.")  # and the note of User removed
    merged, notes = merge_memory(base, both, theirs)
    assert merged.intro == "Ours." and [(n.kind, n.field, n.other) for n in notes] == [
        ("conflict", "intro", "Curated weekly.")
    ]
    assert dict(merged.notes)["User"] == "Who they are."  # removed here, rewritten there


def test_the_merged_file_round_trips() -> None:
    ours = memory(BERLIN.model_copy(update={"text": "Lives in Lisbon."}), TEA)
    theirs = memory(
        BERLIN.model_copy(update={"text": "Lives in Porto."}),
        TEA,
        fact("n", "Plays chess.", "Hobbies"),
    )
    merged, _ = merge_memory(BASE, ours, theirs)
    assert parse_facts(render_facts(merged)) == merged


def test_memory_paths() -> None:
    assert memory_path() == "memory/MEMORY.md"
    assert memory_path("team a") == "namespaces/team%20a/memory/MEMORY.md"
    for path in ("memory/MEMORY.md", "memory/USER.md", "namespaces/x/memory/MEMORY.md"):
        assert is_facts_path(path), path
    for path in (
        "sessions/ab/memory.md",
        "memory/x/MEMORY.md",
        "memory/.md",
        "README.md",
        "namespaces/x/sessions/memory.md",
        "memory/MEMORY.txt",
    ):
        assert not is_facts_path(path), path


def test_merge_texts_dispatches_memory_files() -> None:
    ours = memory(BERLIN, fact("fa", "Has a cat."), TEA)
    theirs = memory(BERLIN, TEA, fact("fb", "Drinks oolong.", "Preferences"))
    data, notes = merge_texts(
        render_facts(BASE).encode(),
        render_facts(ours).encode(),
        render_facts(theirs).encode(),
        "namespaces/n/memory/MEMORY.md",
    )
    assert [f.id for f in parse_facts(data).facts] == ["f1", "fa", "f2", "fb"] and notes == []
    # a conflict is reported as a merge note naming the file and the fact
    changed = memory(BERLIN.model_copy(update={"confidence": 0.5}), TEA)
    other = memory(BERLIN.model_copy(update={"confidence": 0.7}), TEA)
    _, notes = merge_texts(
        None, render_facts(changed).encode(), render_facts(other).encode(), "memory/MEMORY.md"
    )
    assert [(n.session_id, n.kind, n.key) for n in notes] == [
        ("memory/MEMORY.md", "conflict", "fact f1 confidence")
    ]
    assert notes[0].describe().startswith("fact f1 confidence changed")


# --- two real clones sharing one remote -------------------------------------------------


def bare(folder: Path) -> str:
    path = folder / "memory.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(path)], check=True)
    return path.as_uri()


def pair(tmp_path: Path) -> tuple[MemoryManager, MemoryManager]:
    url = bare(tmp_path)
    a = MemoryManager.clone(url, tmp_path / "a", agent="alice")
    a.remember("Lives in Berlin.", section="User", fact_id="home")
    a.sync()
    b = MemoryManager.clone(url, tmp_path / "b", agent="bob")
    return a, b


def assert_clean(store: Path) -> None:
    assert git(store, "status", "--porcelain") == ""
    text = (store / "memory" / "MEMORY.md").read_text()
    assert "<<<<<<<" not in text and ">>>>>>>" not in text


def test_two_clones_remember_different_facts_and_pull_merges_them(tmp_path: Path) -> None:
    a, b = pair(tmp_path)
    with a, b:
        a.remember("Has a cat named Miso.", section="User", source=("s1", "i1"))
        a.update_fact("home", confidence=0.9)
        a.sync()
        b.remember("Prefers green tea.", section="Preferences", source=("s2", "i4"))
        b.remember("Has a cat named Miso.", section="User", source=("s3", None))
        b.update_fact("home", tags=["city"])
        result = b.pull()
        assert result.action == "merge" and "memory/MEMORY.md" in result.files
        facts = {f.text: f for f in b.facts()}
        assert set(facts) == {"Lives in Berlin.", "Has a cat named Miso.", "Prefers green tea."}
        home = b.fact("home")
        assert (home.confidence, home.tags) == (0.9, ("city",))
        cat = facts["Has a cat named Miso."]  # remembered on both sides: one fact, two sources
        assert sorted(str(s) for s in cat.sources) == ["s1#i1", "s3"]
        assert_clean(b.path)
        log = git(b.path, "log", "-1", "--format=%B")
        assert "Gitmem-Op: merge" in log and "Gitmem-Session: MEMORY" not in log
        b.sync()
        a.pull()
        assert a.memory_file() == b.memory_file()


def test_plain_git_pull_merges_the_memory_file_by_fact_id(tmp_path: Path) -> None:
    a, b = pair(tmp_path)
    with a, b:
        a.remember("Speaks Dutch.", section="User")
        a.update_fact("home", "Lives in Lisbon.")
        a.push()
        b.remember("Plays chess on Sundays.", section="Hobbies")
        b.update_fact("home", "Lives in Porto.")
        root = b.path
    pulled = subprocess.run(
        ["git", "pull", "--no-rebase", "--no-edit", "origin", "main"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert pulled.returncode == 0, pulled.stderr
    assert "fact home was changed differently on both sides" in pulled.stderr
    assert_clean(root)
    merged = parse_facts((root / "memory" / "MEMORY.md").read_bytes())
    assert {f.text for f in merged.facts} == {
        "Lives in Porto.",
        "Lives in Lisbon.",
        "Speaks Dutch.",
        "Plays chess on Sundays.",
    }
    assert merged.get("home") is not None and merged.get("home").text == "Lives in Porto."  # type: ignore[union-attr]


def test_stores_made_before_facts_merge_the_memory_file_by_fact_id(tmp_path: Path) -> None:
    store = tmp_path / "old"
    MemoryManager(store, init=True).close()
    attributes = store / ".gitattributes"
    attributes.write_text(
        "".join(
            line + "\n"
            for line in attributes.read_text().splitlines()
            if not line.startswith("memory/")
        )
    )
    git(store, "commit", "-qam", "the attributes of a store made before facts")
    (store / ".git" / "info" / "attributes").unlink()
    assert "unspecified" in git(store, "check-attr", "merge", "--", "memory/MEMORY.md")
    MemoryManager(store).close()  # opening wires it locally, as it does the driver
    assert git(store, "check-attr", "merge", "--", "memory/MEMORY.md").endswith(": gitmem\n")
    assert git(store, "check-attr", "merge", "--", "sessions/ab/s.md").endswith(": gitmem\n")
    fresh = tmp_path / "new"
    MemoryManager(fresh, init=True).close()
    assert "memory/*.md merge=gitmem" in (fresh / ".gitattributes").read_text()


def test_the_pre_commit_hook_validates_memory_files(tmp_path: Path) -> None:
    with MemoryManager(tmp_path / "s", init=True) as mm:
        for path in ("memory/MEMORY.md", "namespaces/team/memory/MEMORY.md"):
            target = mm.path / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("# Memory\n\n## User\n\n- Fine. {#ok ← by hand}\n")
            git(mm.path, "add", path)
            assert mm.run_hook("pre-commit") == []
            target.write_text("# Memory\n\n## User\n\n- Broken. {#bad id}\n")
            git(mm.path, "add", path)
            [problem] = mm.run_hook("pre-commit")
            assert (problem.path, problem.line) == (path, 5) and "#id" in problem.problem
            git(mm.path, "rm", "-q", "--cached", path)
            target.unlink()


# --- properties over random versions -------------------------------------------------------

IDS = st.sampled_from(["a", "b", "c", "d", "e"])
FACT = st.builds(
    lambda fid, text, section, tags, confidence: Fact(
        id=fid, text=text, section=section, tags=tags, confidence=confidence
    ),
    IDS,
    st.sampled_from(["Lives in Berlin.", "Likes tea.", "Has a cat.", "Speaks Dutch."]),
    st.sampled_from(["User", "Preferences"]),
    st.lists(st.sampled_from(["x", "y"]), max_size=2, unique=True).map(tuple),
    st.one_of(st.none(), st.sampled_from([0.5, 0.9])),
)
VERSION = st.lists(FACT, max_size=5, unique_by=lambda f: f.id).map(lambda fs: memory(*fs))


@settings(max_examples=300, deadline=None)
@given(VERSION, VERSION)
def test_a_side_that_changed_nothing_gives_the_other_side(
    base: MemoryFile, ours: MemoryFile
) -> None:
    assert merge_memory(base, ours, base) == (ours, [])
    merged, notes = merge_memory(base, base, ours)
    assert sorted(merged.facts, key=lambda f: f.id) == sorted(ours.facts, key=lambda f: f.id)
    assert notes == []


@settings(max_examples=300, deadline=None)
@given(VERSION, VERSION, VERSION)
def test_no_change_of_either_side_is_lost(
    base: MemoryFile, ours: MemoryFile, theirs: MemoryFile
) -> None:
    merged, notes = merge_memory(base, ours, theirs)
    assert parse_facts(render_facts(merged)) == merged
    texts_now = {f.text for f in merged.facts}
    for side in (ours, theirs):
        for item in side.facts:
            was = base.get(item.id)
            if was is None or was.text != item.text:  # an added fact, a new text: kept
                assert item.text in texts_now, (item, notes)
    assert len({f.id for f in merged.facts}) == len(merged.facts)


@settings(max_examples=300, deadline=None)
@given(VERSION, VERSION, VERSION)
def test_without_notes_the_sides_are_interchangeable(
    base: MemoryFile, ours: MemoryFile, theirs: MemoryFile
) -> None:
    one, notes = merge_memory(base, ours, theirs)
    other, other_notes = merge_memory(base, theirs, ours)
    if not notes and not other_notes:  # the same facts; sets merged keep each side's order
        assert {f.id: unordered(f) for f in one.facts} == {f.id: unordered(f) for f in other.facts}


def unordered(item: Fact) -> Fact:
    return item.model_copy(
        update={"tags": tuple(sorted(item.tags)), "sources": tuple(sorted(item.sources, key=str))}
    )


def test_sync_reports_a_fact_changed_on_both_sides_in_the_merge_commit(tmp_path: Path) -> None:
    a, b = pair(tmp_path)
    with a, b:
        a.update_fact("home", "Lives in Lisbon.")
        a.sync()
        b.update_fact("home", "Lives in Porto.")
        result = b.sync()
        [note] = result.notes
        assert (note.session_id, note.kind, note.key) == ("memory/MEMORY.md", "copied", "fact home")
        message = git(b.path, "log", "-1", "--format=%B")
        assert "memory/MEMORY.md: fact home was changed differently on both sides" in message
        assert "1 memory file(s) by fact id" in message and "Gitmem-Conflicts: 1" in message
        assert sorted(f.text for f in b.facts()) == ["Lives in Lisbon.", "Lives in Porto."]
        a.sync()
        assert a.memory_file() == b.memory_file()
