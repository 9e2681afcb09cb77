"""Example files -> expected models, exact rendering, and located diagnostics."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from gitmem.errors import Diagnostic, ParseError
from gitmem.format.labels import LABELS as _LABELS
from gitmem.format.parse import parse, parse_bytes, parse_lenient
from gitmem.format.render import render
from gitmem.models import RESERVED_METADATA_KEYS, Interaction, Message, Session, Summary

FIXTURES = Path(__file__).parent / "fixtures"
CST = timezone(timedelta(hours=2))


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def errors(name: str) -> list[str]:
    with pytest.raises(ParseError) as info:
        parse(fixture(name), name)
    return [str(d) for d in info.value.diagnostics]


def head(body: str = "", meta: str = "", language: str = "en") -> str:
    """A valid title and metadata (lines 1-6, then ``meta``), a blank line, then ``body``."""
    labels = ("Session", "Metadata", "Session ID", "Created", "Last active")
    if language == "zh":
        labels = ("会话", "元数据", "会话ID", "创建时间", "最后活跃")
    title, section, sid, created, last = labels
    return (
        f"# {title}: s\n\n## {section}\n- **{sid}**: s\n- **{created}**: 2024-01-01T00:00:00\n"
        f"- **{last}**: 2024-01-01T00:00:00\n{meta}\n{body}"
    )


# --------------------------------------------------------------------------- example files


def test_seed_example_file_parses_to_the_expected_model() -> None:
    session = parse(fixture("seed_zh.md"), "seed_zh.md")
    assert session == Session(
        id="session_20240415_153022",
        created=datetime(2024, 4, 15, 15, 30, 22, tzinfo=UTC),
        last_active=datetime(2024, 4, 15, 16, 45, 10, tzinfo=UTC),
        participants=["user", "assistant"],
        language="zh",
        interactions=[
            Interaction(
                id="t20240415T153025",
                timestamp=datetime(2024, 4, 15, 15, 30, 25, tzinfo=UTC),
                messages=[
                    Message(speaker="用户", content="请推荐几本关于Python异步编程的书"),
                    Message(
                        speaker="助手",
                        content="推荐以下书籍：\n1. 《Python异步编程实战》\n"
                        "2. 《Fluent Python》第18-21章\n3. 《Using Asyncio in Python》",
                    ),
                ],
            ),
            Interaction(
                id="t20240415T153510",
                timestamp=datetime(2024, 4, 15, 15, 35, 10, tzinfo=UTC),
                messages=[
                    Message(speaker="用户", content="第一本书的作者是谁？"),
                    Message(speaker="助手", content="《Python异步编程实战》的作者是..."),
                ],
            ),
        ],
        summary=Summary(
            text="用户对Python异步编程感兴趣，已推荐了三本相关书籍。用户询问了第一本书的作者。",
            generated=datetime(2024, 4, 15, 16, 45, 10, tzinfo=UTC),
        ),
    )
    assert [m.role for m in session.interactions[0].messages] == ["user", "assistant"]


def test_seed_example_file_renders_back_in_chinese_with_its_derived_ids() -> None:
    session = parse(fixture("seed_zh.md"))
    text = render(session)
    assert text.startswith("# 会话: session_20240415_153022\n\n## 元数据\n- **会话ID**: ")
    assert "### 2024-04-15T15:30:25+00:00 {#t20240415T153025}\n**用户**:\n> 请推荐" in text
    assert "## 关键信息摘要\n**创建于**: 2024-04-15T16:45:10+00:00\n\n> 用户对" in text
    assert parse(text) == session


def test_english_file_with_several_speakers_parses_and_renders_byte_for_byte() -> None:
    text = fixture("locomo_en.md")
    session = parse(text, "locomo_en.md")
    assert session.id == "conv-26_session_1"
    assert session.created == datetime(2023, 5, 8, 13, 56, tzinfo=CST)
    assert session.last_active.isoformat() == "2023-05-08T14:10:00.250000+02:00"
    assert session.participants == ["Caroline", "Melanie"]
    assert session.tags == ["support-group", "painting"]
    assert session.project == "locomo"
    assert session.links == ["conv-26_session_2", "conv-26_session_3"]
    assert list(session.extra.items()) == [
        ("Source", "LoCoMo conv-26, **verbatim** <kept>"),
        ("Mood", ""),
    ]
    first, second, third = session.interactions
    assert [first.id, second.id, third.id] == ["D1:1", "D1:3", "D1:5"]
    assert [m.speaker for m in first.messages] == ["Caroline", "Melanie"]
    assert first.messages[1].content == (
        "Hey Caroline! I'm swamped with the kids & work.\n\nWhat's up with you?"
    )
    assert second.timestamp == datetime(2023, 5, 8, 14, 1, 30, 250000, tzinfo=CST)
    assert second.messages[0].content == (
        "I went to a LGBTQ support group yesterday. It was so powerful.\n```\n"
        "## Summary (still part of the message)\n**Melanie**:"
    )
    assert second.messages[1].content == "Tab\there, a CR\r and a backslash \\ kept."
    assert third.messages == []
    assert session.summary == Summary(
        text="Caroline told Melanie about a support group.\n\nMelanie is busy with kids and work.",
        generated=datetime(2023, 5, 8, 14, 10, 5, tzinfo=CST),
        model="offline-extractive",
        covers=["D1:1", "D1:3"],
    )
    assert render(session) == text


def test_render_is_the_documented_layout() -> None:
    session = Session(
        id="s1",
        created=datetime(2024, 4, 15, 15, 30, 22, tzinfo=timezone(timedelta(hours=8))),
        last_active=datetime(2024, 4, 15, 15, 30, 25, tzinfo=timezone(timedelta(hours=8))),
        participants=["user", "assistant"],
        interactions=[
            Interaction(
                id="i-0001",
                timestamp=datetime(2024, 4, 15, 15, 30, 25, tzinfo=timezone(timedelta(hours=8))),
                messages=[
                    Message(speaker="user", content="Two lines\n\n  and an indent"),
                    Message(speaker="assistant", content=""),
                ],
            )
        ],
    )
    assert render(session) == (
        "# Session: s1\n"
        "\n"
        "## Metadata\n"
        "- **Session ID**: s1\n"
        "- **Created**: 2024-04-15T15:30:22+08:00\n"
        "- **Last active**: 2024-04-15T15:30:25+08:00\n"
        "- **Participants**: user, assistant\n"
        "\n"
        "## Conversation\n"
        "\n"
        "### 2024-04-15T15:30:25+08:00 {#i-0001}\n"
        "**user**:\n"
        "> Two lines\n"
        ">\n"
        ">   and an indent\n"
        "\n"
        "**assistant**:\n"
        ">\n"
    )
    zh = render(session.model_copy(update={"language": "zh"}))
    assert zh.startswith("# 会话: s1\n\n## 元数据\n- **会话ID**: s1\n- **创建时间**: ")
    assert "\n## 对话记录\n" in zh
    assert parse(zh) == session.model_copy(update={"language": "zh"})


def test_session_without_interactions_or_summary_round_trips() -> None:
    session = Session(id="empty", created=datetime(2024, 1, 1), last_active=datetime(2024, 1, 1))
    text = render(session)
    assert text.endswith("## Conversation\n")
    assert parse(text) == session


def test_render_is_deterministic() -> None:
    session = parse(fixture("locomo_en.md"))
    assert render(session) == render(session) == render(parse(render(session)))


# --------------------------------------------------------------------------- escaping


@pytest.mark.parametrize(
    "content",
    ["a\rb", "nul\0", "\x0b\x0c\x1c\x85", "line\u2028sep\u2029", "\ufeffbom", "\ud800 lone", "\\"],
)
def test_unsafe_content_is_written_escaped_and_read_back(content: str) -> None:
    text = "x\\u{41}\\\\" + content
    session = Session(
        id="s",
        created=datetime(2024, 1, 1),
        last_active=datetime(2024, 1, 1),
        interactions=[
            Interaction(
                id="a",
                timestamp=datetime(2024, 1, 1),
                messages=[Message(speaker="User", content=text)],
            )
        ],
        summary=Summary(text=text, generated=datetime(2024, 1, 1)),
    )
    rendered = render(session)
    if content == "\\":
        assert "**User**:\n> x\\u{41}\\\\\\\n" in rendered  # safe text is never escaped
    else:
        assert "**User** (escaped):\n> x\\\\u{41}\\\\\\\\" in rendered
        assert "**Generated** (escaped): " in rendered
    assert rendered.encode("utf-8")
    assert parse(rendered) == session


def test_escapes_are_only_read_in_escaped_messages() -> None:
    text = head(
        "## Conversation\n\n### 2024-01-01T00:00:00\n**A**:\n> \\u{41}\n\n"
        "**B** (escaped):\n> \\u{41}\\\\\n"
    )
    messages = parse(text).interactions[0].messages
    assert [m.content for m in messages] == ["\\u{41}", "A\\"]


# --------------------------------------------------------------------------- hand edits


def test_crlf_line_endings_and_a_byte_order_mark_are_accepted() -> None:
    text = fixture("seed_zh.md")
    assert parse("\ufeff" + text.replace("\n", "\r\n")) == parse(text)
    assert parse_bytes(text.replace("\n", "\r\n").encode("utf-8-sig")) == parse(text)


def test_headings_without_ids_get_stable_derived_ids() -> None:
    text = head(
        "## Conversation\n\n"
        "### 2024-01-01T10:00:00+08:00\n\n"
        "### 2024-01-01T10:00:00+08:00\n\n"
        "### 2024-01-01T10:00:00.5+08:00 {#t20240101T100000-3}\n\n"
        "### 2024-01-01T10:00:00+08:00\n\n"
        "### 0005-01-01T00:00:00\n"
    )
    ids = [i.id for i in parse(text).interactions]
    assert ids == [
        "t20240101T100000",
        "t20240101T100000-2",
        "t20240101T100000-3",
        "t20240101T100000-4",
        "t00050101T000000",
    ]
    assert [i.id for i in parse(text).interactions] == ids


def test_hand_written_variants_are_understood() -> None:
    text = head(
        "## Conversation\n\n"
        "### 2024-01-01T00:00:00Z {#a}\n"
        "**Caroline**：\n"  # full-width colon
        "   > indented marker\n"
        ">no space\n"
        "\n"
        "> second paragraph after a blank line\n"
        "\n"
        "**Melanie**:\n"
        "\n"
        "> a blank line between speaker and quote\n"
        "\n"
        "## Summary\n"
        "**Generated**: 2024-01-01T00:00:00Z\n"
        "\n"
        "Plain text,\n"
        "two paragraphs.\n"
        "\n"
        "- even a list\n"
        "\n"
    )
    session = parse(text)
    first, second = session.interactions[0].messages
    assert first.content == "indented marker\nno space\n\nsecond paragraph after a blank line"
    assert second.content == "a blank line between speaker and quote"
    assert session.summary is not None
    assert session.summary.text == "Plain text,\ntwo paragraphs.\n\n- even a list"


def test_metadata_labels_are_matched_in_either_language_and_any_case() -> None:
    text = head("- **tags**: a, b\n- **链接**: [[x]]\n- **project**: p\n- **Own key**: v\n")
    session = parse(text)
    assert (session.tags, session.links, session.project) == (["a", "b"], ["x"], "p")
    assert session.extra == {"Own key": "v"}


def test_every_reserved_metadata_key_is_a_label_the_parser_knows() -> None:
    fields = ("session_id", "created", "last_active", "participants", "tags", "project", "links")
    labels = {lab[name].casefold() for lab in _LABELS.values() for name in fields}
    assert labels == RESERVED_METADATA_KEYS


# --------------------------------------------------------------------------- diagnostics


def test_invalid_timestamp_names_its_line() -> None:
    assert errors("broken_timestamp.md") == [
        "broken_timestamp.md:12: invalid timestamp '2024-13-45'"
    ]


def test_structural_problems_are_all_reported_with_lines() -> None:
    name = "broken_structure.md"
    assert errors(name) == [
        f"{name}:1: missing title '# Session: <session id>' on the first line",
        f"{name}:1: unexpected text outside any '## ' section",
        f"{name}:7: metadata item is not '- **Key**: value': '- just text'",
        f"{name}:9: duplicate metadata key 'Tags' (first at line 8)",
        f"{name}:13: quoted text without a '**Speaker**:' line above it",
        f"{name}:19: speaker 'Assistant' has no quoted message ('> ' lines below)",
        f"{name}:21: duplicate interaction id 'i-1' (first at line 15)",
        f"{name}:22: unexpected text in the conversation"
        " (expected '### <timestamp>', '**Speaker**:' or '> text')",
        f"{name}:27: unknown section 'Notes' (expected Metadata, Conversation or Summary)",
        f"{name}:30: duplicate section 'Metadata' (first at line 3)",
    ]


def test_message_and_value_problems_are_reported_with_lines() -> None:
    name = "broken_messages.md"
    assert errors(name) == [
        f"{name}:4: Session ID 'beta' does not match the title's 'alpha'",
        f"{name}:7: participant/tag may not contain control characters"
        " or any of * ` \\ [ ] < > |: 'a|b'",
        f"{name}:13: bad escape '\\q' in escaped text (only \\\\ and \\u{{XXXX}} are allowed)",
        f"{name}:15: message text goes below the speaker, quoted with '> '",
        f"{name}:19: quoted line does not start with '>' (or needs a blank line above)",
        f"{name}:21: interaction id 'bad id' must be 1-64 characters of letters, digits"
        " and . _ : - starting with a letter or digit",
        f"{name}:26: summary must start with '**Generated**: <timestamp>'",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "1: missing title '# Session: <session id>' on the first line"),
        ("# Notes\n", "1: the title must read '# Session: <session id>'"),
        (head("## Conversation\n\n**User**:\n> hi\n"), "10: unexpected text in the conversation"),
        (head(meta="- **Created**: 2024-01-01\n"), "7: duplicate metadata key 'Created'"),
        (head(meta="- **Links**: other\n"), "7: link 'other' is not written as [[session id]]"),
        (head(meta="- **Tags**: a`b\n"), "7: participant/tag may not contain"),
        (head(meta="- **a|b**: v\n"), "7: metadata key may not contain"),
        (head(meta="- **Project**:\n- **Mood**: x\n- **Created2**\n"), "9: metadata item is not"),
        (head("## Conversation\n\n### 2024-01-01T00:00:00\n**a|b**:\n> x\n"), "11: speaker"),
        (
            head("## Conversation\n\n### 2024-01-01T00:00:00\n**A**:\n> x\n\n```\ncode\n```\n"),
            "14: unexpected block code in the conversation",
        ),
        (
            head("## Conversation\n\n### 2024-01-01T00:00:00\n[x]: /url\n"),
            "11: unexpected content in the conversation",
        ),
        (head("## Conversation\n\n#### 2024-01-01T00:00:00\n"), "10: unexpected heading"),
        (
            head("## Conversation\n\n### 2024-01-01T00:00:00\n**A**:\nhello\n"),
            "12: message text must be quoted with '> '",
        ),
        (
            head("## Summary\n**Generated**: 2024-01-01\n**Model**: m\n**Model**: n\n"),
            "11: duplicate summary field 'Model' (first at line 10)",
        ),
        (
            head("## Summary\n**Generated**: 2024-01-01\n\n> text\n\nmore\n"),
            "13: unexpected text after the summary's quoted text",
        ),
        (
            head("## Summary\n**Generated**: 2024-01-01\n**Covers**: ok, bad id\n"),
            "10: interaction id 'bad id' must be",
        ),
        (head("## Summary\n**Generated**: later\n"), "9: invalid timestamp 'later'"),
        (head("## Summary\n\n> no header\n"), "8: summary must start with '**Generated**:"),
        ("# Session: s\n\n## Metadata\n- **Session ID**: s\n", "3: metadata has no 'Created'"),
        ("# Session: s\n\n## Conversation\n", "3: missing '## Metadata' section"),
        ("# Session: s\n\n# Other\n", "3: unexpected '# ' heading: the title comes first"),
        ("# Session: x\n\0", "2: NUL character"),
    ],
)
def test_located_diagnostic(text: str, expected: str) -> None:
    with pytest.raises(ParseError) as info:
        parse(text, "f.md")
    assert any(str(d).startswith(f"f.md:{expected}") for d in info.value.diagnostics), [
        str(d) for d in info.value.diagnostics
    ]


def test_lenient_mode_returns_what_it_could_read_plus_warnings() -> None:
    session, diagnostics = parse_lenient(fixture("broken_structure.md"), "b.md")
    assert len(diagnostics) == 10
    assert session is not None
    assert session.id == "s2"
    assert session.tags == ["a", "b"]
    [turn] = session.interactions  # the turn with a duplicate id is skipped
    assert turn.messages == [Message(speaker="User", content="hello")]

    session, diagnostics = parse_lenient(fixture("broken_timestamp.md"))
    assert diagnostics == [Diagnostic("<memory>", 12, "invalid timestamp '2024-13-45'")]
    assert session is not None and [i.id for i in session.interactions] == ["i-1"]
    assert parse(fixture("broken_timestamp.md"), lenient=True) == session


def test_lenient_parse_raises_when_nothing_could_be_read() -> None:
    assert parse_lenient("just text\n") == (
        None,
        [
            Diagnostic("<memory>", 1, "missing title '# Session: <session id>' on the first line"),
            Diagnostic("<memory>", 1, "unexpected text outside any '## ' section"),
            Diagnostic("<memory>", 1, "missing '## Metadata' section"),
        ],
    )
    with pytest.raises(ParseError):
        parse("just text\n", lenient=True)


def test_parse_bytes_reports_the_line_of_bad_bytes() -> None:
    with pytest.raises(ParseError) as info:
        parse_bytes(b"# Session: s\n\n## Meta\xffdata\n", "b.md")
    assert [str(d) for d in info.value.diagnostics] == [
        "b.md:3: not UTF-8 text: byte 0xff at column 8"
    ]
    with pytest.raises(ParseError) as info:
        parse_bytes(b"# Session: s\n\n\x00\n", "b.md")
    assert str(info.value.diagnostics[0]) == "b.md:3: NUL character: this is not a text file"


# --------------------------------------------------------------------------- model rules


def test_models_reject_what_could_not_round_trip() -> None:
    with pytest.raises(ValidationError, match="built-in field"):
        Session(
            id="s", created=datetime.now(UTC), last_active=datetime.now(UTC), extra={"TAGS": "x"}
        )
    turn = Interaction(id="a", timestamp=datetime.now(UTC))
    with pytest.raises(ValidationError, match="duplicate interaction id"):
        Session(id="s", created=turn.timestamp, last_active=turn.timestamp, interactions=[turn] * 2)


def test_zone_aware_times_are_kept_as_fixed_offsets() -> None:
    # 01:30 on 2023-11-05 happens twice in New York; the fold=1 one is UTC-5.
    ambiguous = datetime(2023, 11, 5, 1, 30, fold=1, tzinfo=ZoneInfo("America/New_York"))
    turn = Interaction(id="a", timestamp=ambiguous)
    assert turn.timestamp.utcoffset() == timedelta(hours=-5)
    assert turn.timestamp == ambiguous.astimezone(UTC)
    session = Session(id="s", created=ambiguous, last_active=ambiguous, interactions=[turn])
    assert parse(render(session)) == session
