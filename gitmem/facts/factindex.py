"""Which facts of one version of the memory file matter for a query: the terms of every
fact, their idf scores, and the facts a context takes (pinned first, then the query's
matches, then those learned from the session at hand)."""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

from gitmem.format.facts import Fact
from gitmem.text import terms

# the tag of a fact that comes first in every context
PINNED_TAG = "pinned"


@dataclass(frozen=True)
class WeighedFact:
    """A current fact weighed for a context: its score for the query (0: no match), the
    query's terms it shares, and whether it is pinned or learned from the session at hand."""

    fact_id: str
    text: str
    score: float
    matched: tuple[str, ...] = ()
    pinned: bool = False
    from_session: bool = False


class FactIndex:
    """Terms of every fact of one version of the file, for ``facts(query=...)``."""

    def __init__(
        self, facts: Sequence[Fact], seen: dict[str, frozenset[str]] | None = None
    ) -> None:
        """``seen`` maps a fact's words to their terms (kept by the manager across versions,
        so the index of a file one change away analyses only the changed facts)."""
        self.facts = facts
        self.live: list[int] | None = None  # positions of the current facts
        self.alive: frozenset[int] = frozenset()
        self.pinned: list[int] = []  # of the current facts
        self.by_session: dict[str, list[int]] = {}  # of the current facts, by source
        self.postings: dict[str, list[int]] = {}
        known = {} if seen is None else seen
        if len(known) > 2 * len(facts) + 1024:
            known.clear()
        for at, fact in enumerate(facts):
            words = f"{fact.text} {' '.join(fact.tags)} {fact.section}"
            found = known.get(words)
            if found is None:
                found = known[words] = frozenset(terms(words))
            for term in found:
                self.postings.setdefault(term, []).append(at)

    def rank(self, query: str) -> list[tuple[float, Fact]]:
        scores: dict[int, float] = {}
        total = len(self.facts) or 1
        for term in set(terms(query)):
            hits = self.postings.get(term, ())
            weight = math.log(1 + total / len(hits)) if hits else 0.0
            for at in hits:
                scores[at] = scores.get(at, 0.0) + weight
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
        return [(score, self.facts[at]) for at, score in ranked if score > 0]

    def _current(self) -> None:
        """The positions of the current facts, the pinned ones and each session's (once
        per file version)."""
        if self.live is not None:
            return
        self.live = [at for at, fact in enumerate(self.facts) if fact.current()]
        self.alive = frozenset(self.live)
        for at in self.live:
            fact = self.facts[at]
            if PINNED_TAG in fact.tags:
                self.pinned.append(at)
            for session in dict.fromkeys(s.session for s in fact.sources):
                self.by_session.setdefault(session, []).append(at)

    def _matches(self, query: str) -> dict[int, tuple[float, list[str]]]:
        """Each current fact that shares a term with ``query``: its score (the terms' idf,
        as search weighs a fact) and those terms."""
        self._current()
        found: dict[int, tuple[float, list[str]]] = {}
        total = len(self.facts) or 1
        for term in sorted(set(terms(query))):
            hits = self.postings.get(term, ())
            weight = math.log(1 + total / len(hits)) if hits else 0.0
            for at in hits:
                if at in self.alive:
                    score, shared = found.get(at, (0.0, []))
                    found[at] = (score + weight, [*shared, term])
        return found

    def candidates(self, query: str, limit: int) -> list[tuple[str, str, float]]:
        """Current facts (id, text, score): the query's matches best first, then the others
        in file order with score 0; at most ``limit``."""
        scores = {at: score for at, (score, _) in self._matches(query).items()}
        best = heapq.nsmallest(limit, scores.items(), key=lambda kv: (-kv[1], kv[0]))
        out = [(self.facts[at].id, self.facts[at].text, score) for at, score in best]
        for at in self.live or ():
            if len(out) >= limit:
                break
            if at not in scores:
                out.append((self.facts[at].id, self.facts[at].text, 0.0))
        return out

    def weigh(self, query: str, session_id: str, limit: int) -> tuple[list[WeighedFact], bool]:
        """At most ``limit`` current facts, those that matter first: the pinned ones, the
        query's matches best first, then the others learned from ``session_id`` (newest
        first), then the rest in file order (score 0, to say why they stay out). And
        whether that is every current fact."""
        found = self._matches(query)
        best = heapq.nsmallest(limit, found.items(), key=lambda kv: (-kv[1][0], kv[0]))
        session = self.by_session.get(session_id, []) if session_id else []
        pinned = sorted(self.pinned, key=lambda at: (-found.get(at, (0.0,))[0], at))
        order = dict.fromkeys([*pinned, *(at for at, _ in best), *reversed(session)])
        for at in self.live or ():  # the others, only as many as there is room for
            if len(order) >= limit:
                break
            order.setdefault(at)
        mine = frozenset(session)
        out = []
        for at in list(order)[:limit]:
            fact = self.facts[at]
            score, shared = found.get(at, (0.0, []))
            out.append(
                WeighedFact(
                    fact.id,
                    fact.text,
                    score,
                    tuple(shared),
                    pinned=PINNED_TAG in fact.tags,
                    from_session=at in mine,
                )
            )
        return out, len(out) == len(self.live or ())
