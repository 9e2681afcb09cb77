"""``Search``: search, context assembly and the index, for ``MemoryManager``.

Saves never touch the index: it lives under ``.git/gitmem/`` and catches up lazily, on
the next search, from whatever the store's HEAD is by then (another process, a pull, a
hand commit). A broken index file therefore cannot break a save; the next search finds it
unusable, rebuilds it and answers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from gitmem.core import SessionFilter, SessionStore
from gitmem.errors import ParseError, ValidationError
from gitmem.facts.factindex import WeighedFact
from gitmem.facts.methods import Facts
from gitmem.format.paths import session_dir
from gitmem.models import Hit, SessionInfo, as_when
from gitmem.search.browse import (
    PREVIEW_CHARS,
    LinkGraph,
    SessionListing,
    SessionPage,
    graph,
    listing,
)
from gitmem.search.catchup import ProgressCallback, StoreIndex, SyncReport
from gitmem.search.context import Memory, assemble
from gitmem.search.fusion import Dense
from gitmem.search.index import KIND_SUMMARY, SearchIndex
from gitmem.search.linked import Followed, follow_links
from gitmem.search.rank import SHOWN_CANDIDATES, Filters, Ranker, Ranking, snippet
from gitmem.search.rankconfig import RankConfig
from gitmem.search.rerank import TIMEOUT as RERANK_TIMEOUT
from gitmem.search.rerank import Reranked
from gitmem.search.rerank import rerank as rerank_memories
from gitmem.search.sessionrows import SessionRowFilter
from gitmem.search.tokens import TokenCounter, default_counter
from gitmem.summary.methods import Summaries
from gitmem.text import one_line

# how many explain rows a search shows
EXPLAIN_ROWS = SHOWN_CANDIDATES

# a memory longer than this goes into the context shortened
MEMORY_CHARS = 1200

# the curated facts' share of a context's budget, and how many are weighed at most
FACTS_SHARE = 0.3
MAX_FACTS = 500
SEARCH_KINDS = (None, "session", "fact", "any")


class Hits(list[Hit]):
    """The hits of a search, best first, plus ``notes`` (why the list may be empty) and,
    when asked for, ``explanation`` (every candidate and its score components)."""

    def __init__(self, hits: Iterable[Hit] = (), notes: Sequence[str] = ()) -> None:
        super().__init__(hits)
        self.notes: list[str] = list(notes)
        self.explanation: dict[str, Any] | None = None


class ContextMessages(list[dict[str, str]]):
    """Chat messages for the ``openai`` client; ``explanation`` when asked for."""

    def __init__(self, messages: Iterable[dict[str, str]] = ()) -> None:
        super().__init__(messages)
        self.explanation: dict[str, Any] | None = None


def _stamp(value: datetime | str | None, name: str) -> datetime | None:
    return as_when(value, name)


def _explain_ranking(
    ranking: Ranking, config: RankConfig, filters: Filters, kept: set[tuple[str, str | None]]
) -> dict[str, Any]:
    rows = []
    for at, cand in enumerate(ranking.candidates[:EXPLAIN_ROWS], 1):
        ref = (cand.session.session_id, cand.doc.iid)
        status = (
            "hit"
            if ref in kept
            else ("below min_score" if cand.score < config.cutoff.min_score else "beyond k")
        )
        rows.append(
            {
                "rank": at,
                "session_id": cand.session.session_id,
                "interaction_id": cand.doc.iid,
                "kind": "summary" if cand.doc.kind == KIND_SUMMARY else "interaction",
                "score": round(cand.score, 4),
                "status": status,
                "components": {k: round(v, 4) for k, v in cand.components.items()},
                "snippet": snippet(cand.doc.text, ranking.terms, 120),
            }
        )
    query = ranking.query if len(ranking.query) <= 200 else ranking.query[:200] + "…"
    return {
        "query": query,
        "terms": {t: round(w, 3) for t, w in ranking.terms.items()},
        "corrections": ranking.corrections,
        "expansion": {t: round(w, 3) for t, w in ranking.expansion.items()},
        "hop_terms": sorted(ranking.hop_terms),
        "filters": {
            k: v
            for k, v in {
                "tags": list(filters.tags),
                "project": filters.project,
                "participants": list(filters.participants),
                "speakers": list(filters.speakers),
                "sessions": list(filters.sessions),
                "since": filters.since.isoformat() if filters.since else None,
                "until": filters.until.isoformat() if filters.until else None,
            }.items()
            if v
        },
        "min_score": config.cutoff.min_score,
        "candidates_scored": len(ranking.candidates),
        "below_min_score": ranking.below_min,
        "candidates": rows,
        "notes": ranking.notes,
    }


def _memories(ranking: Ranking, session_id: str, recent: set[str], limit: int) -> list[Memory]:
    """The ranking's hits as context memories, at most ``limit``: not the current session's
    recent turns nor its own summary (those are in the context already)."""
    by_ref = {(c.session.session_id, c.doc.iid): c for c in ranking.candidates}
    memories: list[Memory] = []
    for hit in ranking.hits:
        same = hit.session_id == session_id
        if same and (hit.interaction_id in recent or hit.kind == "summary"):
            continue
        text = by_ref[(hit.session_id, hit.interaction_id)].doc.text
        if len(text) > MEMORY_CHARS:
            text = text[:MEMORY_CHARS] + "…"
        memories.append(
            Memory(
                hit.session_id,
                hit.interaction_id,
                hit.kind,
                hit.timestamp,
                text,
                hit.score,
                same,
                _relevance(hit, same),
            )
        )
        if len(memories) >= limit:
            break
    return memories


# score components that scale the sum rather than add to it
_FACTORS = frozenset({"decay", "activation"})


def _relevance(hit: Hit, same_session: bool) -> str:
    """Why a retrieved memory comes: its score for the query and what made most of it."""
    where = "earlier in this session" if same_session else "another session"
    parts = sorted(
        ((v, k) for k, v in hit.components.items() if v > 0 and k not in _FACTORS), reverse=True
    )[:3]
    made = ", ".join(f"{k} {v:.2f}" for v, k in parts)
    return f"{where}, relevant to the query: score {hit.score:.2f}" + (f" ({made})" if made else "")


def _graph_copy(kept: LinkGraph) -> LinkGraph:
    """A copy of a kept graph the caller may change (already validated: not again)."""
    links = {source: list(targets) for source, targets in kept.links.items()}
    return LinkGraph.model_construct(links=links, missing=list(kept.missing), commit=kept.commit)


class Search:
    """Search and context assembly for ``MemoryManager``.

    Set ``rank_config`` (a :class:`~gitmem.search.rankconfig.RankConfig`) to change weights and
    ``token_counter`` to count tokens with your model's tokenizer.
    """

    def __init__(self, store: SessionStore, summaries: Summaries, facts: Facts) -> None:
        self.store = store
        self.summaries = summaries  # the embedding model and the LLM the reranker asks
        self.facts = facts  # curated facts are candidates too
        self.rank_config = RankConfig()
        self.token_counter: TokenCounter | None = None
        self._index: StoreIndex | None = None  # opened on first use
        self._index_lock = threading.Lock()
        # the last link graph, under the state of the index it was read from
        self._last_graph: tuple[object, LinkGraph | None] = (None, None)
        self._dense = Dense(self._store_index, self.summaries.embed)  # optional embeddings

    # --- the index -------------------------------------------------------------------

    def _store_index(self) -> StoreIndex:
        found = self._index
        if found is None:
            with self._index_lock:
                found = self._index
                if found is None:
                    found = self._index = StoreIndex(self.store.repo, self.store.namespace)
        return found

    def reindex(self, progress: ProgressCallback | None = None) -> SyncReport:
        """Rebuild the search index from the store's HEAD.

        Never needed for correctness (search catches up by itself); useful after a crash
        of the disk or to see how long a rebuild takes. ``progress(done, total)`` is called
        after each session file.
        """
        return self._store_index().reindex(progress)

    def embed_pending(self, progress: ProgressCallback | None = None) -> int:
        """Embed every memory that has no vector of the configured embedding model yet
        (search does a few at a time by itself); returns how many were embedded.
        ``progress(done, total)`` is called after each round of requests.

        Raises:
            GitmemError: no embedding model is configured, or the server fails.
        """
        return self._dense.backfill(progress)

    def close_index(self) -> None:
        """Close the search index files (``close()`` of the manager does not need it)."""
        self._store_index().close()

    # --- search ----------------------------------------------------------------------

    def _filters(
        self,
        tags: Iterable[str],
        project: str | None,
        participant: str | Iterable[str] | None,
        session: str | Iterable[str] | None,
        since: datetime | str | None,
        until: datetime | str | None,
        speaker: str | None = None,
    ) -> Filters:
        def many(value: str | Iterable[str] | None) -> tuple[str, ...]:
            if value is None:
                return ()
            return (value,) if isinstance(value, str) else tuple(value)

        return Filters(
            tags=tuple(tags),
            project=project,
            participants=many(participant),
            speakers=many(speaker),
            sessions=many(session),
            since=_stamp(since, "since"),
            until=_stamp(until, "until"),
        )

    def _rank(
        self, query: str, k: int, filters: Filters, commit: str | None
    ) -> tuple[Ranking, dict[str, Any]]:
        if not isinstance(query, str) or not (query.strip() or filters.speakers):
            raise ValidationError(
                "the search query is empty: give the words to look for"
                " (or a speaker, to list what they said)"
            )
        if k < 1:
            raise ValidationError(f"k must be at least 1, not {k}")
        config = self.rank_config
        dense, dense_notes = (
            self._dense.prepare(query, config, commit) if query.strip() else (None, [])
        )

        def work(index: SearchIndex) -> tuple[Ranking, dict[str, Any]]:
            head = index.get_meta("commit")
            ranking = Ranker(index, config).rank(query, k, filters, head=head)
            if dense is not None:
                self._dense.fuse(index, ranking, dense, config, filters, k, head)
            n_docs, _ = index.stats()
            return ranking, {"commit": head, "documents": n_docs}

        index = self._store_index()
        ranking, info = index.run(work, commit=commit)
        if index.fallback is not None:
            ranking.notes.append(index.fallback)
        ranking.notes.extend(dense_notes)
        if len(query) > config.query.max_query_chars:
            ranking.notes.append(
                f"query of {len(query)} characters: only the first "
                f"{config.query.max_query_chars} were used"
            )
        if not ranking.hits and ranking.below_min:
            ranking.notes.append(
                f"{ranking.below_min} weak candidates scored below min_score "
                f"{config.cutoff.min_score}: nothing relevant"
            )
        for tag in filters.tags:
            ranking.notes.extend(self._unknown_tag(tag, commit))
        return ranking, info

    def _unknown_tag(self, tag: str, commit: str | None) -> list[str]:
        def work(index: SearchIndex) -> list[str]:
            if index.session_keys(tags=[tag]):
                return []
            return [f"no session has the tag {tag!r}"]

        return self._store_index().run(work, commit=commit)

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        tags: Iterable[str] = (),
        project: str | None = None,
        participant: str | Iterable[str] | None = None,
        speaker: str | None = None,
        session: str | Iterable[str] | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        include_links: bool = False,
        explain: bool = False,
        commit: str | None = None,
        kind: str | None = None,
    ) -> Hits:
        """The stored interactions and summaries that best answer ``query``, best first.

        Args:
            query: free text in any language (Chinese and Japanese too).
            k: at most this many hits.
            tags: only sessions with all of these tags.
            project: only sessions of this project.
            participant: only sessions where this speaker (all of these) takes part.
            speaker: only turns in which this person spoke (any case); with an empty
                ``query``, their newest turns, newest first.
            session: only this session (or these sessions).
            since: only turns at or after this time (``datetime``, naive means UTC, or ISO string).
            until: only turns at or before this time.
            include_links: after the hits, add the sessions linked to or from the hits'
                sessions (metadata ``links`` or ``[[id]]`` in their text): each one's
                summary or, without one, its best turns for the query (see
                :mod:`gitmem.search.linked`; with ``explain``, ``explanation["links"]``).
            explain: attach ``hits.explanation``: query terms, expansion, every candidate
                with its score components and why it was kept or dropped.
            commit: search the store as of this commit instead of HEAD.
            kind: ``None`` or ``"session"`` (interactions and summaries), ``"fact"`` (the
                curated facts of the memory file: a fact's hit has ``kind="fact"``, an
                empty ``session_id`` and the fact's id as ``interaction_id``; the session
                filters do not apply) or ``"any"`` (matching facts first, at most half of
                ``k``, then interactions and summaries up to ``k``).

        Returns:
            ``Hits`` (a list of ``Hit``); empty when nothing scores above the minimum,
            with ``hits.notes`` saying why.

        Raises:
            ValidationError: for an empty query (without ``speaker``), k < 1 or an unknown
                kind.
        """
        if kind not in SEARCH_KINDS:
            raise ValidationError(f"kind {kind!r} is not one of session, fact, any")
        facts: list[Hit] = []
        fact_notes: list[str] = []
        if kind in ("fact", "any"):
            if not isinstance(query, str) or not query.strip():
                raise ValidationError("the search query is empty: give the words to look for")
            if k < 1:
                raise ValidationError(f"k must be at least 1, not {k}")
            facts, fact_notes = self._fact_hits(
                query, k if kind == "fact" else (k + 1) // 2, commit
            )
            if kind == "fact":
                return Hits(facts, fact_notes or ([] if facts else ["no fact matches"]))
        filters = self._filters(tags, project, participant, session, since, until, speaker)
        ranking, info = self._rank(query, k, filters, commit)
        hits = Hits([*facts, *ranking.hits[: k - len(facts)]], fact_notes + ranking.notes)
        followed = self._follow(ranking, hits, k, commit) if include_links and hits else None
        if followed is not None:
            hits.extend(item.hit for item in followed.linked)
        if explain:
            kept = {(h.session_id, h.interaction_id) for h in ranking.hits}
            hits.explanation = _explain_ranking(ranking, self.rank_config, filters, kept)
            hits.explanation["index"] = info
            if followed is not None:
                hits.explanation["links"] = followed.edges
        return hits

    def _fact_hits(self, query: str, k: int, commit: str | None) -> tuple[list[Hit], list[str]]:
        """The facts that match ``query`` as hits, best first (a broken file: a note)."""
        try:
            found = self.facts.candidates(query, commit, k)
        except ParseError as exc:
            return [], [f"the facts were left out: {exc}"]
        at = commit or self.store.head()
        return [
            Hit(
                session_id="",
                interaction_id=fact_id,
                score=round(score, 6),
                snippet=text,
                commit=at,
                kind="fact",
                components={"fact": round(score, 4)},
            )
            for fact_id, text, score in found
            if score > 0
        ], []

    def _follow(
        self, ranking: Ranking, hits: Sequence[Hit], limit: int, commit: str | None
    ) -> Followed:
        """The memories linked to or from the sessions of ``hits`` (gitmem.search.linked)."""
        config = self.rank_config
        return self._store_index().run(
            lambda index: follow_links(
                index, config, ranking, hits, limit, index.get_meta("commit")
            ),
            commit=commit,
        )

    # --- browsing --------------------------------------------------------------------

    def browse_sessions(
        self,
        *,
        tags: Iterable[str] = (),
        participant: str | None = None,
        project: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        offset: int = 0,
        limit: int = 50,
        commit: str | None = None,
    ) -> SessionPage:
        """One page of the sessions matching every filter, most recently active first,
        with how many match in all: fast on a large store (no file is parsed).

        Answered from the search index, which catches up with the store first (saves by
        other processes, a pull, a hand commit), as ``search`` does. The filters are those
        of ``list_sessions`` (``tags`` all present; ``since``/``until``, a datetime, naive
        meaning UTC, or an ISO date, bound the last-active time), except that a
        participant's case does not matter; the order is ``list_sessions``' too. A session
        is listed once, its turn count includes the turns a summary moved to the archive,
        and its summary comes shortened to one line. A file that does not parse is left
        out (``check()`` reports it).

        Args:
            offset: how many matching sessions to skip (0: the first page).
            limit: at most this many sessions on the page.
            commit: list the store as of this commit instead of HEAD (slower: that
                commit's files are read).

        Raises:
            ValidationError: a bad date, a negative offset or a limit below 1.
        """
        low, high = _stamp(since, "since"), _stamp(until, "until")
        if offset < 0:
            raise ValidationError(f"offset must be 0 or more, not {offset}")
        if limit < 1:
            raise ValidationError(f"limit must be at least 1, not {limit}")
        wanted = SessionRowFilter(
            session_dir(self.store.namespace) + "/",
            tuple(tags),
            () if not participant else (participant,),
            project or None,
            low.timestamp() if low else None,
            high.timestamp() if high else None,
        )

        def work(index: SearchIndex) -> SessionPage:
            total, rows = index.session_table.browse(wanted, offset=offset, limit=limit)
            turns = index.turn_counts([row.session_id for row in rows])
            summaries = index.summary_texts([row.skey for row in rows], 2 * PREVIEW_CHARS)
            return SessionPage(
                sessions=[
                    listing(row, turns.get(row.session_id, 0), summaries.get(row.skey))
                    for row in rows
                ],
                total=total,
                offset=offset,
                limit=limit,
                commit=index.get_meta("commit"),
            )

        return self._store_index().run(work, commit=commit)

    def session_listings(
        self, session_ids: Iterable[str], *, commit: str | None = None
    ) -> dict[str, SessionListing]:
        """These sessions as ``browse_sessions`` lists them (turns, tags, ...), by id; an id
        that is no session of the store is left out. Answered from the search index."""
        wanted = list(dict.fromkeys(session_ids))
        folder = session_dir(self.store.namespace) + "/"

        def work(index: SearchIndex) -> dict[str, SessionListing]:
            rows = index.rows_in(folder, wanted)
            turns = index.turn_counts(list(rows))
            summaries = index.summary_texts([row.skey for row in rows.values()], 2 * PREVIEW_CHARS)
            return {
                sid: listing(row, turns.get(sid, 0), summaries.get(row.skey))
                for sid, row in rows.items()
            }

        return self._store_index().run(work, commit=commit)

    def _row_filter(self, wanted: SessionFilter) -> SessionRowFilter:
        """The index's question for the session files at HEAD that may pass ``wanted``
        (some more: the store checks each)."""
        return SessionRowFilter(
            session_dir(self.store.namespace) + "/",
            tuple(sorted(wanted.tags)),
            () if not wanted.participant else (wanted.participant,),
            wanted.project or None,
            # a second either way: a timestamp read back as a float may be off by rounding
            None if wanted.since is None else wanted.since.timestamp() - 1,
            None if wanted.until is None else wanted.until.timestamp() + 1,
        )

    def listed_sessions(self, wanted: SessionFilter) -> dict[str, tuple[str, SessionInfo]]:
        """Path -> (blob id, listing) of the session files at HEAD that may pass ``wanted``
        (some more: the store checks each listing), and of every part file, from the index's
        session rows, caught up first: ``list_sessions`` reads these instead of every file."""
        rows = self._row_filter(wanted)
        return self._store_index().run(lambda index: index.session_table.listed(rows))

    def listed_session_infos(
        self, wanted: SessionFilter
    ) -> tuple[list[SessionInfo], dict[str, int]]:
        """The listings of the sessions at HEAD that may pass ``wanted`` (some more: the
        store checks each), most recently active first, and path -> turns of every part
        file, from the index's session rows, caught up first."""
        rows = self._row_filter(wanted)
        return self._store_index().run(lambda index: index.session_table.infos(rows))

    def link_graph(self, *, commit: str | None = None) -> LinkGraph:
        """Which sessions link to which: the ``links`` of their metadata and the
        ``[[session-id]]`` wiki links in their turns and summaries (kept by the search index,
        caught up first), with the targets that are no session of the store.

        ``commit``: the links as of that commit instead of HEAD.
        """
        folder = session_dir(self.store.namespace) + "/"

        def work(index: SearchIndex) -> LinkGraph:
            # the same rows (another process's catch-up moves the commit): the same graph
            meta = (index.get_meta("doc_epoch"), index.get_meta("commit"))
            stamp = (index, index.generation, meta, folder)
            last, found = self._last_graph
            if last == stamp and found is not None:
                return _graph_copy(found)
            links = index.session_links(folder)
            targets = list({target for _, found in links for target in found})
            made = graph(links, index.present(targets), index.get_meta("commit"))
            if commit is None:
                self._last_graph = (stamp, made)
            return _graph_copy(made)

        return self._store_index().run(work, commit=commit)

    # --- context ---------------------------------------------------------------------

    def retrieve_context(
        self,
        session_id: str,
        query: str,
        max_tokens: int = 2000,
        *,
        k: int = 8,
        recent_turns: int = 8,
        tags: Iterable[str] = (),
        project: str | None = None,
        participant: str | Iterable[str] | None = None,
        token_counter: TokenCounter | None = None,
        explain: bool = False,
        commit: str | None = None,
        with_facts: bool = True,
        rerank: bool = False,
        rerank_candidates: int = 20,
        include_links: bool = False,
    ) -> ContextMessages:
        """Chat messages for the next turn of ``session_id``, within ``max_tokens``.

        In this order: what the agent knows (a system message "What you know" listing the
        curated facts of the memory file that matter here, each ``- text [id]``: the pinned
        ones (``pin_fact``), the query's matches best first (scored as ``search(kind="fact")``
        scores them), then the others learned from this session; never a fact that is none
        of these, however small the file; at most ``FACTS_SHARE`` of the budget;
        ``with_facts=False`` leaves them out), the session's summary (system), its most
        recent turns (user / assistant), then a system message of memories retrieved for
        ``query`` from other sessions (and from earlier in this one), each naming its
        source. Room goes first to the facts (their share), the summary, then the newest
        turns, then memories by rank; the result never counts more than ``max_tokens`` with
        the token counter in use. An empty query retrieves no memories (the pinned facts and
        this session's still come); an unknown session gives facts and memories only. A memory
        file that does not parse leaves the facts out, with a note in the explanation.
        ``include_links`` adds, after the ranked memories, those of the sessions linked to
        or from theirs (as ``search(include_links=True)``; not the current session's own).

        ``rerank=True`` asks the configured chat model to choose (at most ``k``) and condense
        the memories from the top ``rerank_candidates`` lexical ones (see
        :mod:`gitmem.search.rerank`); on any failure of the model the lexical memories stand,
        with a note.

        Returns:
            ``ContextMessages`` (a list of ``{"role", "content"}`` dicts); with
            ``explain=True`` its ``explanation`` shows the search, the budget and what was
            cut; its ``facts`` part says why each fact came (``included_reasons``: pinned,
            the matched terms, from this session) or stayed out (``cut``: not relevant to
            the query, over the facts' share of the budget).
        """
        if max_tokens < 1:
            raise ValidationError(f"max_tokens must be at least 1, not {max_tokens}")
        if rerank and rerank_candidates < 1:
            raise ValidationError(f"rerank_candidates must be at least 1, not {rerank_candidates}")
        counter = token_counter or self.token_counter or default_counter()
        notes: list[str] = []
        try:
            session = self.store.load_memory(session_id, commit=commit)
        except ParseError as exc:
            session = None
            notes.append(f"session {session_id!r} could not be read: {exc}")
        recent = {i.id for i in session.interactions[-recent_turns:]} if session else set()
        memories: list[Memory] = []
        ranking: Ranking | None = None
        followed: Followed | None = None
        info: dict[str, Any] = {}
        filters = self._filters(tags, project, participant, None, None, None)
        reranked: Reranked | None = None
        if query.strip():
            ranking, info = self._rank(query, k + len(recent), filters, commit)
            memories = _memories(ranking, session_id, recent, k)
            if rerank:  # the lexical memories stand whenever the model fails
                wide = rerank_candidates + len(recent)
                pool = (
                    memories[:rerank_candidates]
                    if rerank_candidates <= k
                    else _memories(
                        self._rank(query, wide, filters, commit)[0],
                        session_id,
                        recent,
                        rerank_candidates,
                    )
                )
                reranked = rerank_memories(
                    partial(self.summaries.ask_json, timeout=RERANK_TIMEOUT),
                    query,
                    memories,
                    pool,
                    k,
                )
                memories = reranked.memories
                if reranked.fallback:
                    notes.append(f"rerank fell back to the lexical order: {reranked.fallback}")
            if include_links:
                followed = self._follow(ranking, ranking.hits, k, commit)
                memories += [
                    Memory(
                        h.session_id,
                        h.interaction_id,
                        h.kind,
                        h.timestamp,
                        one_line(item.text, MEMORY_CHARS),
                        h.score,
                        why=f"linked from a hit ([[{h.session_id}]])",
                    )
                    for item in followed.linked
                    if (h := item.hit).session_id != session_id
                ]
        known, complete = (
            self._known(query, session_id, max_tokens, commit, notes) if with_facts else ([], True)
        )
        plan = assemble(
            session,
            memories,
            max_tokens,
            counter,
            recent_turns=recent_turns,
            facts=known,
            facts_share=FACTS_SHARE,
        )
        refs = {m.ref: (m.session_id, m.interaction_id or "") for m in memories}
        used = [refs[p.ref] for p in plan.included if p.source == "memory" and p.ref in refs]
        if used and commit is None:
            self._store_index().run(lambda index: index.touch(used, time.time()))
        out = ContextMessages(plan.messages)
        if explain:
            out.explanation = {
                "session_id": session_id,
                "session_found": session is not None,
                "budget": plan.explanation(),
                "facts": {
                    "included": [p.ref for p in plan.included if p.source == "fact"],
                    "cut": [
                        {"id": p.ref, "reason": p.reason} for p in plan.cut if p.source == "fact"
                    ],
                    "included_reasons": [
                        {"id": p.ref, "reason": p.reason}
                        for p in plan.included
                        if p.source == "fact"
                    ],
                    "weighed_all": complete,
                },
                "search": (
                    _explain_ranking(
                        ranking,
                        self.rank_config,
                        filters,
                        {(h.session_id, h.interaction_id) for h in ranking.hits},
                    )
                    | {"index": info}
                    if ranking is not None
                    else None
                ),
                "links": followed.edges if followed is not None else None,
                "notes": notes + (ranking.notes if ranking else ["empty query: no retrieval"]),
                "rerank": reranked.explanation() if reranked else None,
                "messages": list(plan.messages),
            }
        return out

    def _known(
        self, query: str, session_id: str, max_tokens: int, commit: str | None, notes: list[str]
    ) -> tuple[list[WeighedFact], bool]:
        """The facts to weigh for the context (at most as many as could fit), those that
        matter first, and whether they are every current fact; a broken memory file adds a
        note and gives none."""
        limit = min(max(int(max_tokens * FACTS_SHARE) // 4, 1), MAX_FACTS)
        try:
            found, complete = self.facts.weigh(query, session_id, commit, limit)
        except ParseError as exc:
            notes.append(f"the facts were left out: {exc}")
            return [], True
        return found, complete
