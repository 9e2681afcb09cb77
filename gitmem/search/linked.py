"""Following the links between sessions for a search's ``include_links``, both ways.

A session links to another with its metadata ``links`` or with ``[[id]]`` in a turn or its
summary (the index keeps both with each session row: :mod:`.sessionrows`, so nothing here
reads a text to find a link). For the sessions of a search's hits this module finds the
sessions they link to (``out``) and the sessions that link to them (``in``, backlinks),
and pulls from each linked session its summary or, when it has none, its turns that best
match the query (ranked within that session only).

Linked hits come after the ranked hits, in the order of the hit that led to them, never
repeat a hit's session, and say where they came from: ``components`` has ``link`` (the
share of the leading hit's score they carry) and ``link_out`` or ``link_in`` (1.0), and
:attr:`Followed.edges` lists every link seen as ``{from, to, direction, pulled}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gitmem.models import Hit
from gitmem.search.index import KIND_SUMMARY, SearchIndex
from gitmem.search.rank import Filters, Ranker, Ranking, snippet
from gitmem.search.rankconfig import RankConfig

# a linked hit's score: this share of the score of the hit that led to it
LINK_WEIGHT = 0.5
# a linked session without a summary gives at most this many of its best-matching turns
TURNS_PER_SESSION = 2


@dataclass
class Linked:
    """One memory pulled through a link: its hit and its whole text (for a context)."""

    hit: Hit
    text: str


@dataclass
class Followed:
    """What following the links gave: the linked memories, best lead first, and every
    link seen (``pulled``: summary, turn, nothing matched, already a hit, no such
    session, or over the limit)."""

    linked: list[Linked] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)


def follow_links(
    index: SearchIndex,
    config: RankConfig,
    ranking: Ranking,
    hits: Sequence[Hit],
    limit: int,
    head: str | None = None,
) -> Followed:
    """The sessions linked to or from the sessions of ``hits`` (at most ``limit`` of
    them), each as its summary or its best turns for the ranking's query."""
    lead: dict[str, float] = {}  # a hit's session -> its best score
    for hit in hits:
        if hit.session_id:
            lead[hit.session_id] = max(lead.get(hit.session_id, 0.0), hit.score)
    order = sorted(lead, key=lambda sid: -lead[sid])
    out_links, in_links = index.links_from(order), index.links_to(order)
    # the linked sessions, in the order of their lead: (linked session, direction, edge)
    found: list[tuple[str, str, dict[str, Any]]] = []
    for source in order:
        found += [
            (t, "out", {"from": source, "to": t, "direction": "out"})
            for t in out_links.get(source, [])
            if t != source
        ]
        found += [
            (s, "in", {"from": s, "to": source, "direction": "in"})
            for s in in_links.get(source, [])
            if s != source
        ]
    # a link between two hits' sessions is seen from both ends: keep it once
    once: dict[tuple[str, str], tuple[str, str, dict[str, Any]]] = {}
    for item in found:
        once.setdefault((item[2]["from"], item[2]["to"]), item)
    found = list(once.values())
    exists = index.present(list({item[0] for item in found}))
    wanted: dict[str, tuple[float, set[str]]] = {}  # linked session -> (lead score, ways)
    for linked, direction, edge in found:
        if linked in lead:
            edge["pulled"] = "already a hit"
        elif linked not in exists:
            edge["pulled"] = "no such session"
        elif linked not in wanted and len(wanted) >= limit:
            edge["pulled"] = "over the limit"
        else:
            lead_score = lead[edge["to"] if direction == "in" else edge["from"]]
            score, ways = wanted.get(linked, (lead_score, set()))
            wanted[linked] = (max(score, lead_score), ways | {direction})
    pulled = _pull(index, config, ranking, wanted, head)
    for linked, _direction, edge in found:
        if "pulled" not in edge:
            edge["pulled"] = pulled[linked][0]
    return Followed(
        [item for sid in wanted for item in pulled[sid][1]], [edge for _, _, edge in found]
    )


def _pull(
    index: SearchIndex,
    config: RankConfig,
    first: Ranking,
    wanted: dict[str, tuple[float, set[str]]],
    head: str | None,
) -> dict[str, tuple[str, list[Linked]]]:
    """What each wanted session gives: ("summary" | "turn" | "nothing matched", memories)."""
    out: dict[str, tuple[str, list[Linked]]] = {}
    bare: list[str] = []  # sessions without a summary
    for sid, (score, ways) in wanted.items():
        rows = {row.skey: row for row in index.sessions_by_id(sid)}
        docs = index.session_docs(rows, kind=KIND_SUMMARY)
        if not docs:
            bare.append(sid)
            continue
        memories = []
        for doc in docs:
            hit = Hit(
                session_id=sid,
                score=round(score * LINK_WEIGHT, 6),
                snippet=snippet(doc.text, first.terms, config.cutoff.snippet_chars),
                commit=rows[doc.skey].commit or head,
                kind="summary",
                timestamp=datetime.fromtimestamp(doc.ts, UTC),
                components=_marks(ways),
            )
            memories.append(Linked(hit, doc.text))
        out[sid] = ("summary", memories)
    if bare:
        ranking = Ranker(index, config).rank(
            first.query, TURNS_PER_SESSION * len(bare) * 4, Filters(sessions=tuple(bare)), head=head
        )
        # a turn that holds none of the query's terms (lifted only by its neighbours or
        # its session) is no match of its own
        wanted_terms = set(ranking.terms) | set(ranking.expansion)
        texts = {
            (c.session.session_id, c.doc.iid): c.doc.text
            for c in ranking.candidates
            if wanted_terms.intersection(c.doc.terms.split())
        }
        for sid in bare:
            score, ways = wanted[sid]
            best = [
                h for h in ranking.hits if h.session_id == sid and (sid, h.interaction_id) in texts
            ]
            best = best[:TURNS_PER_SESSION]
            out[sid] = (
                "turn" if best else "nothing matched",
                [
                    Linked(
                        h.model_copy(
                            update={
                                "score": round(score * LINK_WEIGHT, 6),
                                "components": _marks(ways) | {"match": round(h.score, 4)},
                            }
                        ),
                        texts[(sid, h.interaction_id)],
                    )
                    for h in best
                ],
            )
    return out


def _marks(ways: set[str]) -> dict[str, float]:
    return {"link": LINK_WEIGHT} | {f"link_{way}": 1.0 for way in sorted(ways)}
