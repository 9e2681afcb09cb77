"""Questions that gather ("What books has Ana read?"): told by their form, their hits spread
over sessions; every other question keeps its order."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from gitmem import MemoryManager
from gitmem.models import Interaction, Message, Session
from gitmem.search.aggregate import is_aggregate, spread
from gitmem.search.rankconfig import RankConfig


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What activities does Melanie partake in?", True),
        ("What books has Melanie read?", True),
        ("Which cities has Jon visited?", True),
        ("What LGBTQ+ events has Caroline participated in?", True),
        ("What types of pottery have Melanie and her kids made?", True),
        ("What are some changes Caroline has faced?", True),
        ("她读过哪些书?", True),
        ("What did Melanie paint recently?", False),
        ("What has Melanie painted?", False),
        ("What does Melanie do to destress?", False),
        ("What class is Ana taking?", False),
        ("When did Caroline go to the support group?", False),
    ],
)
def test_aggregate_questions_are_told_by_their_form(text: str, expected: bool) -> None:
    assert is_aggregate(text) is expected


def test_spread_lowers_each_repeat_of_a_session() -> None:
    items = [("a", 1.0), ("a", 0.9), ("a", 0.8), ("b", 0.6)]
    keys = {"a": 1, "b": 2}
    picked = spread(items, lambda x: x[1], lambda x: keys[x[0]], 0.5)
    # a's second turn is worth 0.45 after its first: b's 0.6 comes before it
    assert [item for item, _ in picked] == [items[0], items[3], items[1], items[2]]
    assert [factor for _, factor in picked] == [1.0, 1.0, 0.5, 0.25]
    assert spread(items, lambda x: x[1], lambda x: keys[x[0]], 0.0) == [(i, 1.0) for i in items]


def _turn(iid: str, when: datetime, speaker: str, text: str) -> Interaction:
    return Interaction(id=iid, timestamp=when, messages=[Message(speaker=speaker, content=text)])


def _reading_store(store: Path) -> MemoryManager:
    """One session where Ana talks about books three times, one where she does once, and
    one where Bo does."""
    mm = MemoryManager.init(store)
    rows = {
        "s-long": [
            ("Ana", "I read two books on whales, books about the sea, great books."),
            ("Ana", "Those books on whales were long books."),
            ("Ana", "More books about whales: my books pile grows."),
        ],
        "s-once": [("Ana", "Finished some books about birds last week.")],
        "s-bo": [("Bo", "I read books, books, so many books about whales and books.")],
    }
    for day, (sid, turns) in enumerate(rows.items(), start=1):
        when = datetime(2023, 5, day, 12, tzinfo=UTC)
        mm.put_session(
            Session(
                id=sid,
                created=when,
                last_active=when,
                participants=["Ana", "Bo"],
                interactions=[
                    _turn(f"t{i}", when, who, text) for i, (who, text) in enumerate(turns)
                ],
            )
        )
    return mm


def _order(mm: MemoryManager, query: str, **changes: float) -> list[tuple[str, str | None]]:
    mm._search.rank_config = RankConfig().tuned(**changes)
    return [(h.session_id, h.interaction_id) for h in mm.search(query, k=5)]


def test_an_aggregate_question_spreads_over_sessions(store: Path) -> None:
    mm = _reading_store(store)
    question = "What books has Ana read?"
    plain = _order(mm, question, repeat_session_weight=0.0)
    spread_out = _order(mm, question, repeat_session_weight=0.6)
    assert [sid for sid, _ in plain[:3]].count("s-long") >= 2
    # with the repeats of s-long lowered, the other sessions come sooner
    assert len({sid for sid, _ in spread_out[:2]}) == 2
    once = ("s-once", "t0")
    assert spread_out.index(once) < plain.index(once)
    hits = mm.search(question, k=5)
    assert any("coverage" in h.components for h in hits)
    # the default spreads a little: the first hit stays
    mm._search.rank_config = RankConfig()
    assert mm.search(question, k=1)[0].interaction_id == plain[0][1]


def test_other_questions_keep_their_order(store: Path) -> None:
    mm = _reading_store(store)
    for question in ("What did Ana read about whales?", "Ana books whales"):
        plain = _order(mm, question, repeat_session_weight=0.0)
        changed = _order(mm, question, repeat_session_weight=0.6)
        assert changed == plain
