"""The speaker part of the ranking (:mod:`gitmem.search.rank`): which people who spoke a
query names, their newest turns as candidates, and the lift each of their turns gets.

A name is weighed like any query term (its share of the best score the query could
reach). A turn that only the name found, no other word of the query, gets that lift
scaled by the share of the documents the person does not speak in: someone who speaks in
most turns (both people of a two-person chat, ``user`` in an assistant's store) says
little about which turn is meant, so their name does not fill the hits with whatever they
said. A query of names only ("Bob") keeps it whole: it asks for what Bob said. With no
query at all, the speaker filter lists a person's newest turns (:func:`newest_turns`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from gitmem.search.index import DocRow, SearchIndex, SessionRow
from gitmem.search.speakerrows import spoke
from gitmem.text import name_terms, terms


@dataclass(frozen=True)
class NamedSpeakers:
    """The people who spoke whom one query names."""

    # query term -> the share of the documents the people it names do not speak in
    rarity: dict[str, float] = field(default_factory=dict)
    # those people's names as written
    people: tuple[str, ...] = ()
    # the query is only such names (words the index lacks count too: "in July 2023" asks
    # for a time): it asks for what they said, newest first
    names_only: bool = False

    @classmethod
    def find(
        cls, index: SearchIndex, weights: dict[str, float], text: str, n_docs: int
    ) -> NamedSpeakers:
        """The query terms (``weights``) that name people who spoke in the index."""
        spoken: Counter[str] = Counter()
        people: list[str] = []
        for name, count in index.speakers().items():
            asked = name_terms(name) & weights.keys()
            if asked:
                people.append(name)
            for term in asked:
                spoken[term] += count
        if not spoken:
            return cls()
        rarity = {t: 1 - min(n / max(n_docs, 1), 1.0) for t, n in spoken.items()}
        return cls(rarity, tuple(people), set(terms(text)) <= rarity.keys())

    def turns(
        self,
        index: SearchIndex,
        limit: int,
        allowed: set[int] | None,
        where: dict[int, tuple[int, int, int]],
        lo: float,
        hi: float,
    ) -> set[int]:
        """Their newest turns (at most ``limit``) of the ``allowed`` sessions, said from
        ``lo`` to ``hi``; each one's (session key, position, kind) goes into ``where``."""
        if not (self.people and limit):
            return set()
        found = index.spoken_turns(self.people, limit, allowed=allowed, lo=lo, hi=hi)
        for doc_id, place in found.items():
            where.setdefault(doc_id, place)
        return set(found)

    def lifts(
        self,
        speakers: dict[int, str],
        by_name: Iterable[int],
        weights: dict[str, float],
        idf: dict[str, float],
        scale: float,
    ) -> dict[int, float]:
        """The lift of each document (doc id -> its speaker column) one of these people
        spoke in; ``by_name``: the turns that only the name found; ``scale``: the speaker
        weight over the query's ideal score."""
        only_named = set(by_name)
        out: dict[int, float] = {}
        for doc_id, speaker in speakers.items():
            asked = name_terms(speaker) & self.rarity.keys()
            if not asked:
                continue
            whole = self.names_only or doc_id not in only_named
            out[doc_id] = scale * sum(
                weights[t] * idf[t] * (1.0 if whole else self.rarity[t]) for t in asked
            )
        return out


def newest_turns(
    index: SearchIndex,
    speakers: tuple[str, ...],
    k: int,
    allowed: set[int] | None,
    lo: float,
    hi: float,
) -> list[tuple[DocRow, SessionRow]]:
    """The newest turns (at most ``k``, newest first) in which each of these people spoke,
    of the ``allowed`` sessions, said from ``lo`` to ``hi``; with their session rows."""
    # the turns of the first person; the others are checked on each turn
    wanted = k if len(speakers) == 1 else k * 4
    found = index.spoken_turns(speakers[:1], wanted, allowed=allowed, lo=lo, hi=hi)
    rows = index.docs(found)
    sessions = index.sessions({row.skey for row in rows.values()})
    out = [
        (row, sessions[row.skey])
        for doc_id in found
        if (row := rows.get(doc_id)) is not None
        and row.skey in sessions
        and spoke(row.speaker, speakers)
    ]
    return out[:k]
