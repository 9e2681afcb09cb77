"""The memory file format (``memory/MEMORY.md``): render -> parse is the identity for hostile
content, hand-written files read as a person means them, and every problem names path:line.

``GITMEM_HYPOTHESIS_EXAMPLES`` (default 2000) scales the number of examples, as for sessions.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from gitmem.errors import ParseError
from gitmem.format.factlines import BY_HAND, section_problem
from gitmem.format.facts import (
    Fact,
    FactSource,
    MemoryFile,
    _strict_fact,
    _trusted_fact,
    as_moment,
    derived_id,
    parse_facts,
    render_facts,
)

EXAMPLES = int(os.environ.get("GITMEM_HYPOTHESIS_EXAMPLES", "2000"))
SETTINGS = settings(
    max_examples=max(EXAMPLES // 4, 100),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
SMALL = settings(
    max_examples=max(EXAMPLES // 10, 50),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Pieces of text that look like the file's own structure or are hard on a Markdown parser.
NASTY = [
    "",
    " ",
    "  ",
    "\t",
    "\n",
    "\r\n",
    "\r",
    "\x00",
    "\x1b[31m",
    "\x7f",
    "\u2028",
    "\u0085",
    "\ufeff",
    "\\",
    "\\\\",
    "\\u{41}",
    "\\u{zz}",
    "<!--",
    "-->",
    "<!-- x -->",
    "```",
    "```python",
    "~~~",
    "- - -",
    "***",
    "---",
    "===",
    "# Memory",
    "## User",
    "### x",
    "- item",
    "* item",
    "1. one",
    "2) two",
    "> quote",
    "{#x}",
    " {#x}",
    "{#f1 ← s1#i1}",
    " {#f1 ← by hand}",
    "{#",
    "}",
    "←",
    "·",
    " · ",
    "%",
    "%2",
    "%ZZ",
    "%20",
    "#",
    "#tag",
    ",",
    "by hand",
    "by x",
    "escaped",
    "until 2024-01-01",
    "[link](x)",
    "**bold**",
    "<div>",
    "|a|b|",
    "    code",
    "ü",
    "中文",
    "🙂",
]
TEXT = (
    st.lists(st.one_of(st.sampled_from(NASTY), st.text(max_size=12)), min_size=1, max_size=6)
    .map("".join)
    .filter(bool)
)
LABEL = st.one_of(
    st.sampled_from(
        [
            "a b",
            "x#y",
            "50%",
            "a,b",
            "hand",
            "by hand",
            "{#z}",
            "· ←",
            " lead",
            "trail ",
            "\n",
            "%41",
        ]
    ),
    st.text(min_size=1, max_size=10),
)
ID = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEF0123456789_-.", min_size=1, max_size=12)
DATE = st.one_of(
    st.dates().map(lambda d: d.isoformat()),
    st.datetimes().map(lambda d: d.isoformat()),
    st.sampled_from(["2024-05-01T10:00:00+02:00", "2024-05-01T00:00:00Z"]),
)
SECTION = st.one_of(
    st.sampled_from(
        [
            "User",
            "Preferences",
            "Projects",
            "Notes",
            "中文 section",
            "a {#b}",
            "x · y ← z",
            "Tea & coffee",
            "50% done",
            "C#",
        ]
    ),
    st.text(min_size=1, max_size=12),
).filter(lambda s: section_problem(s) is None)
NOTE = st.sampled_from(
    [
        "A paragraph a person wrote.",
        "Two lines\nof prose.",
        "> a quote",
        "```\n- not a fact\n```",
        "<!-- a comment -->",
        "Para one.\n\nPara two.",
        "| a | b |\n|---|---|\n| 1 | 2 |",
    ]
)


# Whole strategies built once: one made inside a composite would be made and validated again
# for every fact drawn, for the same data.
SOURCES = st.lists(
    st.builds(FactSource, session=LABEL, interaction=st.one_of(st.none(), LABEL)), max_size=3
)
MAYBE_LABEL = st.one_of(st.none(), LABEL)
MAYBE_DATE = st.one_of(st.none(), DATE)
CONFIDENCE = st.one_of(st.none(), st.floats(0, 1))
FACT_TAGS = st.lists(LABEL, max_size=3)
MAYBE_ID = st.one_of(st.none(), ID)
SECTION_LISTS = st.lists(SECTION, min_size=1, max_size=4, unique=True)
TITLE = st.sampled_from(["Memory", "What I know", "记忆"])
INTRO = st.one_of(st.just(""), NOTE)


@st.composite
def facts_of(draw: st.DrawFn, sections: list[str]) -> Fact:
    sources = draw(SOURCES)
    by = None if sources else draw(MAYBE_LABEL)
    return Fact(
        id=draw(ID),
        text=draw(TEXT),
        section=draw(st.sampled_from(sections)),
        sources=tuple(sources),
        by=by,
        valid_from=draw(MAYBE_DATE),
        valid_until=draw(MAYBE_DATE),
        confidence=draw(CONFIDENCE),
        tags=tuple(draw(FACT_TAGS)),
        replaced_by=draw(MAYBE_ID),
    )


@st.composite
def memories(draw: st.DrawFn) -> MemoryFile:
    sections = draw(SECTION_LISTS)
    facts = draw(st.lists(facts_of(sections), max_size=8, unique_by=lambda f: f.id))
    noted = draw(st.lists(st.sampled_from(sections), unique=True, max_size=2))
    notes = tuple((s, draw(NOTE)) for s in sections if s in noted)
    memory = MemoryFile(
        title=draw(TITLE),
        intro=draw(INTRO),
        sections=tuple(sections),
        notes=notes,
    )
    return memory.with_facts(facts)


@SETTINGS
@given(memories())
def test_render_then_parse_is_the_identity(memory: MemoryFile) -> None:
    text = render_facts(memory)
    assert parse_facts(text) == memory
    assert parse_facts(text.encode("utf-8", "surrogatepass")) == memory
    assert render_facts(parse_facts(text)) == text  # deterministic: same model, same bytes


@SMALL
@given(memories())
def test_crlf_and_bom_read_the_same(memory: MemoryFile) -> None:
    text = render_facts(memory)
    if "\r" in text:  # a literal CR inside the file (none is written: text is escaped)
        return
    assert parse_facts("\ufeff" + text.replace("\n", "\r\n")) == memory


@SMALL
@given(st.text(max_size=300))
def test_any_text_parses_or_fails_with_parse_error(text: str) -> None:
    try:
        parse_facts(text)
    except ParseError as exc:
        assert exc.diagnostics
        assert all(d.path == "memory/MEMORY.md" and d.line >= 1 for d in exc.diagnostics)


def test_a_fact_line_is_a_clean_bullet() -> None:
    memory = MemoryFile().with_facts(
        [
            Fact(
                id="f1",
                text="Lives in Berlin.",
                section="User",
                sources=(FactSource(session="chat 1", interaction="i3"),),
                tags=("home",),
            ),
            Fact(id="f2", text="Likes green tea.", section="User", confidence=0.8),
        ]
    )
    assert render_facts(memory) == (
        "# Memory\n\n## User\n\n"
        "- Lives in Berlin. {#f1 ← chat%201#i3 · #home}\n"
        "- Likes green tea. {#f2 ← by hand · confidence 0.8}\n"
    )


def test_an_agent_named_hand_is_not_read_as_a_person() -> None:
    fact = Fact(id="f1", text="x", by="hand")
    assert not fact.by_hand
    assert parse_facts(render_facts(MemoryFile().with_facts([fact]))).facts == (fact,)


# --- files a person wrote ------------------------------------------------------------------

HAND = """\
# Memory

What this agent knows about Ana. Edit freely.

## User

A note under the heading,
on two lines.

- Lives in Berlin. {#f1 ← s1#i2}
- Has a cat
  called Miso.
* Prefers tea to coffee

## Projects

1. Builds a chess engine {#p1 ← by hand · #code}
2) Learns Rust
"""


def test_hand_written_file() -> None:
    memory = parse_facts(HAND)
    assert memory.intro == "What this agent knows about Ana. Edit freely."
    assert memory.notes == (("User", "A note under the heading,\non two lines."),)
    assert memory.sections == ("User", "Projects")
    texts = {f.text: f for f in memory.facts}
    assert list(texts) == [
        "Lives in Berlin.",
        "Has a cat called Miso.",
        "Prefers tea to coffee",
        "Builds a chess engine",
        "Learns Rust",
    ]
    cat = texts["Has a cat called Miso."]
    assert cat.id == derived_id("Has a cat called Miso.", {"f1", "p1"})
    assert cat.by_hand and cat.section == "User"
    assert texts["Lives in Berlin."].sources == (FactSource(session="s1", interaction="i2"),)
    assert texts["Builds a chess engine"].tags == ("code",)
    assert texts["Learns Rust"].section == "Projects"
    # the same bullet gets the same id anywhere: in another file, in another clone
    assert parse_facts("- Has a cat called Miso.\n").facts[0].id == derived_id(
        "Has a cat called Miso."
    )
    # what gitmem writes back keeps the person's prose verbatim
    again = render_facts(memory)
    assert "What this agent knows about Ana. Edit freely." in again
    assert "A note under the heading,\non two lines." in again
    assert parse_facts(again) == memory


def test_crlf_bom_and_no_final_newline() -> None:
    text = "\ufeff" + HAND.replace("\n", "\r\n").rstrip("\r\n")
    assert parse_facts(text) == parse_facts(HAND)
    assert parse_facts(text.encode()) == parse_facts(HAND)


def test_a_derived_id_does_not_take_an_explicit_one() -> None:
    taken = derived_id("Likes tea")
    memory = parse_facts(f"- Likes tea\n- Other {{#{taken}}}\n")
    assert {f.id for f in memory.facts} == {taken, derived_id("Likes tea", {taken})}
    assert len({f.id for f in memory.facts}) == 2


def test_items_before_any_heading_go_to_notes() -> None:
    memory = parse_facts("- Likes tea\n")
    assert memory.facts[0].section == "Notes"
    assert memory.sections == ("Notes",)


def test_by_hand_braces() -> None:
    fact = parse_facts("- Likes tea {#t1 ← by hand}\n").facts[0]
    assert fact.id == "t1" and fact.by_hand and fact.by is None and not fact.sources
    assert BY_HAND == "by hand"


# --- every problem names path:line ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("# Memory\n\n## User\n\n- a {#f1 ← s1 · colour blue}\n", 5, "unknown fact attribute"),
        ("## User\n\n- a {#f1}\n- b {#f1}\n", 4, "is used twice (first at line 3)"),
        ("## User\n\n- a {#f1 · until yesterday}\n", 3, "valid_until"),
        ("## User\n\n- a {#f1 · from 2024-13-01}\n", 3, "valid_from"),
        ("## User\n\n\n- a {#f1 ← s%ZZ1}\n", 4, "bad %-escape '%ZZ'"),
        ("## User\n\n- a {#f1 ← s%FF}\n", 3, "not UTF-8"),
        ("## User\n\n- a\\u{zz} {#f1 · escaped}\n", 3, "bad escape"),
        ("## User\n\n- a {#f1 · confidence high}\n", 3, "confidence 'high' is not a number"),
        ("## User\n\n- a {#f1 · confidence 7}\n", 3, "confidence"),
        ("## User\n\n- a {#f/1}\n", 3, "must start with '#id'"),
        ("## User\n\n-\n", 3, "empty list item"),
        ("## User\n\n- a\n\n## User\n", 5, "appears twice"),
        ("## #User\n", 1, "may not start with '#'"),
        ("## User\n\n- a {#f1 ← #i2}\n", 3, "names no session"),
        ("## User\n\n- a {#f1 · #}\n", 3, "tags"),
    ],
)
def test_parse_errors_name_path_and_line(text: str, line: int, problem: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse_facts(text, "memory/MEMORY.md")
    shown = str(caught.value)
    assert f"memory/MEMORY.md:{line}: " in shown, shown
    assert problem in shown, shown


def test_every_problem_of_a_file_is_listed() -> None:
    text = "## User\n\n- a {#f1 · colour blue}\n- b {#f2 · until never}\n- c {#f2}\n"
    with pytest.raises(ParseError) as caught:
        parse_facts(text, "ns/MEMORY.md")
    assert [d.line for d in caught.value.diagnostics] == [3, 4, 5]
    assert all(d.path == "ns/MEMORY.md" for d in caught.value.diagnostics)


def test_bytes_that_are_not_utf8_name_their_line() -> None:
    with pytest.raises(ParseError) as caught:
        parse_facts(b"# Memory\n\n- a\n- \xff\n")
    assert "memory/MEMORY.md:4: not UTF-8" in str(caught.value)


# --- dates ---------------------------------------------------------------------------------


@pytest.fixture
def far_east() -> Iterator[None]:
    """The local time zone set to UTC+9 (the file's moments must not depend on it)."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Tokyo"
    time.tzset()
    yield
    if old is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = old
    time.tzset()


@pytest.mark.usefixtures("far_east")
def test_a_moment_with_an_offset_is_utc_whatever_the_local_zone() -> None:
    assert as_moment("2024-05-01T09:00:00+09:00") == as_moment("2024-05-01T00:00:00")
    assert as_moment("2024-05-01") == as_moment("2024-05-01T00:00:00+00:00")


@pytest.mark.parametrize(
    "fields",
    [
        {"id": "f1", "text": "Likes tea."},
        {"id": "f1", "text": "Likes tea.", "section": "User", "by": "bench"},
        {
            "id": "f2",
            "text": "x",
            "section": "S",
            "sources": (FactSource(session="chat-1", interaction="i1"),),
        },
    ],
)
def test_a_trusted_fact_is_the_fact_model_construct_makes(fields: dict[str, object]) -> None:
    made = _trusted_fact(dict(fields))
    built = Fact.model_construct(set(fields), **fields)  # type: ignore[arg-type]
    assert made == built and hash(made) == hash(built)
    assert list(made.__dict__.items()) == list(built.__dict__.items())
    assert made.model_fields_set == built.model_fields_set
    assert repr(made) == repr(built)
    assert made.model_dump() == built.model_dump()
    assert made.model_copy(update={"text": "y"}) == built.model_copy(update={"text": "y"})


@pytest.mark.parametrize(
    ("named", "fields"),
    [
        ("by hand", {"id": "f1", "text": "Likes tea.", "section": "User"}),
        ("by bench", {"id": "f1", "text": "Likes tea.", "section": "User", "by": "bench"}),
        (
            "chat-1#i1, chat-2",
            {
                "id": "f1",
                "text": "Likes tea.",
                "section": "User",
                "sources": (
                    FactSource(session="chat-1", interaction="i1"),
                    FactSource(session="chat-2"),
                ),
            },
        ),
    ],
)
def test_a_strict_line_makes_the_fact_model_construct_makes(
    named: str, fields: dict[str, object]
) -> None:
    made = _strict_fact(("Likes tea.", "f1", named), "User", {})
    built = Fact.model_construct(set(fields), **fields)  # type: ignore[arg-type]
    assert made == built
    assert list(made.__dict__.items()) == list(built.__dict__.items())
    assert made.model_fields_set == built.model_fields_set
    assert repr(made) == repr(built)
    assert made.model_copy(update={"text": "y"}) == built.model_copy(update={"text": "y"})
