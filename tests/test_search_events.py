"""Relative dates ("yesterday", "last week", 上个月) resolved against when a turn was said,
stored as event spans in the search index and matched by dates in queries."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from gitmem import MemoryManager
from gitmem.models import Interaction, Message, Session
from gitmem.search.index import SearchIndex
from gitmem.search.rank import Ranker
from gitmem.text.events import closeness, event_spans, relative_spans

WED = datetime(2023, 5, 10, 15, 30, tzinfo=UTC)  # a Wednesday
SUN = datetime(2023, 5, 14, 9, 0, tzinfo=UTC)
MON = datetime(2023, 5, 8, 9, 0, tzinfo=UTC)


def _days(spans: list[tuple[datetime, datetime]]) -> list[tuple[str, str]]:
    """Spans as (first day, day after the last), checking they are whole days."""
    out = []
    for start, end in spans:
        assert start.hour == start.minute == end.hour == end.minute == 0
        out.append((start.date().isoformat(), end.date().isoformat()))
    return out


@pytest.mark.parametrize(
    ("text", "anchor", "expected"),
    [
        # month and year boundaries
        (
            "I went there yesterday",
            datetime(2023, 3, 1, 8, tzinfo=UTC),
            [("2023-02-28", "2023-03-01")],
        ),
        ("see you tomorrow", datetime(2023, 1, 31, 8, tzinfo=UTC), [("2023-02-01", "2023-02-02")]),
        ("tomorrow", datetime(2023, 12, 31, 23, tzinfo=UTC), [("2024-01-01", "2024-01-02")]),
        ("next month", datetime(2023, 12, 15, tzinfo=UTC), [("2024-01-01", "2024-02-01")]),
        ("last month", datetime(2023, 1, 10, tzinfo=UTC), [("2022-12-01", "2023-01-01")]),
        ("this month", WED, [("2023-05-01", "2023-06-01")]),
        ("last year", datetime(2023, 1, 1, tzinfo=UTC), [("2022-01-01", "2023-01-01")]),
        # leap days
        ("yesterday", datetime(2024, 3, 1, 12, tzinfo=UTC), [("2024-02-29", "2024-03-01")]),
        ("tomorrow", datetime(2024, 2, 28, 12, tzinfo=UTC), [("2024-02-29", "2024-03-01")]),
        ("two days ago", datetime(2024, 3, 1, tzinfo=UTC), [("2024-02-28", "2024-02-29")]),
        ("a year ago", datetime(2024, 2, 29, tzinfo=UTC), [("2023-01-01", "2024-01-01")]),
        ("a month ago", datetime(2024, 3, 31, tzinfo=UTC), [("2024-02-01", "2024-03-01")]),
        # weekdays: "last Friday" is the latest Friday before the day, "next" the first after
        ("last Friday", WED, [("2023-05-05", "2023-05-06")]),
        ("next Tuesday", WED, [("2023-05-16", "2023-05-17")]),
        ("last Wednesday", WED, [("2023-05-03", "2023-05-04")]),
        ("next wednesday", WED, [("2023-05-17", "2023-05-18")]),
        ("this Friday", WED, [("2023-05-12", "2023-05-13")]),
        ("last Sunday", MON, [("2023-05-07", "2023-05-08")]),
        # weeks start on Monday: "last week" is the week before the anchor's week
        ("last week", WED, [("2023-05-01", "2023-05-08")]),
        ("last week", SUN, [("2023-05-01", "2023-05-08")]),
        ("last week", MON, [("2023-05-01", "2023-05-08")]),
        ("next week", SUN, [("2023-05-15", "2023-05-22")]),
        ("this weekend", WED, [("2023-05-13", "2023-05-15")]),
        ("last weekend", WED, [("2023-05-06", "2023-05-08")]),
        ("this past weekend", MON, [("2023-05-06", "2023-05-08")]),
        # counted back and forward
        ("a few days ago", WED, [("2023-05-05", "2023-05-09")]),
        ("a couple of days ago", WED, [("2023-05-07", "2023-05-09")]),
        ("Three days ago", WED, [("2023-05-07", "2023-05-08")]),
        ("in 3 days", WED, [("2023-05-13", "2023-05-14")]),
        ("two weeks from now", WED, [("2023-05-21", "2023-05-28")]),
        (
            "last night, the day before yesterday",
            WED,
            [("2023-05-09", "2023-05-10"), ("2023-05-08", "2023-05-09")],
        ),
        # Chinese
        ("我昨天去了", WED, [("2023-05-09", "2023-05-10")]),
        ("前天", WED, [("2023-05-08", "2023-05-09")]),
        ("明天见", WED, [("2023-05-11", "2023-05-12")]),
        ("上周", WED, [("2023-05-01", "2023-05-08")]),
        ("下周", WED, [("2023-05-15", "2023-05-22")]),
        ("上个月", WED, [("2023-04-01", "2023-05-01")]),
        ("下个月", datetime(2023, 12, 1, tzinfo=UTC), [("2024-01-01", "2024-02-01")]),
        ("去年", WED, [("2022-01-01", "2023-01-01")]),
        # no date here
        ("see you next time", WED, []),
        ("this is the last one, in a way", WED, []),
        ("I am going to the store", WED, []),
    ],
)
def test_relative_spans(text: str, anchor: datetime, expected: list[tuple[str, str]]) -> None:
    assert _days(relative_spans(text, anchor)) == expected


def test_days_are_the_anchors_own_days() -> None:
    # 00:30 on 8 May in UTC+8 is still 7 May in UTC: "yesterday" is 7 May there
    east = timezone(timedelta(hours=8))
    ((start, end),) = relative_spans("yesterday", datetime(2023, 5, 8, 0, 30, tzinfo=east))
    assert (start, end) == (datetime(2023, 5, 7, tzinfo=east), datetime(2023, 5, 8, tzinfo=east))
    # a naive anchor is UTC
    ((start, _end),) = relative_spans("tomorrow", datetime(2023, 5, 8, 23, 59))
    assert start == datetime(2023, 5, 9, tzinfo=UTC)


def test_phrases_past_the_calendars_ends_are_left_out() -> None:
    last = datetime(9999, 12, 31, 12, tzinfo=UTC)
    assert _days(relative_spans("tomorrow, next year, yesterday", last)) == [
        ("9999-12-30", "9999-12-31")
    ]
    assert relative_spans("yesterday, last year, a week ago", datetime(1, 1, 1, tzinfo=UTC)) == []
    assert event_spans("in December, yesterday", last)[1:] == []


def test_event_spans_add_named_dates_and_leave_out_vague_ones() -> None:
    text = "On 7 May 2023 I ran, in June I swim, and a few years ago I hiked. Yesterday too."
    assert _days(event_spans(text, WED)) == [
        ("2023-05-09", "2023-05-10"),
        ("2023-05-07", "2023-05-08"),
        ("2023-06-01", "2023-07-01"),
    ]
    assert len(relative_spans(text, WED)) == 2  # "a few years ago" is there, just too vague
    assert event_spans("yesterday and yesterday", WED) == event_spans("yesterday", WED)
    assert event_spans("nothing dated here", WED) == []


def _turn(iid: str, when: datetime, text: str) -> Interaction:
    return Interaction(id=iid, timestamp=when, messages=[Message(speaker="Ana", content=text)])


def _session(sid: str, *turns: Interaction) -> Session:
    return Session(
        id=sid,
        created=turns[0].timestamp,
        last_active=turns[-1].timestamp,
        participants=["Ana"],
        interactions=list(turns),
    )


def _events(mm: MemoryManager, sid: str) -> dict[str, tuple[tuple[float, float], ...]]:
    def work(index: SearchIndex) -> dict[str, tuple[tuple[float, float], ...]]:
        keys = index.session_keys(session_ids=[sid])
        return {d.iid or "": d.events for d in index.session_docs(keys, text=False)}

    return mm._search._store_index().run(work)


def _stamp(day: date) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()


def test_event_spans_survive_reopen_and_rebuild(store: Path) -> None:
    may8 = datetime(2023, 5, 8, 20, tzinfo=UTC)
    mm = MemoryManager.init(store)
    mm.put_session(
        _session(
            "s1",
            _turn("t1", may8, "We adopted a puppy yesterday!"),
            _turn("t2", may8, "No dates in this one."),
        )
    )
    expected = {"t1": ((_stamp(date(2023, 5, 7)), _stamp(date(2023, 5, 8))),), "t2": ()}
    assert _events(mm, "s1") == expected
    mm.close_index()
    mm.close()
    mm = MemoryManager(store)
    assert _events(mm, "s1") == expected
    mm.reindex()
    assert _events(mm, "s1") == expected
    # the turn changes: its old span is gone from the lookup table too
    mm.put_session(_session("s1", _turn("t1", may8, "We adopted a puppy last week!")))
    assert _events(mm, "s1") == {"t1": ((_stamp(date(2023, 5, 1)), _stamp(date(2023, 5, 8))),)}

    def about(index: SearchIndex) -> set[str]:
        found = index.event_docs(_stamp(date(2023, 5, 7)), _stamp(date(2023, 5, 8)), 10)
        return {d.iid or "" for d in index.docs(found).values()}

    assert mm._search._store_index().run(about) == {"t1"}  # last week holds 7 May
    mm.put_session(_session("s1", _turn("t1", may8, "We adopted a puppy.")))
    assert mm._search._store_index().run(about) == set()
    mm.close_index()
    mm.close()


def test_a_date_in_the_query_finds_the_turn_that_talks_about_it(store: Path) -> None:
    mm = MemoryManager.init(store)
    # both said on 8 May; only the later one says the fair was the day before
    mm.put_session(
        _session(
            "near",
            _turn(
                "n1",
                datetime(2023, 5, 8, 9, tzinfo=UTC),
                "The pottery fair happened, it was lovely.",
            ),
        )
    )
    mm.put_session(
        _session(
            "told",
            _turn(
                "y1",
                datetime(2023, 5, 8, 20, tzinfo=UTC),
                "The pottery fair happened yesterday, lovely.",
            ),
        )
    )
    # no query word at all: found only through its event span ("yesterday" on 8 May)
    mm.put_session(
        _session(
            "puppy",
            _turn("p1", datetime(2023, 5, 8, 21, tzinfo=UTC), "We adopted a puppy yesterday!"),
        )
    )
    mm.put_session(
        _session(
            "later", _turn("l1", datetime(2023, 6, 20, tzinfo=UTC), "Nothing happened at work.")
        )
    )
    hits = mm.search("What happened on 7 May 2023?")
    order = [h.interaction_id for h in hits]
    assert order.index("y1") < order.index("n1")
    told = hits[order.index("y1")]
    assert told.components["temporal"] == pytest.approx(0.3)
    assert "p1" in order
    # without a date in the query the event spans change nothing
    plain = [h.interaction_id for h in mm.search("What happened?")]
    assert "p1" not in plain
    mm.close_index()
    mm.close()


def test_a_relative_date_in_the_query_is_seen_from_now() -> None:
    index = SearchIndex(":memory:")
    with index.writing():
        for sid, when, text in [
            ("a", datetime(2023, 5, 3, tzinfo=UTC), "We talked about the garden."),
            ("b", datetime(2023, 4, 3, tzinfo=UTC), "We talked about the garden."),
            # said in April, about the week of 1 May
            ("c", datetime(2023, 4, 28, tzinfo=UTC), "The garden party is next week."),
            # no query word: a candidate only because it is from last week
            ("d", datetime(2023, 5, 2, tzinfo=UTC), "We planted tomatoes."),
        ]:
            index.put_session(_session(sid, _turn("t", when, text)), path=sid, blob="")
    ranking = Ranker(index).rank("garden last week", now=WED)
    by_session = {h.session_id: h for h in ranking.hits}
    assert by_session["a"].components["temporal"] == pytest.approx(0.3)
    assert by_session["c"].components["temporal"] == pytest.approx(0.3)
    assert by_session["b"].components["temporal"] < 0.1
    assert by_session["d"].components["temporal"] == pytest.approx(0.3)
    assert [h.session_id for h in ranking.hits][:2] in (["a", "c"], ["c", "a"])
    index.close()


def test_a_broad_event_span_counts_for_its_share_of_the_date_asked() -> None:
    may = (_stamp(date(2023, 5, 1)), _stamp(date(2023, 6, 1)))  # "last month", said in June
    june20 = _stamp(date(2023, 6, 20))
    assert closeness([(2023, 5, 7)], june20, 7.0, events=[may]) == pytest.approx(1 / 31)
    assert closeness([(2023, 5, None)], june20, 7.0, events=[may]) == 1.0
    assert closeness([(2023, 5, 7)], june20, 7.0) < 0.2  # six weeks off
    day = (_stamp(date(2023, 5, 7)), _stamp(date(2023, 5, 8)))
    assert closeness([(2023, 5, 7)], june20, 7.0, events=[may, day]) == 1.0
