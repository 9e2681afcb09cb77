"""Dates a memory talks about: relative phrases resolved against when it was said.

A turn saying "yesterday" on 8 May is about 7 May, but its timestamp says 8 May. The index
resolves such phrases when it takes a turn (:func:`event_spans`: "yesterday", "last week",
"next month", "two days ago", "last Friday", "this weekend", "a few days ago", 昨天, 上周,
下个月, 去年 and the like, plus the dates the turn names, seen from the turn's timestamp) and
stores the spans per document; the ranker matches dates in a query to a document's timestamp
or its spans, and resolves relative dates in the query against now (:func:`relative_spans`).
Weeks start on Monday. Pure functions on text and datetimes; :mod:`gitmem.text` cuts the
words and finds the absolute dates.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from datetime import UTC, datetime, timedelta, tzinfo

from gitmem.text import dates, stem, terms

Span = tuple[datetime, datetime]

_COUNT_WORDS = {
    "a": (1, 1),
    "an": (1, 1),
    "one": (1, 1),
    "two": (2, 2),
    "three": (3, 3),
    "four": (4, 4),
    "five": (5, 5),
    "six": (6, 6),
    "seven": (7, 7),
    "eight": (8, 8),
    "nine": (9, 9),
    "ten": (10, 10),
    "eleven": (11, 11),
    "twelve": (12, 12),
    "couple": (2, 3),
    "few": (2, 5),
    "several": (3, 7),
}

_WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

_COUNT = (
    r"(\d{1,2}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
    r"|(?:a\s+)?(?:couple(?:\s+of)?|few)|several)"
)

_UNIT = r"(day|week|month|year)s?"

_RELATIVE = re.compile(
    "".join(
        (
            r"\b(?:(the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|yesterday"
            r"|tomorrow|last\s+night)",  # 1: a named day
            r"|(last|this\s+past|this\s+coming|this|next)\s+",  # 2: which ...
            r"(week(?:end)?|month|year|",
            "|".join(_WEEKDAY_NAMES),
            ")",  # 3: ... week, Friday
            "|",
            _COUNT,
            r"\s+",
            _UNIT,
            r"\s+(ago|from\s+now)",  # 4, 5, 6: two weeks ago
            r"|in\s+",
            _COUNT,
            r"\s+",
            _UNIT,  # 7, 8: in two weeks
            r")\b",
            # 9: the Chinese relative words
            r"|(前天|昨天|昨日|明天|后天|上个?(?:星期|礼拜|周)末?|下个?(?:星期|礼拜|周)末?"
            r"|(?:这个?|本)(?:星期|礼拜|周)末?|上个?月|下个?月|(?:这个|本)月|前年|去年|今年|明年)",
        )
    ),
    re.IGNORECASE,
)

# the terms (see :func:`terms`) of the words a relative phrase or a date cannot do without;
# text without any of them (nor a digit) names no date, which spares most text the patterns
_DATE_WORDS = """
    yesterday tomorrow last next ago day days week weeks weekend month months year years
    monday tuesday wednesday thursday friday saturday sunday january february march april
    june july august september october november december jan feb mar apr jun jul aug sep sept
    oct nov dec
"""

DATE_TERMS = frozenset(stem(word) for word in _DATE_WORDS.split()) | frozenset(
    "昨前明后上下本去今周月年"
)

_DIGIT = re.compile(r"\d")

_CJK_DAYS = {"前天": -2, "昨天": -1, "昨日": -1, "明天": 1, "后天": 2}

_CJK_YEARS = {"前年": -2, "去年": -1, "今年": 0, "明年": 1}

# the longest span an event may cover (a vaguer phrase, like "a few years ago", names none)
EVENT_SPAN_DAYS = 400


def _day(anchor: datetime, shift: int = 0) -> datetime:
    """Midnight of ``anchor``'s day (in its own time zone), ``shift`` days on."""
    midnight = datetime(anchor.year, anchor.month, anchor.day, tzinfo=anchor.tzinfo or UTC)
    return midnight + timedelta(days=shift)


def _month(year: int, month: int, shift: int = 0, tz: tzinfo | None = None) -> datetime:
    """The first of the month ``shift`` months after ``year``/``month``."""
    at = year * 12 + month - 1 + shift
    return datetime(at // 12, at % 12 + 1, 1, tzinfo=tz or UTC)


def _unit_span(anchor: datetime, unit: str, low: int, high: int) -> Span:
    """The days, weeks, months or years ``low`` to ``high`` units on from ``anchor``
    (negative: back); a week counts the seven days around the day it lands on."""
    low, high = min(low, high), max(low, high)
    if unit == "day":
        return _day(anchor, low), _day(anchor, high + 1)
    if unit == "week":
        return _day(anchor, 7 * low - 3), _day(anchor, 7 * high + 4)
    tz = anchor.tzinfo
    if unit == "month":
        return _month(anchor.year, anchor.month, low, tz), _month(
            anchor.year, anchor.month, high + 1, tz
        )
    return (
        datetime(anchor.year + low, 1, 1, tzinfo=tz or UTC),
        datetime(anchor.year + high + 1, 1, 1, tzinfo=tz or UTC),
    )


def _which(anchor: datetime, which: str, unit: str) -> Span:
    """ "last/this/next" week, weekend, month, year or weekday, seen from ``anchor``.

    Weeks start on Monday: "last week" is the week before the anchor's week, "last
    weekend" the Saturday and Sunday before the anchor's week's Saturday, "last Friday" the
    latest Friday before the anchor's day and "next Friday" the first one after it."""
    which = " ".join(which.lower().split())
    step = {"last": -1, "this past": -1, "this": 0, "this coming": 1, "next": 1}[which]
    monday = _day(anchor, -anchor.weekday())
    if unit == "week":
        return monday + timedelta(weeks=step), monday + timedelta(weeks=step + 1)
    if unit == "weekend":
        saturday = monday + timedelta(days=5 + 7 * step)
        return saturday, saturday + timedelta(days=2)
    if unit in _WEEKDAY_NAMES:
        wanted = _WEEKDAY_NAMES.index(unit)
        if step == 0:
            start = monday + timedelta(days=wanted)
        elif step < 0:
            start = _day(anchor, -((anchor.weekday() - wanted) % 7 or 7))
        else:
            start = _day(anchor, (wanted - anchor.weekday()) % 7 or 7)
        return start, start + timedelta(days=1)
    return _unit_span(anchor, unit, step, step)


def _cjk_span(anchor: datetime, phrase: str) -> Span:
    if phrase in _CJK_DAYS:
        return _unit_span(anchor, "day", _CJK_DAYS[phrase], _CJK_DAYS[phrase])
    if phrase in _CJK_YEARS:
        return _unit_span(anchor, "year", _CJK_YEARS[phrase], _CJK_YEARS[phrase])
    which = {"上": "last", "下": "next"}.get(phrase[0], "this")
    if phrase.endswith("月"):
        return _which(anchor, which, "month")
    return _which(anchor, which, "weekend" if phrase.endswith("末") else "week")


def relative_spans(text: str, anchor: datetime) -> list[Span]:
    """The time spans that relative phrases in ``text`` name, seen from ``anchor`` (the
    time the text was written; naive means UTC): "yesterday", "last week", "next month",
    "two days ago", "a few weeks ago", "in three days", "last Friday", "this weekend",
    and 昨天, 上周, 下个月, 去年 and the like. Each span is [start, end), whole days in
    ``anchor``'s time zone, in the order the phrases appear."""
    if anchor.tzinfo is None:
        anchor = anchor.replace(tzinfo=UTC)
    out: list[Span] = []
    for match in _RELATIVE.finditer(text):
        try:
            out.append(_relative_span(anchor, *match.groups()))
        except (ValueError, OverflowError):  # before year 1 or after 9999
            continue
    return out


def relative_phrases(text: str, anchor: datetime) -> list[tuple[int, int, Span]]:
    """Where each relative phrase of ``text`` stands (start, end offsets) and the span it
    names seen from ``anchor``: what :func:`relative_spans` finds, with its place, so a
    restated sentence can put the date in place of "yesterday"."""
    if anchor.tzinfo is None:
        anchor = anchor.replace(tzinfo=UTC)
    out: list[tuple[int, int, Span]] = []
    for match in _RELATIVE.finditer(text):
        try:
            out.append((match.start(), match.end(), _relative_span(anchor, *match.groups())))
        except (ValueError, OverflowError):
            continue
    return out


def span_label(span: Span) -> str:
    """A span as a person writes it: "7 May 2023", "the week of 1 May 2023", "May 2023",
    "2022" (the start's day, month or year; anything else as "1-5 May 2023")."""
    start, end = span
    days = (end - start).days
    if days <= 1:
        return f"{start.day} {start:%B %Y}"
    if days <= 3 and start.weekday() == 5:
        return f"the weekend of {start.day} {start:%B %Y}"
    if days == 7 and start.weekday() == 0:
        return f"the week of {start.day} {start:%B %Y}"
    if start.day == 1 and end.day == 1 and 28 <= days <= 31:
        return f"{start:%B %Y}"
    if start.month == 1 and start.day == 1 and 365 <= days <= 366:
        return str(start.year)
    last = end - timedelta(days=1)
    if (start.year, start.month) == (last.year, last.month):
        return f"{start.day}-{last.day} {start:%B %Y}"
    return f"{start.day} {start:%B %Y} - {last.day} {last:%B %Y}"


def _relative_span(
    anchor: datetime,
    day: str | None,
    which: str | None,
    unit: str | None,
    count: str | None,
    n_unit: str | None,
    way: str | None,
    in_count: str | None,
    in_unit: str | None,
    cjk: str | None,
) -> Span:
    """The span of one match of :data:`_RELATIVE` (its groups, in order)."""
    if day:
        name = " ".join(day.lower().split())
        shift = {"the day before yesterday": -2, "the day after tomorrow": 2, "tomorrow": 1}.get(
            name, -1
        )
        return _unit_span(anchor, "day", shift, shift)
    if which and unit:
        return _which(anchor, which, unit.lower())
    amount_text, unit_text = (count, n_unit) if count else (in_count, in_unit)
    if amount_text and unit_text:
        amount = amount_text.lower().split()[-1]
        if amount == "of":
            amount = "couple"
        low, high = _COUNT_WORDS.get(amount) or (int(amount), int(amount))
        sign = -1 if way and way.lower() == "ago" else 1
        return _unit_span(anchor, unit_text.lower(), sign * low, sign * high)
    return _cjk_span(anchor, cjk or "")


def date_span(year: int | None, month: int | None, day: int | None, anchor: datetime) -> Span:
    """The time span a (possibly partial) date names, missing parts taken from ``anchor``:
    a day, a month ("in June": June of the anchor's year) or a year."""
    tz = anchor.tzinfo or UTC
    y = year if year is not None else anchor.year
    if month is None:
        return datetime(y, 1, 1, tzinfo=tz), datetime(y + 1, 1, 1, tzinfo=tz)
    if day is None:
        return _month(y, month, 0, tz), _month(y, month, 1, tz)
    try:
        start = datetime(y, month, day, tzinfo=tz)
    except ValueError:  # 30 February: the month's first day
        start = datetime(y, month, 1, tzinfo=tz)
    return start, start + timedelta(days=1)


def event_spans(
    text: str, anchor: datetime, text_terms: Collection[str] | None = None, limit: int = 8
) -> list[Span]:
    """The time spans a memory written at ``anchor`` talks about: its relative phrases
    (:func:`relative_spans`) and the dates it names (:func:`dates`, missing parts from
    ``anchor``), each at most :data:`EVENT_SPAN_DAYS` long, without repeats, at most
    ``limit`` of them. ``text_terms`` (the :func:`terms` of ``text``, when known) makes
    the test for text that names no date quicker."""
    if text_terms is None:
        text_terms = set(terms(text))
    if DATE_TERMS.isdisjoint(text_terms) and _DIGIT.search(text) is None:
        return []
    if anchor.tzinfo is None:
        anchor = anchor.replace(tzinfo=UTC)
    found = relative_spans(text, anchor)
    for year, month, day in dates(text):
        try:
            found.append(date_span(year, month, day, anchor))
        except (ValueError, OverflowError):  # "in December" said in the year 9999
            continue
    longest = timedelta(days=EVENT_SPAN_DAYS)
    return list(dict.fromkeys(s for s in found if s[1] - s[0] <= longest))[:limit]


def closeness(
    named: Sequence[tuple[int | None, int | None, int | None]],
    ts: float,
    half_life_days: float,
    *,
    events: Sequence[tuple[float, float]] = (),
    spans: Sequence[tuple[float, float]] = (),
) -> float:
    """1 when ``ts`` falls inside one of the named dates or query ``spans`` (epoch seconds
    [start, end)), halving per ``half_life_days`` off. One of the document's ``events``
    spans counts too: the share of it inside (a turn about "last month" is only partly
    about one day of it). A named date's missing parts come from the time it is held
    against ("in June": June of that year)."""
    best = 0.0
    for lo, hi in ((ts, ts), *events):
        at = datetime.fromtimestamp(lo, UTC)
        windows = [
            (s.timestamp(), e.timestamp()) for s, e in (date_span(y, m, d, at) for y, m, d in named)
        ]
        for start, end in (*windows, *spans):
            if start <= lo < end and hi <= end:
                return 1.0
            if lo < end and start < hi:  # an event span partly inside
                best = max(best, (min(hi, end) - max(lo, start)) / (hi - lo))
                continue
            off = start - hi if hi <= start else lo - end
            best = max(best, 0.5 ** (off / 86400 / half_life_days))
    return best
