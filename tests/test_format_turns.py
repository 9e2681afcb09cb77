"""The incremental parse (gitmem/format/turns.py) gives exactly what a full parse gives.

Hand edits are simulated by inserting, deleting, replacing and copying lines anywhere in a
rendered file, with lines chosen to break the structure (fences, HTML, quotes without a
blank line, stray headings, duplicate ids, the placeholder character itself).
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

import gitmem.format.parse as parse_module
import gitmem.format.render as render_module
from gitmem.format import turns
from gitmem.format.parse import parse, parse_lenient
from gitmem.format.render import render
from gitmem.models import Interaction, Message, Session, read_interaction, read_session
from tests.test_format_roundtrip import sessions

EDIT_LINES = [
    "",
    ">",
    "> x",
    "```",
    "~~~",
    "<!--",
    "-->",
    "<div>",
    "</div>",
    "- item",
    "1. item",
    "    code",
    "**User**:",
    "**A**: b",
    "**User** (escaped):",
    "[x]: /url",
    "===",
    "---",
    "# T",
    "## Summary",
    "## Conversation",
    "## Metadata",
    "## 对话记录",
    "#### x",
    "###",
    "### 2024-01-01T00:00:00+00:00 {#dup}",
    "### 2024-01-01T00:00:00+00:00",
    "### bad {#b}",
    "### 2024-01-01T00:00:00+00:00 {#bad id}",
    "\ue0000",
    "### \ue0000",
    "text",
    "  > indented",
    "\r",
    "a\rb",
    "\t> tab",
    "**Generated**: 2024-01-01T00:00:00+00:00",
    "> \\u{0007}",
]

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# strategies over a fixed list, built once rather than for every edit drawn
EDIT_LINE = st.sampled_from(EDIT_LINES)
EDIT_OP = st.sampled_from(["insert", "delete", "replace", "copy"])


def _both(text: str) -> tuple[tuple[Session | None, list[str]], tuple[Session | None, list[str]]]:
    fast, fast_diagnostics = parse_lenient(text, "f.md")
    full, full_diagnostics = parse_lenient(text, "f.md", shortcut=False)
    return (fast, [str(d) for d in fast_diagnostics]), (full, [str(d) for d in full_diagnostics])


@st.composite
def edited(draw: st.DrawFn) -> tuple[str, str]:
    """A rendered session with a few more turns, and a copy with random hand edits."""
    session = draw(sessions())
    extra = [
        Interaction(
            id=f"e{n}",
            timestamp=datetime(2024, 5, 1, tzinfo=UTC) + timedelta(hours=n),
            messages=[Message(speaker="User", content=f"line {n}\nmore")],
        )
        for n in range(draw(st.integers(0, 4)))
    ]
    taken = {t.id for t in session.interactions}
    session = session.model_copy(
        update={"interactions": [*session.interactions, *(t for t in extra if t.id not in taken)]}
    )
    original = render(session)
    lines = original.split("\n")
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(lines)))
        op = draw(EDIT_OP)
        if op == "insert":
            lines.insert(at, draw(EDIT_LINE))
        elif op == "delete" and at < len(lines):
            del lines[at]
        elif op == "replace" and at < len(lines):
            lines[at] = draw(EDIT_LINE)
        elif op == "copy":  # a block of lines copied elsewhere: repeated turns and ids
            start = draw(st.integers(0, len(lines)))
            lines[at:at] = lines[start : start + draw(st.integers(1, 8))]
    return original, "\n".join(lines)


@PROPERTY
@given(edited())
def test_incremental_parse_equals_full_parse_after_hand_edits(pair: tuple[str, str]) -> None:
    original, text = pair
    turns.CACHE.clear()
    cold_fast, full = _both(text)  # nothing cached: every turn block read ahead afresh
    assert cold_fast == full
    parse_lenient(original, "f.md")  # the version before the edit fills the cache
    warm_fast, full = _both(text)
    assert warm_fast == full


@PROPERTY
@given(sessions(), st.data())
def test_incremental_parse_equals_full_parse_when_a_turn_changes(
    session: Session, data: st.DataObject
) -> None:
    parse_lenient(render(session), "f.md")
    if session.interactions:
        at = data.draw(st.integers(0, len(session.interactions) - 1))
        old = session.interactions[at]
        added = Message(speaker="X", content="y")
        new = old.model_copy(update={"messages": [*old.messages, added]})
        changed = [*session.interactions[:at], new, *session.interactions[at + 1 :]]
        session = session.model_copy(update={"interactions": changed})
    text = render(session)
    fast, full = _both(text)
    assert fast == full
    assert fast[0] == session


HEAD_LINES = [
    "",
    "- **Tags**: a,b",
    "- **Tags**: a, b ",
    "- **Tags**:",
    "- **Project**: *p*",
    "- **k**: \\\\*x\\\\*",
    "- **k**: [[a]]",
    "- **k**：v",
    "- **Links**: [[a]], b",
    "- **Links**: [[]]",
    "- **Created**: 2024",
    "- **Created**: 2024-01-01T00:00:00",
    "- **Created**: 2024-01-01 00:00:00+00:00",
    "- **Session ID**: other",
    "- **会话ID**: s",
    "- **标签**: 甲, 乙",
    "- **参与角色**: 甲",
    "- **Participants**: A, A",
    "- **x**: `code`",
    "- **x**: <b>",
    "- **tags**: x",
    "* **k**: v",
    "- **k** : v",
    "- **k**: v\\u{0007}",
    "# Session: s",
    "# 会话: s",
    "# Session:s",
    "## Metadata",
    "## 元数据",
    "## Summary",
    "## 关键信息摘要",
    "**Generated**: 2024-01-01T00:00:00+00:00",
    "**Generated** (escaped): 2024-01-01T00:00:00+00:00",
    "**创建于**: 2024-01-01T00:00:00+00:00",
    "**Model**: m",
    "**Model**:",
    "**Covers**: a, a",
    "**Covers**:",
    "**Key facts**:",
    "**Keywords**:",
    "**关键事实**:",
    "> ",
    ">",
    "> \\u{0007}",
    "> \\\\",
    "text",
    "> *x*",
]


HEAD_LINE = st.sampled_from(HEAD_LINES)
HEAD_OP = st.sampled_from(["insert", "delete", "replace"])


@st.composite
def head_edited(draw: st.DrawFn) -> str:
    """A rendered session (with a turn) edited only in its head or summary."""
    session = draw(sessions())
    turn = Interaction(
        id="zz",
        timestamp=datetime(2024, 5, 1, tzinfo=UTC),
        messages=[Message(speaker="User", content="hi")],
    )
    if not session.interactions:
        session = session.model_copy(update={"interactions": [turn]})
    lines = render(session).split("\n")
    first = next(n for n, line in enumerate(lines) if line.startswith("### "))
    last = max(n for n, line in enumerate(lines) if line.startswith("### ")) + 1
    while last < len(lines) and not lines[last].startswith("## "):
        last += 1
    places = [*range(first - 1), *range(last, len(lines) + 1)]
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.sampled_from(places))
        op = draw(HEAD_OP)
        if op == "insert":
            lines.insert(at, draw(HEAD_LINE))
        elif at < len(lines) and op == "delete":
            del lines[at]
        elif at < len(lines):
            lines[at] = draw(HEAD_LINE)
        places = [n for n in places if n <= len(lines)]
    return "\n".join(lines)


@PROPERTY
@given(head_edited())
def test_head_read_without_mistune_equals_full_parse_after_head_edits(text: str) -> None:
    turns.CACHE.clear()
    fast, full = _both(text)
    assert fast == full


@PROPERTY
@given(sessions())
def test_a_file_in_render_form_never_reaches_mistune(session: Session) -> None:
    turn = Interaction(
        id="zz",
        timestamp=datetime(2024, 5, 1, tzinfo=UTC),
        messages=[Message(speaker="User", content="hi")],
    )
    if not session.interactions:
        session = session.model_copy(update={"interactions": [turn]})
    text = render(session)
    seen: list[str] = []
    real = parse_module.top_level_blocks

    def spy(src: str) -> list[object]:  # the real block parser still runs
        seen.append(src)
        return real(src)  # type: ignore[return-value]

    parse_module.top_level_blocks = spy  # type: ignore[assignment]
    try:
        fast = parse_lenient(text, "f.md")
    finally:
        parse_module.top_level_blocks = real
    assert fast == (session, [])
    assert seen == []  # title, metadata and summary were read with string operations
    assert fast == parse_lenient(text, "f.md", shortcut=False)


def _long_session(count: int) -> Session:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    interactions = [
        Interaction(
            id=f"t{n}",
            timestamp=start + timedelta(minutes=n),
            messages=[
                Message(speaker="User", content=f"q {n}"),
                Message(speaker="Assistant", content=f"a {n}\n\nmore"),
            ],
        )
        for n in range(count)
    ]
    return Session(
        id="long", created=start, last_active=interactions[-1].timestamp, interactions=interactions
    )


def test_a_new_revision_hands_mistune_only_what_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    session = _long_session(300)
    parse(render(session))
    turn = Interaction(
        id="new",
        timestamp=datetime(2025, 1, 1, tzinfo=UTC),
        messages=[Message(speaker="User", content="hello")],
    )
    text = render(session.model_copy(update={"interactions": [*session.interactions, turn]}))
    seen: list[int] = []
    real = parse_module.top_level_blocks

    def measure(src: str) -> list[object]:  # a spy: the real block parser still runs
        seen.append(len(src))
        return real(src)  # type: ignore[return-value]

    monkeypatch.setattr(parse_module, "top_level_blocks", measure)
    back = parse(text)
    assert back.interactions[-1] == turn and len(back.interactions) == 301
    assert max(seen, default=0) < len(text) / 20  # the 301 turns never reached mistune


def test_a_hand_edit_in_the_middle_is_reported_at_its_line() -> None:
    text = render(_long_session(50))
    parse(text)  # every turn cached
    lines = text.split("\n")
    at = lines.index("### 2024-01-01T00:25:00+00:00 {#t25}")
    lines.insert(at + 1, "```")  # an unclosed fence swallows the rest of the file
    session, diagnostics = parse_lenient("\n".join(lines), "f.md")
    assert [str(d) for d in diagnostics] == [
        f"f.md:{at + 2}: unexpected block code in the conversation"
        " (expected '### <timestamp>', '**Speaker**:' or '> text')"
    ]
    assert session is not None and len(session.interactions) == 26


def test_repeated_turn_blocks_are_reported_as_duplicate_ids() -> None:
    text = render(_long_session(3))
    parse(text)
    block = text[text.index("### 2024-01-01T00:01:00") : text.index("### 2024-01-01T00:02:00")]
    session, diagnostics = parse_lenient(text + "\n" + block, "f.md")
    assert [str(d) for d in diagnostics] == [
        f"f.md:{text.count(chr(10)) + 2}: duplicate interaction id 't1' (first at line 19)"
    ]
    assert session is not None and [t.id for t in session.interactions] == ["t0", "t1", "t2"]


def test_render_reuses_the_text_of_unchanged_turns() -> None:
    session = _long_session(20)
    first = render(session)
    moved = session.interactions[3].model_copy(update={"id": "moved"})
    changed = [*session.interactions[:3], moved, *session.interactions[4:]]
    again = render(session.model_copy(update={"interactions": changed}))
    assert again == first.replace("{#t3}", "{#moved}")
    assert parse(again).interactions[3].id == "moved"


def test_a_save_renders_only_the_new_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    session = _long_session(200)
    first = render(session)
    calls: list[str] = []
    real = render_module._maybe_escape

    def count(text: str) -> tuple[str, str]:  # a spy: the real escaping still runs
        calls.append(text)
        return real(text)

    monkeypatch.setattr(render_module, "_maybe_escape", count)
    turn = Interaction(
        id="new",
        timestamp=datetime(2025, 1, 1, tzinfo=UTC),
        messages=[Message(speaker="User", content="hello")],
    )
    longer = session.model_copy(update={"interactions": [*session.interactions, turn]})
    text = render(longer)
    assert calls == ["hello"]  # 200 turns' texts were reused, not formatted again
    assert text == first + "\n### 2025-01-01T00:00:00+00:00 {#new}\n**User**:\n> hello\n"
    assert parse(text) == longer


def test_a_one_off_read_uses_the_turn_cache_but_adds_nothing() -> None:
    session = _long_session(30)
    text = render(session)
    turns.CACHE.clear()
    assert parse_lenient(text, "f.md", remember=False) == (session, [])
    assert turns.CACHE._size == 0  # an index rebuild reads 100,000 turns once: none kept
    parse(text)
    kept = turns.CACHE._size
    assert kept > 0
    assert parse_lenient(text, "f.md", remember=False) == (session, [])
    assert turns.CACHE._size == kept


GOOD_FIELDS: dict[str, Any] = {
    "id": "s1",
    "created": datetime(2024, 1, 1),  # naive: taken as UTC
    "last_active": datetime(2024, 1, 2, tzinfo=timezone(timedelta(hours=2))),
    "participants": ["User", "Assistant"],
    "tags": ["a"],
    "project": "p",
    "links": ["s0"],
    "extra": {"mood": "calm"},
    "interactions": _long_session(2).interactions,
    "language": "zh",
}


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"id": ""},
        {"id": "a\nb"},
        {"tags": ["a,b"]},
        {"participants": ["x*y"]},
        {"links": ["[[s0]]"]},
        {"project": " p"},
        {"extra": {"tags": "x"}},
        {"extra": {"a:b": "x"}},
        {"interactions": [*_long_session(2).interactions, _long_session(1).interactions[0]]},
    ],
)
def test_a_session_read_without_the_validator_is_what_the_model_makes(
    change: dict[str, Any],
) -> None:
    fields = {**GOOD_FIELDS, **change}
    try:
        expected = Session(**fields)
    except ValueError:
        with pytest.raises(ValueError):
            read_session(fields)
        return
    made = read_session(fields)
    assert made == expected and made.created.tzinfo == UTC
    assert made.model_dump() == expected.model_dump()


def test_a_turn_read_without_the_validator_is_what_the_model_makes() -> None:
    when = datetime(2024, 1, 1, 12)
    said = [Message(speaker="User", content="hi")]
    made = read_interaction("t-1", when, said)
    assert made == Interaction(id="t-1", timestamp=when, messages=said)
    assert read_interaction("-bad", when, said) is None


def test_a_new_process_reads_a_file_in_render_form_without_building_a_validator(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.md"
    path.write_text(render(_long_session(3)))
    probe = (
        "import sys\n"
        "from pydantic._internal._mock_val_ser import MockValSer\n"
        "from gitmem.format.parse import parse\n"
        "from gitmem.models import Interaction, Message, Session\n"
        "session = parse(open(sys.argv[1]).read(), 's.md')\n"
        "assert len(session.interactions) == 3\n"
        "print([isinstance(m.__pydantic_validator__, MockValSer)"
        " for m in (Session, Interaction, Message)])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(path)], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[True, True, True]"
