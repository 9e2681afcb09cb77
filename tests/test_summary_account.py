"""The offline summary as an account in the third person, on real stores: who talked about
what, key points by person ending with their turn ids, no transcript lines, clean keywords."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gitmem.manager import MemoryManager
from gitmem.models import Interaction, Message, Summary
from gitmem.summary.engines import ExtractiveSummarizer
from gitmem.summary.loss import check_loss
from gitmem.text import split_sentences
from gitmem.text.voice import first_person, role_prefix
from tests.conftest import git

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
TURN_REF = re.compile(r"^(.+) \[([\w.:-]+)\]$")  # a key point ends with its turn id

FRIENDS = [
    ("Caroline", "Hey Mel! Good to see you! How have you been?"),
    ("Melanie", "Hey Caroline! I'm swamped with the kids and my pottery class."),
    ("Caroline", "I went to an LGBTQ support group yesterday and it was so powerful."),
    ("Melanie", "That's great! What did you learn there?"),
    ("Caroline", "I decided to start the adoption process with an agency in Boston."),
    ("Melanie", "I painted a sunset over the lake last weekend for my art show."),
    ("Caroline", "My counselor Amy helps me a lot with the paperwork for the adoption."),
    ("Melanie", "We are going camping at the Grand Canyon with the kids in July."),
]


@pytest.fixture
def mm(store: Path, monkeypatch: pytest.MonkeyPatch) -> MemoryManager:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    return MemoryManager.init(store, agent="tester")


def _save(mm: MemoryManager, session: str, said: list[tuple[str, str]], start: int = 0) -> None:
    for n, (speaker, text) in enumerate(said, start):
        mm.save_messages(
            session,
            [{"speaker": speaker, "content": text}],
            timestamp=T0 + timedelta(minutes=n),
            interaction_id=f"t{n:02d}",
        )


def _summary(mm: MemoryManager, session: str) -> Summary:
    mm.summarize(session, offline=True)
    loaded = mm.load_memory(session)
    assert loaded is not None and loaded.summary is not None
    return loaded.summary


def _check_voice(summary: Summary, speakers: list[str]) -> None:
    """No transcript line, little first person, every key point ends with a covered turn."""
    lines = [line for line in summary.text.splitlines() if line.strip()]
    assert lines and summary.facts
    for line in [*lines, *summary.facts]:
        assert role_prefix(line, speakers) is None, line
    sentences = [s for line in lines for s in split_sentences(line)]
    assert sum(first_person(s) for s in sentences) <= 0.1 * len(sentences), sentences
    for fact in summary.facts:
        found = TURN_REF.match(fact)
        assert found is not None and found.group(2) in summary.covers, fact
        assert f"- {fact}" in lines  # the account lists the key points it stores


def test_two_person_summary_names_both_without_prefixes(mm: MemoryManager, store: Path) -> None:
    _save(mm, "friends", FRIENDS)
    summary = _summary(mm, "friends")
    _check_voice(summary, ["Caroline", "Melanie"])
    first, *points = summary.text.splitlines()
    assert first.startswith("Caroline and Melanie talked about ")
    assert not first.startswith("-") and all(p.startswith("- ") for p in points)
    text = summary.text
    went = next(p for p in points if p.startswith("- Caroline went to an LGBTQ support group"))
    assert went.endswith("(7 May 2023). [t02]")
    assert "Melanie painted a sunset over the lake" in text
    assert not re.search(r"(?m)^- (?:Caroline|Melanie):", text)
    # key points by person: Caroline's first (she spoke first), then Melanie's
    owners = ["Melanie" if "Melanie" in p.split(" [")[0][:20] else "Caroline" for p in points]
    assert owners == sorted(owners)
    # questions and small talk are no key points
    assert "How have you been" not in text and "What did you learn" not in text
    raw = (store / mm._store.path_of("friends")).read_text(encoding="utf-8")
    assert "**Key facts**" in raw
    git(store, "fsck", "--strict")


def test_user_assistant_summary_reports_the_assistant_in_the_third_person(
    mm: MemoryManager,
) -> None:
    turns = [
        ("Recommend some books on Python asyncio.", "Try 'Using Asyncio in Python' by Caleb."),
        ("My budget is 40 euros and I read on a Kindle.", "Both books have Kindle editions."),
        ("I prefer books with exercises.", "Then start with the exercises in chapter 3."),
    ]
    for n, (user, assistant) in enumerate(turns):
        mm.save_interaction(
            "books", user, assistant, timestamp=T0 + timedelta(minutes=n), interaction_id=f"b{n}"
        )
    summary = _summary(mm, "books")
    _check_voice(summary, ["user", "assistant"])
    first = summary.text.splitlines()[0]
    assert first.startswith("The user asked about ")
    assert "the assistant suggested Using Asyncio in Python" in first
    assert "- The user prefers books with exercises. [b2]" in summary.text
    assert "The assistant suggested trying 'Using Asyncio in Python' by Caleb. [b0]" in (
        summary.text
    )
    # the assistant's advice is never the user's preference
    assert not re.search(r"The user (?:tries|try|starts)", summary.text)


def test_chinese_summary_names_the_speaker(mm: MemoryManager) -> None:
    turns = [
        ("我住在上海，我喜欢喝绿茶。", "明白了。"),
        ("我的预算是四十欧元。", "好的。"),
        ("我们下个月去北京旅行。", "祝旅途愉快。"),
    ]
    for n, (user, assistant) in enumerate(turns):
        mm.save_interaction(
            "cn", user, assistant, timestamp=T0 + timedelta(days=n), interaction_id=f"c{n}"
        )
    summary = _summary(mm, "cn")
    _check_voice(summary, ["user", "assistant", "用户", "助手"])
    assert "我" not in summary.text
    assert summary.text.splitlines()[0].startswith("用户")
    assert "- 用户住在上海，用户喜欢喝绿茶。 [c0]" in summary.text
    assert any(f.startswith("用户的预算是四十欧元") for f in summary.facts)


def test_keywords_skip_markup_fragments_and_ubiquitous_words(mm: MemoryManager) -> None:
    # every session of the store talks about coffee: no keyword of any one of them
    others = ["hiking in the Alps", "a violin concert", "the tax return", "a broken bicycle"]
    for n, topic in enumerate(others):
        _save(
            mm,
            f"other{n}",
            [
                ("Ana", f"I drank coffee before {topic}; the coffee was strong."),
                ("Bo", f"More coffee after {topic}, and then we talked about {topic}."),
            ],
        )
    _save(
        mm,
        "web",
        [
            ("Ana", 'My page <script src="https://cdn.example.com/app.js"></script> loads slowly.'),
            ("Bo", "The coffee machine at work broke, so the coffee came from the cafe."),
            (
                "Ana",
                "The <div class='banner'> renders the carousel images twice, see www.example.org.",
            ),
            ("Bo", "Ao said the carousel images need lazy loading and a smaller banner."),
            ("Ana", "My coffee was cold while the carousel rendered the banner images."),
        ],
    )
    keywords = [k.casefold() for k in _summary(mm, "web").keywords]
    assert keywords
    assert "carousel" in keywords and "banner" in keywords
    for bad in ("script", "src", "div", "class", "https", "cdn", "www", "app", "js", "coffee"):
        assert bad not in keywords, keywords
    assert all(len(k) >= 3 for k in keywords), keywords


def test_a_summary_in_transcript_lines_is_continued_in_the_third_person() -> None:
    previous = Summary(
        text="- User: I moved to Lisbon in March 2023.\n- Assistant: Try the tram.",
        generated=T0,
        covers=["t00"],
        facts=["User: I moved to Lisbon in March 2023.", "Assistant: Try the tram."],
    )
    turns = [
        Interaction(
            id="t01",
            timestamp=T0 + timedelta(days=1),
            messages=[
                Message(speaker="user", content="My daughter Ana starts school in September."),
                Message(speaker="assistant", content="Lisbon schools start mid-September."),
            ],
        )
    ]
    new = ExtractiveSummarizer().structured(turns, previous)
    assert new.key_facts[0] == "The user moved to Lisbon in March 2023."
    assert all(role_prefix(line, ["user"]) is None for line in new.summary.splitlines())
    assert not check_loss(previous, new, turns).fires
