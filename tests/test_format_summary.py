"""The summary section's key facts and keywords in the Markdown file (lossless, located)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gitmem.errors import ParseError
from gitmem.format.parse import parse
from gitmem.format.render import render
from gitmem.models import Session, Summary

T0 = datetime(2024, 4, 15, 15, 30, tzinfo=UTC)


def session(summary: Summary, language: str = "en") -> Session:
    return Session(id="s", created=T0, last_active=T0, summary=summary, language=language)  # type: ignore[arg-type]


def test_facts_and_keywords_render_as_labelled_quotes() -> None:
    summary = Summary(
        text="- Books on asyncio",
        generated=T0,
        model="m",
        covers=["i1"],
        facts=["Budget is 40 euros", "> looks like a quote", "**Key facts**:"],
        keywords=["Kindle", "Caleb Hattingh"],
    )
    text = render(session(summary))
    assert text.endswith(
        "## Summary\n**Generated**: 2024-04-15T15:30:00+00:00\n**Model**: m\n**Covers**: i1\n\n"
        "> - Books on asyncio\n\n"
        "**Key facts**:\n> Budget is 40 euros\n> > looks like a quote\n> **Key facts**:\n\n"
        "**Keywords**:\n> Kindle\n> Caleb Hattingh\n"
    )
    assert parse(text, "s.md").summary == summary


def test_chinese_labels_and_escapes() -> None:
    summary = Summary(text="要点", generated=T0, facts=["预算\ufeff四十欧元"], keywords=["Kindle"])
    text = render(session(summary, "zh"))
    assert "**关键事实** (escaped):\n> 预算\\u{FEFF}四十欧元\n" in text
    assert "**关键词**:\n> Kindle\n" in text
    assert parse(text, "s.md").summary == summary


def test_summary_without_lists_is_unchanged() -> None:
    summary = Summary(text="plain", generated=T0)
    assert "Key facts" not in render(session(summary))


@pytest.mark.parametrize(
    ("tail", "problem"),
    [
        ("**Key facts**:\n> a\n\nstray text\n", "unexpected text after the summary's facts"),
        ("**Key facts**:\n> a\n\n**Key facts**:\n> b\n", "must be quoted below its label, once"),
        ("**Keywords**:\n\n", "must be quoted below its label, once"),
        ("**Key facts**:\n> a\n>\n> b\n", "s.md:15: summary facts and keywords may not be"),
    ],
)
def test_broken_lists_are_located(tail: str, problem: str) -> None:
    good = render(session(Summary(text="t", generated=T0)))
    with pytest.raises(ParseError) as caught:
        parse(good + "\n" + tail, "s.md")
    assert problem in str(caught.value)
    assert "s.md:" in str(caught.value)
