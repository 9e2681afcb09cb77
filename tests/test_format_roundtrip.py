"""Property tests: render -> parse is the identity, and parse never fails but with ParseError.

``GITMEM_HYPOTHESIS_EXAMPLES`` (default 2000) sets the number of examples for the main
round-trip property; the others run a fraction of it.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta, timezone

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings
from mistune.block_parser import BlockParser
from mistune.core import BlockState

from gitmem.errors import ParseError
from gitmem.format.labels import _UNSAFE, ESCAPED, _maybe_escape, unescape
from gitmem.format.parse import parse, parse_bytes, parse_lenient
from gitmem.format.render import render
from gitmem.format.spans import SpanParser, SpanState
from gitmem.models import (
    RESERVED_METADATA_KEYS,
    Interaction,
    Message,
    Session,
    Summary,
    check_label,
    check_value,
)

EXAMPLES = int(os.environ.get("GITMEM_HYPOTHESIS_EXAMPLES", "2000"))
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
SMALL = settings(
    max_examples=max(EXAMPLES // 4, 50),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Lines that look like the file's own structure, or are otherwise hard on a Markdown parser.
NASTY = [
    "# Session: x",
    "# 会话: y",
    "## Metadata",
    "## Conversation",
    "## Summary",
    "## 对话记录",
    "## 关键信息摘要",
    "### 2024-01-01T00:00:00",
    "### 2024-01-01T00:00:00+08:00 {#i-0001}",
    "**User**:",
    "**用户**:",
    "**Assistant** (escaped):",
    "**Generated**: 2024-01-01T00:00:00",
    "**Key facts**:",
    "**Keywords** (escaped):",
    "**关键事实**:",
    "- **Session ID**: other",
    "- **Tags**: a, b",
    "> quoted",
    ">",
    "> ",
    ">>",
    "> > nested",
    "   > indented quote",
    "```",
    "```python",
    "~~~",
    "````",
    "<!-- html",
    "-->",
    "<div>",
    "</div>",
    "<pre>",
    "<?php",
    "<![CDATA[",
    "<!DOCTYPE html>",
    "    indented code",
    "\tindented by tab",
    "",
    " ",
    "  ",
    "trailing spaces   ",
    "   leading spaces",
    "-",
    "--",
    "---",
    "===",
    "***",
    "___",
    "- item",
    "* item",
    "+ item",
    "1. item",
    "2) item",
    "[ref]: http://example.com",
    '[ref]: <x> "title"',
    "[[link]]",
    "| a | b |",
    "\\",
    "\\\\",
    "\\u{0041}",
    "text \\",
    "{#id}",
    "#",
    "######",
    "####### seven",
    "setext",
    "\r",
    "a\r\nb",
    "\x00",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x85",
    "\u2028",
    "\u2029",
    "\ufeff",
    "\ud800",
    "\udfff",
    "\U0010ffff",
    "\uffff",
    "\u00a0",
    "\u3000",
]

ANY_CHAR = st.characters(exclude_categories=())  # everything, lone surrogates included
TEXT = st.text(ANY_CHAR, max_size=40)
CONTENT = st.one_of(
    TEXT,
    st.lists(st.one_of(st.sampled_from(NASTY), TEXT), max_size=8).map("\n".join),
)
VALUE_CHAR = st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp"))
LABEL_CHAR = st.characters(
    exclude_categories=("Cc", "Cs", "Zl", "Zp"), exclude_characters="*`\\[]<>|"
)


def _valid(check: object, value: str) -> bool:
    try:
        check(value, "x")  # type: ignore[operator]
    except ValueError:
        return False
    return True


LABEL = st.one_of(
    st.sampled_from(["User", "Assistant", "用户", "助手", "Caroline", "a: b", "1.", "-", "#"]),
    st.sampled_from(["User (escaped)", "===", "{#x}", "x  y", "&amp;", "_e_", "~~~"]),
    st.text(LABEL_CHAR, min_size=1, max_size=12),
).filter(lambda s: _valid(check_label, s))
LIST_LABEL = LABEL.filter(lambda s: "," not in s)
VALUE = st.text(VALUE_CHAR, max_size=20).filter(lambda s: _valid(check_value, s))
SESSION_ID = st.one_of(st.sampled_from(["s", "a #", "# x", "x:y", "[[a]]"]), VALUE).filter(bool)
EXTRA_KEY = LABEL.filter(lambda s: ":" not in s and s.casefold() not in RESERVED_METADATA_KEYS)
LINK = VALUE.filter(lambda s: s and "," not in s and "[[" not in s and "]]" not in s)
# summary key facts / keywords: one trimmed line each, structure-like lines included
FACT = st.one_of(st.sampled_from(NASTY), VALUE).filter(lambda s: bool(s) and _valid(check_value, s))
IDENT = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}", fullmatch=True)
OFFSETS = st.one_of(
    st.just(UTC),
    st.sampled_from([timezone(timedelta(hours=8)), timezone(timedelta(hours=-3, minutes=-30))]),
    st.timedeltas(min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23)).map(
        timezone
    ),
    st.timezones(),
)
TIME = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=OFFSETS
)


# Whole strategies built once: a strategy made inside the composite below would be made and
# validated again for every example (about a fifth of the drawing time), for the same data.
TURN_IDS = st.lists(IDENT, unique=True, max_size=5)
MESSAGES = st.lists(st.builds(Message, speaker=LABEL, content=CONTENT), max_size=4)
SUMMARY = st.none() | st.builds(
    Summary,
    text=CONTENT,
    generated=TIME,
    model=st.none() | LABEL,
    covers=st.lists(IDENT, max_size=3),
    facts=st.lists(FACT, max_size=4),
    keywords=st.lists(FACT, max_size=3),
)
LIST_LABELS = st.lists(LIST_LABEL, max_size=3)
PROJECT = st.none() | LABEL
LINKS = st.lists(LINK, max_size=3)
EXTRA = st.dictionaries(EXTRA_KEY, VALUE, max_size=3)
LANGUAGE = st.sampled_from(["en", "zh"])


@st.composite
def sessions(draw: st.DrawFn) -> Session:
    ids = draw(TURN_IDS)
    interactions = [
        Interaction(id=ident, timestamp=draw(TIME), messages=draw(MESSAGES)) for ident in ids
    ]
    summary = draw(SUMMARY)
    return Session(
        id=draw(SESSION_ID),
        created=draw(TIME),
        last_active=draw(TIME),
        participants=draw(LIST_LABELS),
        tags=draw(LIST_LABELS),
        project=draw(PROJECT),
        links=draw(LINKS),
        extra=draw(EXTRA),
        interactions=interactions,
        summary=summary,
        language=draw(LANGUAGE),
    )


@SETTINGS
@given(sessions())
def test_render_then_parse_is_identity(session: Session) -> None:
    text = render(session)
    back = parse(text, "prop.md")
    assert back == session
    assert list(back.extra.items()) == list(session.extra.items())
    for got, want in zip(back.interactions, session.interactions, strict=True):
        assert got.timestamp.utcoffset() == want.timestamp.utcoffset()
    assert render(back) == text  # deterministic, and stable over a round trip
    assert render(session) == text


@SMALL
@given(sessions())
def test_rendered_file_is_plain_utf8_text_and_survives_crlf(session: Session) -> None:
    text = render(session)
    assert "\r" not in text and "\0" not in text and not text.startswith("\ufeff")
    data = text.encode("utf-8")  # no lone surrogates left
    assert parse_bytes(data) == session
    assert parse(text.replace("\n", "\r\n")) == session


STRUCTURE = [
    "- **Session ID**: x",
    "- **Created**: 2024-01-01T00:00:00",
    "- **Last active**: 2024-01-01T00:00:00+01:00",
    "- **Participants**: a, b",
    "- **Links**: [[a]], b",
    "- **key**: value",
    "- **key**",
    "### 2024-13-45",
    "### 2024-01-01T00:00:00 {#a}",
    "### 2024-01-01T00:00:00 {#bad id}",
    "**Caroline** (escaped):",
    "> \\u{110000}",
    "**Model**: m",
    "**Covers**: a, b",
]
MARKDOWNISH = st.lists(
    st.one_of(st.sampled_from(NASTY), st.sampled_from(STRUCTURE), TEXT), max_size=30
).map("\n".join)

# Quote, list and paragraph lines that end or continue one another in mistune's corner cases.
QUOTE_LINES = [
    ">",
    "> a",
    ">  ",
    "  > b",
    "    > c",
    "\t> t",
    ">\tx",
    "a",
    " ",
    "-",
    "- x",
    "1. y",
    "0)",
    "```",
    "> ```",
    "~~~",
    "<div>",
    "<!--",
    "***",
    "---",
    "===",
    "    code",
    "# h",
    "[r]: u",
    "**User**:",
    "### 2024-01-01T00:00:00",
    "",
]
QUOTEY = st.lists(st.sampled_from(QUOTE_LINES), max_size=12).map("\n".join)


def _check_parse(text: str) -> None:
    try:
        session = parse(text, "fuzz.md")
    except ParseError as exc:
        assert exc.diagnostics
        assert all(d.path == "fuzz.md" and d.line >= 1 for d in exc.diagnostics)
        assert not any("cannot read file" in d.problem for d in exc.diagnostics), exc
    else:
        assert isinstance(session, Session)
    lenient, diagnostics = parse_lenient(text, "fuzz.md")
    assert lenient is None or isinstance(lenient, Session)
    assert not any("cannot read file" in d.problem for d in diagnostics), diagnostics


@SMALL
@given(st.one_of(TEXT, MARKDOWNISH, QUOTEY))
def test_parse_arbitrary_text_fails_only_with_parse_error(text: str) -> None:
    _check_parse(text)


@SMALL
@given(sessions(), st.data())
def test_parse_mangled_file_fails_only_with_parse_error(
    session: Session, data: st.DataObject
) -> None:
    lines = render(session).split("\n")
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(lines)))
        action = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        if action != "insert" and at < len(lines):
            del lines[at]
        if action != "delete":
            lines.insert(at, data.draw(st.one_of(st.sampled_from(NASTY), TEXT)))
    _check_parse("\n".join(lines))


@SMALL
@given(st.binary(max_size=200))
def test_parse_bytes_of_arbitrary_bytes_fails_only_with_parse_error(data: bytes) -> None:
    try:
        session = parse_bytes(data, "bytes.md")
    except ParseError as exc:
        assert all(d.path == "bytes.md" and d.line >= 1 for d in exc.diagnostics)
    else:
        assert isinstance(session, Session)


class _MistuneQuotes(SpanParser):
    """The span parser with mistune's own block-quote extent, as a reference."""

    def _quote_end(self, state: BlockState) -> int | None:
        _text, end, _lazy = self.extract_block_quote(None, state)  # type: ignore[arg-type]
        return end


def _spans(parser: BlockParser, text: str) -> list[tuple[str, list[int]]]:
    state = SpanState()
    state.process(text)
    parser.parse(state)
    return [(token["type"], token.get("_span", [])) for token in state.tokens]


@SMALL
@given(st.one_of(MARKDOWNISH, QUOTEY))
def test_fast_quote_extent_matches_mistune(text: str) -> None:
    text += "\n"
    assert _spans(SpanParser(), text) == _spans(_MistuneQuotes(), text)


def test_every_unsafe_character_is_escaped_beside_tabs_and_line_breaks() -> None:
    for ch in sorted(_UNSAFE):
        for text in (f"a{ch}b", f"a\n\t{ch}", f"{ch}\u00e9 x\ny"):
            flag, written = _maybe_escape(text)
            assert flag == ESCAPED and ch not in written and unescape(written) == text
    for text in ("plain", "tab\tand\nbreak", "\u00a0nbsp \u200b zero width \U0001f600"):
        assert _maybe_escape(text) == ("", text)
