"""The line merge of memory files in gitmem's form (gitmem/format/factlines.py) against the
full parse, fact merge and render: byte for byte the same file wherever it answers, and no
answer (the full path) for anything it cannot vouch for."""

from __future__ import annotations

import gc
import os
import random
import shlex
import subprocess
from pathlib import Path

import pytest

import gitmem.format.facts
from gitmem import MemoryManager
from gitmem.errors import ParseError
from gitmem.format.factlines import merge_fact_lines, read_fact_lines
from gitmem.format.factmerge import merge_memory
from gitmem.format.facts import Fact, FactSource, MemoryFile, fact_line, parse_facts, render_facts
from gitmem.sync.merge import merge_fact_texts, merge_texts
from tests.conftest import git

ROOT = Path(__file__).resolve().parent.parent
WORDS = ["tea", "Berlin", "cat", "{#x}", "a·b", "←", "50%", "über", "x, y", "#tag", "é", "}"]
SESSIONS = ["chat-1", "s2", "日本", "by", "hand"]
ODD_SESSIONS = ["a b", "x%y", "t#1", "c,d"]  # written %-escaped


def _rare(rng: random.Random) -> bool:
    return rng.random() < 0.002


def _text(rng: random.Random) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
    if text.startswith("{#") and not _rare(rng):
        text = "x " + text  # (a text starting "{#" is the Markdown parser's)
    if _rare(rng):
        return text + "\tand a tab"
    if _rare(rng):
        return text + "\nsecond line"
    if _rare(rng):
        return " " + text
    return text


def _fact(rng: random.Random, fid: str, section: str) -> Fact:
    fields: dict[str, object] = {}
    kind = rng.random()
    if kind < 0.4:
        fields["sources"] = tuple(
            FactSource(
                session=rng.choice(ODD_SESSIONS if _rare(rng) else SESSIONS),
                interaction=rng.choice([None, "i1", "t 2" if _rare(rng) else "i2"]),
            )
            for _ in range(rng.randint(1, 2))
        )
    elif kind < 0.7:
        fields["by"] = rng.choice(["hand", "an agent"]) if _rare(rng) else rng.choice(["a", "b"])
    if _rare(rng):
        fields["tags"] = ("drinks",)
    if _rare(rng):
        fields["confidence"] = 0.8
    return Fact(id=fid, text=_text(rng), section=section, **fields)  # type: ignore[arg-type]


def _edit(rng: random.Random, memory: MemoryFile, side: str) -> MemoryFile:
    facts = list(memory.facts)
    sections = [*memory.sections, "Work", "Notes"]
    for n in range(rng.randint(0, 4)):
        what = rng.random()
        if what < 0.35 or not facts:
            new = _fact(rng, f"{side}{n}", rng.choice(sections))
            if rng.random() < 0.15 and facts:  # the same text both sides may add
                new = new.model_copy(update={"text": "Added on both sides."})
            facts.insert(rng.randint(0, len(facts)), new)
        elif what < 0.55:
            facts.pop(rng.randrange(len(facts)))
        elif what < 0.8:
            at = rng.randrange(len(facts))
            facts[at] = facts[at].model_copy(update={"text": f"{facts[at].text} ({side})"})
        elif what < 0.9:
            at = rng.randrange(len(facts))
            facts[at] = facts[at].model_copy(update={"section": rng.choice(sections)})
        else:
            at = rng.randrange(len(facts))
            facts[at] = facts[at].model_copy(update={"sources": (), "by": side})
    return memory.with_facts(facts)


def _full(base: bytes | None, ours: bytes, theirs: bytes) -> tuple[bytes, list[object]]:
    merged, notes = merge_memory(
        parse_facts(base) if base else None, parse_facts(ours), parse_facts(theirs)
    )
    return render_facts(merged).encode(), list(notes)


def _hand_edit(rng: random.Random, data: bytes) -> bytes:
    """What a person's editor may do to a file that still parses."""
    text = data.decode()
    edits = [
        lambda t: t.replace("\n## ", "\n\n## ", 1),
        lambda t: t.replace("\n", "\r\n"),
        lambda t: t.rstrip("\n"),
        lambda t: t.replace("\n- ", "\n* ", 1),
        lambda t: t.replace("\n- ", "\n-  ", 1),
        lambda t: t.replace("}\n", "} \n", 1),
        lambda t: t.replace("# Memory\n", "# Memory\n\nSome prose.\n", 1),
        lambda t: t.replace("# Memory\n", "\ufeff# Memory\n", 1),
        lambda t: t.replace("\n- ", "\n- **bold** ", 1),
        lambda t: t + "\nA note at the end.\n",
        lambda t: t.replace(" ← ", " ←  ", 1),
        lambda t: t.replace(", ", ",", 1),
        lambda t: t + "- Lives in Berlin.\n",
        lambda t: t.replace("\n## ", "\n##  ", 1),
    ]
    return rng.choice(edits)(text).encode()


@pytest.mark.parametrize("seed", range(12))
def test_the_line_merge_gives_the_full_merges_bytes_or_declines(seed: int) -> None:
    rng = random.Random(seed)
    answered = declined = 0
    for _ in range(60):
        start = [_fact(rng, f"f{n}", rng.choice(["User", "Prefs"])) for n in range(20)]
        base = MemoryFile().with_facts(start)
        ours, theirs = _edit(rng, base, "o"), _edit(rng, base, "t")
        versions = [render_facts(m).encode() for m in (base, ours, theirs)]
        if rng.random() < 0.25:  # a hand-edited version: still parses, maybe not our form
            at = rng.randrange(3)
            versions[at] = _hand_edit(rng, versions[at])
        if rng.random() < 0.1:
            versions[0] = b""  # both sides created the file
        base_data = versions[0] or None
        fast = merge_fact_lines(base_data, versions[1], versions[2])
        try:
            full, notes = _full(base_data, versions[1], versions[2])
        except ParseError:  # a version the parser refuses
            assert fast is None
            declined += 1
            continue
        if fast is None:
            declined += 1
            continue
        answered += 1
        assert fast == full
        assert notes == []
        # the driver's entry and merge_texts take it, with no notes either
        assert merge_texts(base_data, versions[1], versions[2], "memory/MEMORY.md") == (full, [])
    assert answered > 10 and declined > 5  # both paths were exercised


def test_merge_texts_falls_back_to_the_full_merge_with_its_notes() -> None:
    base = MemoryFile().with_facts([Fact(id="f1", text="Likes tea.", section="User", by="a")])
    ours = base.with_facts([Fact(id="f1", text="Likes green tea.", section="User", by="a")])
    theirs = base.with_facts([Fact(id="f1", text="Likes black tea.", section="User", by="a")])
    data = [render_facts(m).encode() for m in (base, ours, theirs)]
    assert merge_fact_lines(*data) is None  # changed on both sides: a copy and a note
    merged, notes = merge_texts(*data, "memory/MEMORY.md")
    assert (merged, notes) == merge_fact_texts(*data, "memory/MEMORY.md")
    assert [n.kind for n in notes] == ["copied"]


@pytest.mark.parametrize(
    "line",
    [
        "- Likes tea. {#f1 ← by hand}",
        "- Likes tea. {#f1 ← chat-1#i3, s2}",
        "- Likes tea. {#f1 ← by bench}",
        "- Likes {#x ← by a} tea. {#f1 ← s}",
        "- 日本語 ← · {#f1 ← 日本}",
        "- Likes tea. {#f1 ← by, s2}",
    ],
)
def test_a_line_read_is_the_line_the_fact_renders_to(line: str) -> None:
    data = f"# Memory\n\n## User\n\n{line}\n".encode()
    read = read_fact_lines(data)
    assert read is not None
    (fact,) = parse_facts(data).facts
    assert [(f.id, f.section, f.text, f.line) for f in read.facts] == [
        (fact.id, fact.section, fact.text, fact_line(fact))
    ]


@pytest.mark.parametrize(
    "line",
    [
        "- Likes tea. {#f1 ← by hand · #drinks}",  # attributes: the parser checks them
        "- Likes tea. {#f1 ← by hand · confidence 0.80}",
        "- Likes\\u{0A}tea. {#f1 ← by hand · escaped}",
        "- Likes tea. {#f1 ← chat-1,s2}",  # renders as "chat-1, s2"
        "- Likes tea. {#f1 ← s#}",  # renders as "s"
        "- Likes tea. {#f1 ← by %68and}",
        "- Likes tea. {#f1 ← a%20b}",
        "- Likes tea. {#f1}",  # renders "← by hand"
        "- Likes tea.  {#f1 ← by hand}",
        "- Likes\ttea. {#f1 ← by hand}",
        "- {#x ← by a} {#f1 ← by hand}",  # the Markdown parser's to read
        "- Likes tea. {#" + "f" * 65 + " ← by hand}",
        "- Likes tea.",
        "* Likes tea. {#f1 ← by hand}",
        "Some prose.",
    ],
)
def test_a_line_not_in_the_strict_form_is_left_to_the_parser(line: str) -> None:
    assert read_fact_lines(f"# Memory\n\n## User\n\n{line}\n".encode()) is None


def test_a_file_the_parser_refuses_or_not_as_written_is_declined() -> None:
    twice = "# Memory\n\n## User\n\n- A. {#f1 ← by hand}\n- B. {#f1 ← by hand}\n"
    section_twice = "# Memory\n\n## User\n\n## User\n"
    for text in (twice, section_twice, "# Memory\n\n## User \n", "# Memory\n\n## User\n\n"):
        assert read_fact_lines(text.encode()) is None
    assert read_fact_lines(b"\xff") is None


def test_the_driver_merges_a_memory_file_in_our_form_without_the_models(tmp_path: Path) -> None:
    store = tmp_path / "store"
    MemoryManager.init(store).close()
    facts = [Fact(id=f"f{n}", text=f"Fact {n}.", section="User", by="a") for n in range(5)]
    base = MemoryFile().with_facts(facts)
    ours = base.with_facts([*facts, Fact(id="fo", text="Ours.", section="User", by="a")])
    theirs = base.with_facts([Fact(id="ft", text="Theirs.", section="Work", by="b"), *facts])
    paths = {}
    for key, memory in (("O", base), ("A", ours), ("B", theirs)):
        paths[key] = tmp_path / key
        paths[key].write_text(render_facts(memory))
    expected = merge_fact_texts(*(paths[k].read_bytes() for k in "OAB"), "memory/MEMORY.md")[0]
    command = git(store, "config", "merge.gitmem.driver").strip()
    for key in "OAB":
        command = command.replace(f"%{key}", shlex.quote(str(paths[key])))
    done = subprocess.run(
        ["sh", "-c", command.replace("%P", "memory/MEMORY.md")],
        cwd=store,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONPROFILEIMPORTTIME": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert paths["A"].read_bytes() == expected
    loaded = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines()}
    assert "gitmem.format.factlines" in loaded  # the probe saw the imports
    assert not {"pydantic", "gitmem.models", "gitmem.format.facts", "mistune"} & loaded


@pytest.mark.parametrize("seed", range(6))
def test_a_file_in_the_strict_form_parses_to_what_the_line_reader_makes(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    datas = []
    for _ in range(40):
        memory = MemoryFile().with_facts(
            _fact(rng, f"f{n}", rng.choice(["User", "Prefs", "Work"])) for n in range(15)
        )
        data = render_facts(memory).encode()
        datas.append(_hand_edit(rng, data) if rng.random() < 0.3 else data)
    strict = sum(read_fact_lines(data) is not None for data in datas)
    assert 10 < strict < len(datas)  # both readers ran

    def read(data: bytes) -> object:
        try:
            memory = parse_facts(data)
        except ParseError as exc:
            return [str(d) for d in exc.diagnostics]
        facts = [(f.model_dump(), f.model_fields_set, repr(f)) for f in memory.facts]
        sources = [s.model_fields_set for f in memory.facts for s in f.sources]
        return memory, memory.model_fields_set, facts, sources

    fast = [read(data) for data in datas]
    monkeypatch.setattr(gitmem.format.facts, "read_fact_rows", lambda src: None)
    assert fast == [read(data) for data in datas]


def test_a_large_file_is_read_with_the_collector_paused_and_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = "".join(f"- Fact number {n}. {{#f{n:07x} ← by t}}\n" for n in range(3000))
    text = f"# Memory\n\n## Notes\n\n{lines}"
    seen: list[bool] = []
    read = gitmem.format.facts._MemoryReader.read

    def watching(
        reader: gitmem.format.facts._MemoryReader, src: str
    ) -> gitmem.format.facts.MemoryFile:
        seen.append(gc.isenabled())
        return read(reader, src)

    monkeypatch.setattr(gitmem.format.facts._MemoryReader, "read", watching)
    assert gc.isenabled()
    assert len(gitmem.format.facts.parse_facts(text).facts) == 3000
    assert len(
        gitmem.format.facts.parse_facts("# Memory\n\n## Notes\n\n- One. {#f1 ← by t}\n").facts
    )
    assert seen == [False, True]  # paused for the large file only
    assert gc.isenabled()
    gc.disable()
    try:  # a program that turned it off keeps it off
        gitmem.format.facts.parse_facts(text)
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(ParseError):  # restored when the read fails too
        gitmem.format.facts.parse_facts(text + "- x {#f1 ← by t · bogus}\n")
    assert gc.isenabled()
