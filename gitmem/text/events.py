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
from dataclasses import dataclass, replace
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


# --- periods a query names ---------------------------------------------------------------

_SEASON_MONTHS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}

_CJK_SEASONS = {"春": "spring", "夏": "summer", "秋": "autumn", "冬": "winter"}

_CJK_NUMBERS = {c: n + 1 for n, c in enumerate("一二三四五六七八九十")} | {"十一": 11, "十二": 12}

# a part of a month: its first, middle or last ten days
_PARTS = {"early": (1, 11), "mid": (11, 21), "late": (21, 32)}

_CJK_PARTS = {
    "初": "early",
    "上旬": "early",
    "中旬": "mid",
    "下旬": "late",
    "底": "late",
    "末": "late",
}

_YEAR = r"(?:,?\s+(?:of\s+)?(\d{4}))?"

_EN_MONTH = (
    r"(january|february|march|april|may|june|july|august|september|october|november|december)"
)

_EARLY_LATE = re.compile(
    rf"\b(early|mid|late|(?:the\s+)?(?:beginning|start|middle|end)\s+of)[\s-]+{_EN_MONTH}{_YEAR}",
    re.IGNORECASE,
)

_SEASON = re.compile(
    r"\b(?:(?:in|during|over|through(?:out)?|this|that)\s+(?:the\s+)?"
    rf"(spring|summer|autumn|fall|winter){_YEAR}|(spring|summer|autumn|fall|winter)\s+(?:of\s+)?(\d{{4}}))\b",
    re.IGNORECASE,
)

_AROUND = re.compile(r"\bthe\s+(day|week|weekend|month)\s+(before|after)\s+", re.IGNORECASE)

_CJK_MONTH = re.compile(
    r"(?:(\d{4})年)?(十[一二]|[一二三四五六七八九十]|1[0-2]|0?[1-9])月"
    r"(?:(\d{1,2})[日号]|(初|上旬|中旬|下旬|底|末))?"
)

_CJK_SEASON = re.compile(r"(?:(\d{4})年)?的?([春夏秋冬])(?:天|季)")

# "May" alone is a month only after a preposition, capitalised ("in May"; "it may" is none)
_MAY = re.compile(r"\b(?:in|during|since|until|by|through(?:out)?)\s+May\b(?!\s*\d)")

_CJK_YEAR = re.compile(r"(\d{4})年(?!\d|[一二三四五六七八九十]+月)")


@dataclass(frozen=True)
class NamedPeriod:
    """A period a query names, its year None when the query does not say it ("in June").

    ``month`` None with no season is a whole year; ``part`` is "early", "mid" or "late"
    of a month, or a season; ``shift`` moves the period by whole ``unit``\\ s before (-1)
    or after (1) it, for "the week before 4 May"."""

    year: int | None
    month: int | None = None
    day: int | None = None
    part: str = ""
    shift: int = 0
    unit: str = ""

    def span(self, year: int, tz: tzinfo = UTC) -> Span:
        """The period in ``year`` (when the query left the year out)."""
        y = self.year if self.year is not None else year
        if self.part in _SEASON_MONTHS:
            start = _month(y, _SEASON_MONTHS[self.part], 0, tz)
            found: Span = (start, _month(y, _SEASON_MONTHS[self.part], 3, tz))
        elif self.part in _PARTS and self.month is not None:
            first, last = _PARTS[self.part]
            end = min(
                datetime(y, self.month, first, tzinfo=tz) + timedelta(days=last - first),
                _month(y, self.month, 1, tz),
            )
            found = (datetime(y, self.month, first, tzinfo=tz), end)
        else:
            found = date_span(y, self.month, self.day, datetime(y, 1, 1, tzinfo=tz))
        if not self.shift:
            return found
        if self.unit in ("week", "weekend"):
            step = timedelta(days=7)
        elif self.unit == "month":
            step = timedelta(days=30)
        else:
            step = timedelta(days=1)
        if self.shift < 0:
            return found[0] - step, found[0]
        return found[1], found[1] + step


def named_periods(text: str) -> list[NamedPeriod]:
    """The periods ``text`` names: a day ("4 May", "May 4, 2023", "6月4日"), a month with
    or without its year ("in June 2023", "in June", "2023年6月", "六月"), a year, a season
    ("during the spring", "春天"), the early, middle or late part of a month ("late June",
    "6月下旬"), "the week before X" and "as of X" (X itself). Relative phrases ("last
    week") are not periods: :func:`relative_spans` reads them."""
    found: list[NamedPeriod] = []
    rest = text
    for match in _AROUND.finditer(text):
        inner = named_periods(text[match.end() : match.end() + 40])
        if inner:
            unit, way = match.group(1).lower(), match.group(2).lower()
            found.append(replace(inner[0], shift=-1 if way == "before" else 1, unit=unit))
            rest = rest[: match.start()] + " " * (len(text) - match.start())
            break
    for pattern, read in (
        (_EARLY_LATE, _early_late),
        (_SEASON, _season),
        (_CJK_MONTH, _cjk_month),
        (_CJK_SEASON, _cjk_season),
        (_CJK_YEAR, lambda m: NamedPeriod(int(m.group(1)))),
        (_MAY, lambda m: NamedPeriod(None, 5)),
    ):
        for match in pattern.finditer(rest):
            found.append(read(match))
            rest = rest[: match.start()] + " " * (match.end() - match.start()) + rest[match.end() :]
    found.extend(
        NamedPeriod(y, m, d)
        for y, m, d in dates(rest)
        if y is not None or d is not None or m is None or _said_as_month(rest, m)
    )
    return list(dict.fromkeys(found))


def _said_as_month(text: str, month: int) -> bool:
    """A month named alone is one when capitalised or after "in", "during" and the like
    ("we march on" names none)."""
    name = datetime(2000, month, 1).strftime("%B")
    return bool(
        re.search(rf"\b{name}\b", text)
        or re.search(rf"\b(?:in|during|of|since|until|by|through(?:out)?)\s+{name}\b", text, re.I)
    )


def _early_late(match: re.Match[str]) -> NamedPeriod:
    word = match.group(1).lower().split()[-2 if " of" in match.group(1).lower() else -1]
    part = {"beginning": "early", "start": "early", "middle": "mid", "end": "late"}.get(word, word)
    year = int(match.group(3)) if match.group(3) else None
    month = datetime.strptime(match.group(2).capitalize(), "%B").month
    return NamedPeriod(year, month, part=part)


def _season(match: re.Match[str]) -> NamedPeriod:
    name = (match.group(1) or match.group(3)).lower()
    year = match.group(2) or match.group(4)
    return NamedPeriod(int(year) if year else None, part="autumn" if name == "fall" else name)


def _cjk_month(match: re.Match[str]) -> NamedPeriod:
    year, month_text, day, part = match.groups()
    month = _CJK_NUMBERS.get(month_text) or int(month_text)
    return NamedPeriod(
        int(year) if year else None,
        month,
        int(day) if day and 1 <= int(day) <= 31 else None,
        part=_CJK_PARTS.get(part or "", ""),
    )


def _cjk_season(match: re.Match[str]) -> NamedPeriod:
    year, season = match.groups()
    return NamedPeriod(int(year) if year else None, part=_CJK_SEASONS[season])


def resolve_periods(periods: Sequence[NamedPeriod], lo: float, hi: float) -> list[Span]:
    """The spans of ``periods``; a period without a year is taken in each year where it
    overlaps [lo, hi] (epoch seconds: the time the memories searched span), else in the
    year of ``hi``."""
    out: list[Span] = []
    if lo > hi:
        return out
    first, last = datetime.fromtimestamp(lo, UTC), datetime.fromtimestamp(hi, UTC)
    for period in periods:
        try:
            if period.year is not None:
                out.append(period.span(period.year))
                continue
            spans = [period.span(y) for y in range(first.year - 1, last.year + 1)]
            inside = [s for s in spans if s[0] <= last and first < s[1]]
            out.extend(inside or [period.span(last.year)])
        except (ValueError, OverflowError):
            continue
    return list(dict.fromkeys(out))


def in_period(
    spans: Sequence[tuple[float, float]],
    ts: float,
    half_life_days: float,
    events: Sequence[tuple[float, float]] = (),
) -> float:
    """1 when ``ts`` or one of the turn's event spans lies inside one of the period
    ``spans`` (epoch seconds), an event partly inside its share, halving per
    ``half_life_days`` outside."""
    return closeness((), ts, half_life_days, events=events, spans=spans)
