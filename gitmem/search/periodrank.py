"""Time in ranking: the dates and periods a query names, the turns said in or about them,
and how much a turn's time counts.

- ``temporal`` (:class:`~gitmem.search.rankconfig.DateConfig`): a query naming a date
  ("in July 2023") or a relative one ("last week", seen from now) prefers turns from then;
  the turns of a date with a year, and those talking about it (event spans: "yesterday"
  said the day after), join the candidates.
- ``period`` (:class:`~gitmem.search.rankconfig.PeriodConfig`): a query naming a period
  ("in June 2023", "during the spring", "六月") decides: a month without a year is taken in
  the years the memories searched span, the turns said within or about the period join
  the candidates, and every score is multiplied by how far the turn lies from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from gitmem.search.index import KIND_INTERACTION, DocRow, SearchIndex
from gitmem.search.rankconfig import RankConfig
from gitmem.text import dates
from gitmem.text.events import (
    closeness,
    date_span,
    in_period,
    named_periods,
    relative_spans,
    resolve_periods,
)

# epoch seconds [start, end)
Span = tuple[float, float]

# document id -> (session key, position, kind)
Places = dict[int, tuple[int, int, int]]


@dataclass
class QueryTimes:
    """What one query says about time (empty when the config turns that part off)."""

    # the dates named, as (year, month, day) with unknown parts None
    dates: list[tuple[int | None, int | None, int | None]] = field(default_factory=list)
    # the relative dates named ("last week"), seen from now
    spans: list[Span] = field(default_factory=list)
    # the periods named, resolved against the memories searched
    periods: list[Span] = field(default_factory=list)
    # the turns said within the periods or talking about them (see :meth:`PeriodRanker.turns`)
    in_periods: set[int] = field(default_factory=set)

    @property
    def dated(self) -> bool:
        return bool(self.dates or self.spans)


class PeriodRanker:
    """The time parts of a ranking over one index (see the module docs)."""

    def __init__(self, index: SearchIndex, config: RankConfig) -> None:
        self.index = index
        self.config = config

    def read(self, text: str, allowed: set[int] | None, now: datetime | None) -> QueryTimes:
        """The dates, relative dates and periods ``text`` names; ``allowed``: the sessions
        searched (None: all)."""
        cfg = self.config
        times = QueryTimes()
        if cfg.dates.temporal_weight:
            times.dates = dates(text)
            times.spans = [
                (a.timestamp(), b.timestamp())
                for a, b in relative_spans(text, now or datetime.now(UTC))
            ]
        if cfg.period.period_weight:
            times.periods = self._periods(text, allowed)
        return times

    def turns(self, times: QueryTimes, allowed: set[int] | None, where: Places) -> set[int]:
        """The candidates time adds: the turns of the dates (with a year) named and those
        talking about them, then the turns said within or about the periods named (these
        go to ``times.in_periods``); all added to ``where``."""
        out = self._dated(times, allowed, where)
        times.in_periods = self._period_turns(times.periods, allowed, where)
        return out | times.in_periods

    def pre_factor(self, times: QueryTimes, doc_id: int) -> float:
        """What a named period makes of the score that chooses which documents go on."""
        if not times.periods or doc_id in times.in_periods:
            return 1.0
        return 1 - self.config.period.period_weight

    def temporal(self, times: QueryTimes, row: DocRow) -> float | None:
        """The ``temporal`` component of a turn (None: the query names no date)."""
        if not times.dated:
            return None
        cfg = self.config.dates
        return cfg.temporal_weight * closeness(
            times.dates,
            row.ts,
            cfg.temporal_half_life_days,
            events=row.events,
            spans=times.spans,
        )

    def period(self, times: QueryTimes, row: DocRow) -> float | None:
        """The ``period`` multiplier of a turn (None: the query names no period)."""
        if not times.periods:
            return None
        cfg = self.config.period
        overlap = in_period(times.periods, row.ts, cfg.period_half_life_days, row.events)
        return 1 - cfg.period_weight * (1 - overlap)

    # --- candidates --------------------------------------------------------------------

    def _dated(self, times: QueryTimes, allowed: set[int] | None, where: Places) -> set[int]:
        """Turns from the dates (with a year) named, and turns that talk about them."""
        cfg = self.config.dates
        if not (cfg.date_pool or cfg.event_pool):
            return set()
        out: set[int] = set()
        windows = [
            (start.timestamp(), end.timestamp())
            for start, end in (
                date_span(year, month, day, datetime.now(UTC))
                for year, month, day in times.dates
                if year is not None
            )
        ]
        for lo, hi in windows + times.spans:
            if cfg.date_pool:
                keys = self.index.session_keys(active_since=lo, created_until=hi)
                if allowed is not None:
                    keys &= allowed
                rows = [
                    d
                    for d in self.index.session_docs(
                        sorted(keys)[:50], kind=KIND_INTERACTION, text=False
                    )
                    if lo <= d.ts < hi
                ]
                for d in rows[: cfg.date_pool]:
                    where.setdefault(d.id, (d.skey, d.pos, d.kind))
                    out.add(d.id)
            if cfg.event_pool:
                out |= self._about(lo, hi, cfg.event_pool, allowed, where)
        return out

    def _periods(self, text: str, allowed: set[int] | None) -> list[Span]:
        """The spans of the periods the query names; one without a year is taken in the
        years the memories searched span (the allowed sessions', else the whole index's)."""
        periods = named_periods(text)
        if not periods:
            return []
        lo, hi = self.index.time_span()
        if allowed is not None:
            rows = self.index.sessions(allowed).values()
            times = [t for r in rows for t in (r.created, r.last_active) if t is not None]
            if times:
                lo, hi = min(times), max(times)
        if lo > hi:
            return []
        return [(a.timestamp(), b.timestamp()) for a, b in resolve_periods(periods, lo, hi)]

    def _period_turns(self, spans: list[Span], allowed: set[int] | None, where: Places) -> set[int]:
        """The turns said within the named periods, and those talking about them."""
        limit = self.config.period.period_pool
        out: set[int] = set()
        for lo, hi in spans:
            keys = self.index.session_keys(active_since=lo, created_until=hi)
            if allowed is not None:
                keys &= allowed
            said = [
                d
                for d in self.index.session_docs(sorted(keys), kind=KIND_INTERACTION, text=False)
                if lo <= d.ts < hi
            ]
            for d in said[:limit]:
                where.setdefault(d.id, (d.skey, d.pos, d.kind))
                out.add(d.id)
            out |= self._about(lo, hi, limit, allowed, where)
        return out

    def _about(
        self, lo: float, hi: float, limit: int, allowed: set[int] | None, where: Places
    ) -> set[int]:
        """At most ``limit`` turns whose event spans overlap [lo, hi) (a few more are read:
        the filters may leave some out)."""
        found = self.index.event_docs(lo, hi, limit * (1 if allowed is None else 4))
        kept = [i for i, place in found.items() if allowed is None or place[0] in allowed]
        for doc_id in kept[:limit]:
            where.setdefault(doc_id, found[doc_id])
        return set(kept[:limit])
