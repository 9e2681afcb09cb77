"""Sentences restated as a note about someone: pronouns to names, verbs agreeing, dates."""

from __future__ import annotations

from datetime import datetime

import pytest

from gitmem.text.events import span_label
from gitmem.text.voice import Speakers, restate, role_prefix, statement_problem

SAID = datetime(2023, 5, 8, 13, 56)
CAROLINE = Speakers("Caroline", "Melanie")


@pytest.mark.parametrize(
    ("said", "note"),
    [
        (
            "I went to an LGBTQ support group yesterday.",
            "Caroline went to an LGBTQ support group (7 May 2023).",
        ),
        (
            "I love painting and my kids love it too!",
            "Caroline loves painting and Caroline's kids love it too.",
        ),
        ("I'm a transgender woman.", "Caroline is a transgender woman."),
        ("I really need a break.", "Caroline really needs a break."),
        ("You told me about it.", "Melanie told Caroline about it."),
        ("We went camping last week.", "Caroline went camping (the week of 1 May 2023)."),
        ("I keep it in the fridge.", "Caroline keeps it in the fridge."),
        (
            "I started playing guitar about five years ago.",
            "Caroline started playing guitar (2018).",
        ),
        ("Much has happened since we last spoke.", "Much has happened since Caroline last spoke."),
    ],
)
def test_first_and_second_person_become_names(said: str, note: str) -> None:
    assert restate(said, CAROLINE, SAID) == note


@pytest.mark.parametrize(
    "said",
    [
        "What did you do last weekend?",
        "Wow, that is great!",
        "Thanks, Mel!",
        "It was great.",  # names nobody
        "Keep it in the fridge.",  # a command
        "Recommend some books on Python asyncio.",
    ],
)
def test_questions_small_talk_and_subjectless_sentences_are_no_statement(said: str) -> None:
    assert restate(said, CAROLINE, SAID) is None


def test_the_user_role_and_chinese() -> None:
    user = Speakers("user", "assistant")
    assert restate("I prefer short books, under 200 pages.", user) == (
        "The user prefers short books, under 200 pages."
    )
    zh = Speakers("user", "assistant", chinese=True)
    assert restate("我昨天去了北京。", zh, SAID) == "用户去了北京 (7 May 2023)."
    assert restate("我的猫叫小白", zh) == "用户的猫叫小白。"
    assert restate("Python装饰器是什么？", zh) is None


def test_statement_problems() -> None:
    assert statement_problem("Caroline moved from Sweden.", ["Caroline"]) is None
    assert statement_problem("Where is it?") == "a question"
    assert statement_problem("- Assistant: Try it") == "starts with the speaker label 'Assistant'"
    assert role_prefix("Caroline: hi", ["Caroline"]) == "Caroline"
    assert role_prefix("Note: the build is green") is None
    assert statement_problem("My cat is old.") == "in the first person"


def test_span_labels() -> None:
    day = datetime(2023, 5, 7)
    assert span_label((day, datetime(2023, 5, 8))) == "7 May 2023"
    assert span_label((datetime(2023, 6, 1), datetime(2023, 7, 1))) == "June 2023"
    assert span_label((datetime(2022, 1, 1), datetime(2023, 1, 1))) == "2022"
