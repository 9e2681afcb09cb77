"""A change to the memory file splices the changed facts' lines into the previous bytes
instead of rendering every fact again (the bytes are those the full render gives), and a
file in the form gitmem writes is read line by line (what the Markdown parser reads)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import gitmem.facts.methods
import gitmem.format.facts
from gitmem import MemoryManager
from gitmem.errors import ParseError
from gitmem.format.facts import (
    Fact,
    FactSource,
    MemoryFile,
    changed_run,
    parse_facts,
    render_facts,
    splice_facts,
)
from tests.conftest import git

SECTIONS = ["User", "Work", "Notes", "Food"]


def _committed(store: Path) -> bytes:
    return git(store, "cat-file", "blob", "HEAD:memory/MEMORY.md").encode("utf-8")


@pytest.mark.parametrize("seed", range(2))
def test_random_changes_write_what_the_full_render_writes(store: Path, seed: int) -> None:
    rng = random.Random(seed)
    mm = MemoryManager.init(store, agent="tester")
    mm.remember("The first fact.", section="User")
    for step in range(30):
        facts = mm.facts()
        choice = rng.random()
        if choice < 0.55 or len(facts) < 3:
            mm.remember(
                f"Fact {step} of seed {seed}.",
                section=rng.choice(SECTIONS),
                source=f"chat-{step}" if rng.random() < 0.5 else None,
            )
        elif choice < 0.8:
            mm.forget(rng.choice(facts).id)
        else:
            mm.supersede(rng.choice(facts).id, f"Fact {step} replaces another.")
        data = mm.repository.read("memory/MEMORY.md")
        assert data == render_facts(mm.memory_file()).encode("utf-8"), step
        assert data == render_facts(parse_facts(data)).encode("utf-8"), step
    assert _committed(store) == data  # what git holds, read by git


def test_a_remember_splices_instead_of_rendering_every_fact(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mm = MemoryManager.init(store, agent="tester")
    for n in range(5):
        mm.remember(f"Fact {n}.", section="User")
    rendered: list[int] = []
    render = gitmem.facts.methods.render_facts

    def counting(memory: MemoryFile, *args: object) -> str:
        rendered.append(len(memory.facts))
        return render(memory, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(gitmem.facts.methods, "render_facts", counting)
    mm.remember("One more.", section="User")
    mm.forget(mm.facts()[0].id)
    assert rendered == []
    assert _committed(store) == render(mm.memory_file()).encode("utf-8")


def _fact(n: int, section: str) -> Fact:
    return Fact(id=f"f{n:03d}", text=f"fact {n}", section=section, by="t")


def test_splice_declines_what_is_not_one_run_of_one_section() -> None:
    facts = [_fact(n, "A" if n < 3 else "B") for n in range(6)]
    before = MemoryFile().with_facts(facts)
    data = render_facts(before).encode("utf-8")
    two = before.with_facts([*facts, _fact(9, "A"), _fact(10, "B")])
    assert splice_facts(before, data, two) is None
    new_section = before.with_facts([*facts, _fact(9, "C")])
    assert splice_facts(before, data, new_section) is None
    emptied = before.with_facts(facts[3:])
    assert splice_facts(before, data, emptied) is None
    one_gone = before.with_facts(facts[1:])
    assert splice_facts(before, data, one_gone) == render_facts(one_gone).encode("utf-8")
    inserted = before.with_facts([*facts, _fact(9, "A")])
    assert changed_run(before.facts, inserted.facts) == (3, 3)
    assert splice_facts(before, data, inserted) == render_facts(inserted).encode("utf-8")


def test_a_line_a_person_repeated_in_a_note_is_rendered_in_full() -> None:
    facts = [_fact(n, "A") for n in range(3)]
    line = render_facts(MemoryFile().with_facts(facts[:1])).splitlines()[-1]
    before = MemoryFile(notes=(("A", line),)).with_facts(facts)
    data = render_facts(before).encode("utf-8")
    after = before.with_facts(facts[1:])
    assert splice_facts(before, data, after) is None


TRICKY = [
    "Plain text.",
    "Stars *and* _underscores_ and `code`.",
    "<!-- not a comment end",
    "```",
    "- - a nested bullet",
    "1. a number",
    "# not a heading",
    "A [link](http://x) and <b>html</b> &amp; more",
    "Tabs\tinside",
    "  leading space",
    "line\nbreak",
    "Ünïcödé ✓ 🎉",
    "ends with a brace }",
    "has {#braces} inside",
]


@pytest.mark.parametrize("sections", [["User"], ["Work & Life", "*Stars*", "Topic 1"]])
def test_the_line_reader_reads_what_the_markdown_parser_reads(
    sections: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    facts = [
        Fact(
            id=f"f{n:03d}",
            text=text,
            section=sections[n % len(sections)],
            sources=(FactSource(session="chat-1", interaction=f"i{n}"),) if n % 2 else (),
            by=None if n % 2 else "agent",
            tags=("a",) if n % 3 == 0 else (),
            confidence=0.5 if n % 4 == 0 else None,
        )
        for n, text in enumerate(TRICKY)
    ]
    data = render_facts(MemoryFile().with_facts(facts)).encode("utf-8")
    fast = parse_facts(data)
    monkeypatch.setattr(gitmem.format.facts, "read_fact_rows", lambda src: None)
    monkeypatch.setattr(gitmem.format.facts, "_canonical", lambda lines: None)
    slow = parse_facts(data)
    assert fast == slow
    assert [f.model_dump() for f in fast.facts] == [f.model_dump() for f in slow.facts]
    assert render_facts(fast).encode("utf-8") == data


@pytest.mark.parametrize(
    "text",
    [
        "# Memory\n\n## User\n\n- a fact {#f1 ← by hand}\ncontinued on a line\n",
        "# Memory\n\nSome intro.\n\n## User\n\n- a fact {#f1 ← by hand}\n",
        "# Memory\n\n## User\n\n- a {#f1 ← by hand}\n\n## User\n\n- b {#f2 ← by hand}\n",
        "# Memory\n\n## User\n\n- a {#f1 ← by hand · from notadate}\n",
        "# Memory\n\n## User\n\n- a {#f1 ← by hand}\n- b {#f1 ← by hand}\n",
        "# Memory\n\n## User\n\n* a {#f1 ← by hand}\n",
    ],
)
def test_a_file_not_as_gitmem_writes_it_reads_as_the_parser_reads_it(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def read() -> object:
        try:
            return parse_facts(text)
        except ParseError as exc:
            return [str(d) for d in exc.diagnostics]

    fast = read()
    monkeypatch.setattr(gitmem.format.facts, "read_fact_rows", lambda src: None)
    monkeypatch.setattr(gitmem.format.facts, "_canonical", lambda lines: None)
    assert fast == read()


HAND_WRITTEN = """# Memory

## User

- Lives in Berlin. {#fuser1 ← by hand}

## Empty

## Work

- Works at a bakery. {#fwork1 ← by hand}
"""


def test_remember_places_each_fact_where_with_facts_does(store: Path) -> None:
    mm = MemoryManager.init(store, agent="tester")
    (store / "memory").mkdir(exist_ok=True)
    (store / "memory" / "MEMORY.md").write_text(HAND_WRITTEN, encoding="utf-8")
    steps = [
        ("Bakes bread on Sundays.", "Work"),
        ("Likes green tea.", "User"),
        ("Sells cakes too.", "Work"),  # after a fact placed before it, in another section
        ("A fact under the heading that had none.", "Empty"),
        ("A fact in a section of its own.", "New"),
        ("Likes green tea.", "Work"),  # the same text elsewhere: a new fact, a new id
        ("Has a cat.", "User"),
        ("HAND", "User"),  # a person adds a line, then gitmem remembers after it
        ("Plays chess.", "User"),
    ]
    for text, section in steps:
        if text == "HAND":
            path = store / "memory" / "MEMORY.md"
            data = path.read_text(encoding="utf-8")
            path.write_text(
                data.replace("- Has a cat.", "- Walks to work. {#fhand2 ← by hand}\n- Has a cat."),
                encoding="utf-8",
            )
            continue
        before = parse_facts((store / "memory" / "MEMORY.md").read_bytes())  # (hand edits too)
        made = mm.remember(text, section=section)
        committed = parse_facts(_committed(store))
        assert committed == before.with_facts([*before.facts, made]), text
        assert mm.memory_file() == committed
        assert committed.get(made.id) == made
    assert [f.section for f in mm.memory_file().facts] == (
        ["User"] * 5 + ["Empty"] + ["Work"] * 4 + ["New"]
    )
    fresh = MemoryManager(store)
    assert fresh.memory_file() == mm.memory_file()


def test_remember_returns_the_fact_as_it_was_written(store: Path) -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    mm = MemoryManager.init(store, agent="tester")
    mm.remember("A first fact.")
    made = mm.remember(f"The deploy token is {token}.")
    assert token not in made.text
    assert made == MemoryManager(store).fact(made.id)
