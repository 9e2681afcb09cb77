"""Periods a query names ("in June 2023", "during the spring", 六月) decide the ranking:
parsed in English and Chinese, a month without a year taken in the store's time span, and
turns said in the period (or about it: "last Friday") put first."""

from __future__ import annotations

import importlib.util
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gitmem import MemoryManager
from gitmem.models import Interaction, Message, Session
from gitmem.search.index import KIND_INTERACTION, SearchIndex
from gitmem.search.periodrank import PeriodRanker
from gitmem.search.rankconfig import RankConfig
from gitmem.text.events import NamedPeriod, named_periods, resolve_periods


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Which book did Mel finish on 4 May?", [NamedPeriod(None, 5, 4)]),
        ("What happened on May 4, 2023?", [NamedPeriod(2023, 5, 4)]),
        ("What did Caroline do in June 2023?", [NamedPeriod(2023, 6)]),
        ("What did she cook in June?", [NamedPeriod(None, 6)]),
        ("What did she cook in May?", [NamedPeriod(None, 5)]),
        ("Where did they travel in 2022?", [NamedPeriod(2022)]),
        ("What did he plant during the spring?", [NamedPeriod(None, part="spring")]),
        ("Any trips in the summer of 2023?", [NamedPeriod(2023, part="summer")]),
        ("What did she read in early June?", [NamedPeriod(None, 6, part="early")]),
        ("What happened at the end of July 2023?", [NamedPeriod(2023, 7, part="late")]),
        ("the week before 4 May 2023", [NamedPeriod(2023, 5, 4, shift=-1, unit="week")]),
        ("Where did he work as of March 2024?", [NamedPeriod(2024, 3)]),
        ("她2023年6月做了什么?", [NamedPeriod(2023, 6)]),
        ("他六月去了哪里?", [NamedPeriod(None, 6)]),
        ("春天种了什么?", [NamedPeriod(None, part="spring")]),
        ("6月下旬", [NamedPeriod(None, 6, part="late")]),
        ("6月4日见了谁?", [NamedPeriod(None, 6, 4)]),
        ("When did Caroline go to the support group?", []),
        ("You may go there, march on", []),
    ],
)
def test_named_periods_en_and_zh(text: str, expected: list[NamedPeriod]) -> None:
    assert named_periods(text) == expected


def _ts(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()  # type: ignore[misc]


def test_month_without_year_is_taken_in_the_time_span() -> None:
    june = [NamedPeriod(None, 6)]
    # the memories span November 2022 to August 2023: only June 2023 is in it
    spans = resolve_periods(june, _ts(2022, 11, 3), _ts(2023, 8, 20))
    assert [(a.date().isoformat(), b.date().isoformat()) for a, b in spans] == [
        ("2023-06-01", "2023-07-01")
    ]
    # spanning two Junes: both
    spans = resolve_periods(june, _ts(2022, 5, 3), _ts(2023, 8, 20))
    assert [a.year for a, _b in spans] == [2022, 2023]
    # a winter runs into the next year
    winter = resolve_periods([NamedPeriod(None, part="winter")], _ts(2023, 1, 5), _ts(2023, 2, 1))
    assert [(a.date().isoformat(), b.date().isoformat()) for a, b in winter] == [
        ("2022-12-01", "2023-03-01")
    ]


def _turn(iid: str, when: datetime, text: str) -> Interaction:
    return Interaction(id=iid, timestamp=when, messages=[Message(speaker="Ana", content=text)])


def _garden_sessions() -> list[Session]:
    """A year of sessions that all talk about the garden, most of them more than the one
    turn of the spring (said on 3 April 2023) and the one about "last Friday" (said on
    3 July 2023, about 30 June)."""
    out = []
    months = [(2022, 9), (2022, 10), (2022, 11), (2022, 12), (2023, 1), (2023, 2)]
    months += [(2023, 8), (2023, 9), (2023, 10)]
    for year, month in months:
        when = datetime(year, month, 12, 18, tzinfo=UTC)
        out.append(
            Session(
                id=f"s-{year}-{month:02}",
                created=when,
                last_active=when,
                participants=["Ana"],
                interactions=[
                    _turn("t1", when, "The garden again: weeding the garden beds all evening."),
                    _turn("t2", when, "Nothing else new."),
                ],
            )
        )
    for sid, when, text in (
        ("s-spring", datetime(2023, 4, 3, 18, tzinfo=UTC), "Planted tulips in the garden."),
        ("s-july", datetime(2023, 7, 3, 18, tzinfo=UTC), "Last Friday the garden flooded."),
    ):
        out.append(
            Session(
                id=sid,
                created=when,
                last_active=when,
                participants=["Ana"],
                interactions=[_turn("t1", when, text)],
            )
        )
    return out


def _garden_store(store: Path) -> MemoryManager:
    mm = MemoryManager.init(store)
    for session in _garden_sessions():
        mm.put_session(session)
    return mm


def test_only_the_named_period_finds_the_turn(store: Path) -> None:
    mm = _garden_store(store)
    hits = mm.search("What did Ana say about the garden during the spring?", k=3)
    assert hits[0].session_id == "s-spring"
    assert hits[0].components["period"] == 1.0
    # 30 June is named by no turn's time, only by what the 3 July turn says
    hits = mm.search("What did Ana say about the garden on 30 June 2023?", k=3)
    assert hits[0].session_id == "s-july"
    hits = mm.search("花园 2023年4月 garden", k=3)
    assert hits[0].session_id == "s-spring"


def test_period_ranker_marks_the_turns_of_the_period() -> None:
    """The time parts alone: a season without a year resolved in the index's span, its
    turn a candidate kept whole, a turn far from it lowered by the period weight."""
    index = SearchIndex(":memory:")
    with index.writing():
        for session in _garden_sessions():
            index.put_session(session, path=session.id, blob="")
    times_of = PeriodRanker(index, RankConfig().tuned(period_weight=0.6))
    times = times_of.read("the garden during the spring", None, None)
    assert len(times.periods) == 1 and not times.dated
    where: dict[int, tuple[int, int, int]] = {}
    assert times_of.turns(times, None, where) == times.in_periods
    turns = index.session_docs(sorted(index.session_keys()), kind=KIND_INTERACTION, text=False)
    at = {datetime.fromtimestamp(d.ts, UTC).date().isoformat(): d for d in turns}
    spring, far = at["2023-04-03"], at["2022-10-12"]
    assert spring.id in times.in_periods and far.id not in times.in_periods
    assert times_of.pre_factor(times, spring.id) == 1.0
    assert times_of.pre_factor(times, far.id) == pytest.approx(0.4)
    assert times_of.period(times, spring) == 1.0
    assert times_of.period(times, far) == pytest.approx(0.4, abs=1e-6)
    assert times_of.temporal(times, far) is None
    index.close()


def test_a_when_question_without_a_period_keeps_its_ranking(store: Path) -> None:
    mm = _garden_store(store)
    question = "When did Ana plant tulips in the garden?"
    found = mm.search(question, k=10)
    assert all("period" not in h.components for h in found)
    mm._search.rank_config = RankConfig().tuned(period_weight=0.0)
    off = mm.search(question, k=10)
    assert [(h.session_id, h.score) for h in found] == [(h.session_id, h.score) for h in off]


def _period_questions() -> object:
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "period_questions.py"
    spec = importlib.util.spec_from_file_location("period_questions", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("period_questions", module)
    spec.loader.exec_module(module)
    return module


def test_period_questions_are_written_from_the_turns() -> None:
    module = _period_questions()
    sessions = []
    for at in range(20):
        when = datetime(2022 + at // 12, at % 12 + 1, 10, 12, tzinfo=UTC)
        turns = [
            _turn(f"m{at}-0", when, "Our bicycle"),
            _turn(f"m{at}-1", when, "Our bicycle and kayaking"),
        ]
        sessions.append(Session(id=f"s{at}", created=when, last_active=when, interactions=turns))
    # "bicycle" is in two turns of every month: only "kayaking" can be asked about
    questions = module.build(sessions, seed=1, per_conv=5)  # type: ignore[attr-defined]
    assert len(questions) == 5
    for question in questions:
        assert "kayaking" in question.text and question.evidence.endswith("-1")
    found = module.score(sessions, questions, RankConfig())  # type: ignore[attr-defined]
    assert found["R@5"] == found["n"] == 5


def test_blind_period_questions_share_no_word_with_their_turns() -> None:
    module = _period_questions()
    sessions = []
    for at in range(24):
        when = datetime(2022 + at // 12, at % 12 + 1, 10, 12, tzinfo=UTC)
        turns = [
            _turn(f"m{at}-0", when, "Our garden needs weeding again."),
            _turn(f"m{at}-1", when, "Yesterday the garden flooded."),
        ]
        sessions.append(Session(id=f"s{at}", created=when, last_active=when, interactions=turns))
    questions = module.build_blind(sessions, seed=1, per_conv=9)  # type: ignore[attr-defined]
    assert {q.form for q in questions} == {"blind-day", "blind-day-only", "blind-event"}
    for question in questions:
        assert question.text.startswith("What did Ana talk about on ")
        if question.form == "blind-event":
            # the day before a session: only the turn saying "yesterday" is about it
            assert question.accepted == {question.evidence} and question.evidence.endswith("-1")
        else:
            assert len(question.accepted) == 2
    on = module.score(sessions, questions, RankConfig())  # type: ignore[attr-defined]
    off = RankConfig().tuned(period_weight=0.0, temporal_weight=0.0)
    assert on["R@5"] == on["n"] == 9
    # without any date support the words cannot tell the days apart
    assert module.score(sessions, questions, off)["R@5"] < 9  # type: ignore[attr-defined]
