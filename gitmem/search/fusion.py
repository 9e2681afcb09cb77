"""Dense retrieval beside the lexical ranking (optional embeddings, issue 17): the query
vector, embedding the memories that have no vector yet, and reciprocal rank fusion.

It runs after :meth:`~gitmem.search.rank.Ranker.rank` has returned, never inside it: the
lexical ranking is computed as without embeddings, then :meth:`Dense.fuse` merges it with
the ``dense_candidates`` nearest documents (cosine at least ``dense_min_similarity``) by
reciprocal rank fusion (``1/(rrf_k + lexical rank) + dense_weight/(rrf_k + dense rank)``,
scaled so that first in both is 1). A document found by meaning only becomes a candidate
of its own, under the same filters. Embedding goes through ``Summaries.embed`` (the
summary feature answers), so search never imports the client. Any failure (no answer, an
HTTP error, wrong vectors) leaves the lexical ranking as it was, with a note: embeddings
may only add to search, never break it. Nothing here writes to git.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from gitmem.errors import GitmemError
from gitmem.llm.embeddings import EmbedConfig
from gitmem.search.catchup import ProgressCallback, StoreIndex
from gitmem.search.index import SearchIndex
from gitmem.search.rank import SHOWN_CANDIDATES, Filters, RankedCandidate, Ranker, Ranking
from gitmem.search.rankconfig import RankConfig
from gitmem.search.speakerrows import spoke
from gitmem.search.vectors import (
    SLOW_NOTE,
    VectorCache,
    missing,
    prune,
    scan,
    script_of,
    store,
    tag_of,
    texts_of,
)
from gitmem.text import strip_controls


class Embedder(Protocol):
    """Vectors for texts (queries or memories) and the model's settings; None when off."""

    def __call__(
        self, texts: Sequence[str], *, query: bool = False
    ) -> tuple[list[list[float]], EmbedConfig] | None: ...


# query vectors kept (an agent often asks the same thing twice in a row)
QUERY_CACHE = 32
# memories embedded per request round of a backfill
BACKFILL_CHUNK = 256
NO_TERM_NOTE = "no query term occurs in any memory"  # rank.py's


@dataclass
class DenseQuery:
    """The query's vector and the tag of the stored vectors it is compared with."""

    vector: list[float]
    tag: str
    notes: list[str] = field(default_factory=list)
    model: EmbedConfig | None = None
    script: int = 0  # the query's script (vectors.script_of)

    @property
    def centred(self) -> bool:
        return self.model is not None and self.model.centred

    def min_similarity(self, config: RankConfig) -> float:
        """The floor of a dense hit: the model's calibrated one, else the ranking's."""
        found = None if self.model is None else self.model.min_similarity
        return config.dense.dense_min_similarity if found is None else found

    def weight(self, config: RankConfig) -> float:
        """The dense rank's weight: the one fit for the model, else the ranking's."""
        found = None if self.model is None else self.model.dense_weight
        return config.dense.dense_weight if found is None else found


class Dense:
    """The dense side of search for one manager (query vectors, matrix cache, backfill)."""

    def __init__(self, store_index: Callable[[], StoreIndex], embed: Embedder) -> None:
        self._store_index = store_index
        self._embed = embed
        self.cache = VectorCache()
        self._queries: OrderedDict[tuple[str, str], list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _model(self) -> EmbedConfig | None:
        found = self._embed([])
        return None if found is None else found[1]

    def _vectors(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        found = self._embed(texts, query=query)
        if found is None:
            raise GitmemError("embeddings were switched off")
        return found[0]

    def _query_vector(self, key: str, text: str) -> list[float]:
        with self._lock:
            found = self._queries.get((key, text))
            if found is not None:
                self._queries.move_to_end((key, text))
                return found
        vector = self._vectors([text], query=True)[0]
        with self._lock:
            self._queries[(key, text)] = vector
            while len(self._queries) > QUERY_CACHE:
                self._queries.popitem(last=False)
        return vector

    def prepare(
        self, query: str, config: RankConfig, commit: str | None
    ) -> tuple[DenseQuery | None, list[str]]:
        """The query vector (None when embeddings are off or fail) and notes; embeds up to
        ``dense_catchup`` memories that have no vector yet. Never raises for the server."""
        try:
            model = self._model()
        except GitmemError as exc:  # a setting gitmem cannot use
            return None, [f"embeddings unused: {exc}"]
        if model is None:
            return None, []
        key = model.key
        if commit is not None:
            return None, [
                "embeddings are kept for the current memories only: the past "
                "commit is ranked lexically"
            ]
        text = strip_controls(query)[: config.query.max_query_chars].strip()
        try:
            vector = self._query_vector(key, text)
        except GitmemError as exc:
            return None, [f"embeddings unused ({exc}): lexical ranking only"]
        found = DenseQuery(vector, tag_of(key, len(vector)), model=model, script=script_of(text))
        found.notes = self._catch_up(found, config.dense.dense_catchup)
        return found, found.notes

    def _catch_up(self, query: DenseQuery, limit: int) -> list[str]:
        """Embed at most ``limit`` memories still without a vector (the rest wait)."""
        dims = len(query.vector)
        index = self._store_index()
        view = index.run(lambda idx: self.cache.get(idx, query.tag, dims, centred=query.centred))
        pending, waiting = view.pending, view.waiting
        if not pending or limit < 1:
            return []
        if waiting and len(waiting) >= pending:  # new turns since the load: no table scan
            rows = index.run(lambda idx: texts_of(idx, waiting[:limit]))
        else:
            rows = index.run(lambda idx: missing(idx, query.tag, limit))
        try:
            vectors = self._vectors([text for _, _, text in rows]) if rows else []
        except GitmemError as exc:
            return [
                f"{pending} memories have no vector yet and embedding them failed "
                f"({exc}); they are found by keywords only"
            ]
        if any(len(v) != dims for v in vectors):
            return [
                f"the embedding model answered vectors of another size than the "
                f"query's ({dims}): {pending} memories are found by keywords only"
            ]
        rest = None if len(rows) == limit else 0  # fewer than asked: that was all of them

        def keep(idx: SearchIndex) -> None:
            store(
                idx,
                query.tag,
                [(content, v) for (_, content, _), v in zip(rows, vectors, strict=True)],
            )
            self.cache.add(idx, query.tag, dims, [doc_id for doc_id, _, _ in rows], rest)

        index.run(keep)
        left = pending - len(rows) if rest is None else 0
        if left > 0:
            return [
                f"{left} memories still have no vector (a search embeds at most {limit}):"
                " run `gitmem embed`"
            ]
        return []

    def backfill(self, progress: ProgressCallback | None = None) -> int:
        """Embed every memory without a vector of the configured model; how many were.

        Raises:
            GitmemError: no embedding model is configured, or the server fails.
        """
        model = self._model()
        if model is None:
            raise GitmemError(
                "no embedding model is configured: set GITMEM_EMBED_MODEL "
                "(and GITMEM_EMBED_BASE_URL) or git config gitmem.embed.model"
            )
        key = model.key
        dims = len(self._vectors(["dimensions"])[0])
        tag = tag_of(key, dims)
        index = self._store_index()
        index.run(prune)
        total = index.run(lambda idx: self.cache.get(idx, tag, dims, centred=model.centred).pending)
        done = 0
        while True:
            rows = index.run(lambda idx: missing(idx, tag, BACKFILL_CHUNK))
            if not rows:
                break
            vectors = self._vectors([text for _, _, text in rows])
            if any(len(v) != dims for v in vectors):
                raise GitmemError(
                    f"embedding model {key}: vectors of {dims} and "
                    f"{len({len(v) for v in vectors})} other sizes"
                )
            pairs = [(content, v) for (_, content, _), v in zip(rows, vectors, strict=True)]
            index.run(lambda idx, pairs=pairs: store(idx, tag, pairs))  # type: ignore[misc]
            done += len(rows)
            if progress is not None:
                progress(min(done, max(total, done)), max(total, done))
        return done

    def fuse(
        self,
        index: SearchIndex,
        ranking: Ranking,
        query: DenseQuery,
        config: RankConfig,
        filters: Filters,
        k: int,
        head: str | None,
    ) -> None:
        """Merge the dense top-N into ``ranking`` (candidates and hits, best first)."""
        ranker = Ranker(index, config)
        view = self.cache.get(index, query.tag, len(query.vector), centred=query.centred)
        if not view.fast:
            ranking.notes.append(SLOW_NOTE)
        allowed = None if filters.empty else ranker._allowed(filters)
        near = scan(
            view,
            query.vector,
            config.dense.dense_candidates,
            allowed=allowed,
            lo=filters.period[0],
            hi=filters.period[1],
            floor=query.min_similarity(config),
            exact=config.dense.dense_exact,
            group=query.script if query.centred else None,
        )
        if filters.speakers:  # only the turns those people spoke in
            said = index.doc_speakers(doc_id for doc_id, _ in near)
            near = [(i, v) for i, v in near if spoke(said.get(i, ""), filters.speakers)]
        if not near:
            return
        cands = ranking.candidates
        floor = (
            max(config.cutoff.min_score, config.cutoff.relative_min * cands[0].score)
            if cands
            else 0.0
        )
        kept = {c.doc.id for c in cands if c.score >= floor}
        lexical = {c.doc.id: at for at, c in enumerate(cands, 1)}
        dense = {doc_id: at for at, (doc_id, _) in enumerate(near, 1)}
        similarity = dict(near)
        by_id = {c.doc.id: c for c in cands}
        new = [doc_id for doc_id in dense if doc_id not in by_id]
        unseen = _other_script(index, dense, query.script)
        if new:
            rows = index.docs(new)
            sessions = index.sessions({row.skey for row in rows.values()})
            for doc_id in new:
                row = rows.get(doc_id)
                session = sessions.get(row.skey) if row is not None else None
                if row is not None and session is not None:
                    by_id[doc_id] = RankedCandidate(row, session, 0.0, {})
        rrf, weight = config.dense.rrf_k, query.weight(config)
        scale = (rrf + 1) / (1 + weight)
        pool = [c for doc_id, c in by_id.items() if doc_id in kept or doc_id in dense]
        for cand in pool:
            doc_id = cand.doc.id
            at = min(lexical.get(doc_id, 10**9), unseen.get(doc_id, 10**9))
            fused = 1 / (rrf + at) if at < 10**9 else 0.0
            fused += weight / (rrf + dense[doc_id]) if doc_id in dense else 0.0
            cand.components = {**cand.components, "dense": similarity.get(doc_id, 0.0)}
            cand.score = fused * scale
        pool.sort(key=lambda c: (-c.score, c.session.session_id, c.doc.pos))
        shown = pool[: max(k, SHOWN_CANDIDATES)]
        texts = index.texts(c.doc.id for c in shown if not c.doc.text)
        for cand in shown:
            if cand.doc.id in texts:
                cand.doc = replace(cand.doc, text=texts[cand.doc.id])
        pooled = {c.doc.id for c in pool}
        rest = [c for c in cands if c.doc.id not in pooled]
        ranking.candidates = pool + rest
        ranking.below_min = len(rest)
        ranking.hits = [ranker._hit(c, ranking.terms, head) for c in pool[:k]]
        only = sum(1 for doc_id in dense if doc_id not in lexical)
        if only:
            if not cands:  # the words matched nothing, the meaning did
                ranking.notes = [n for n in ranking.notes if n != NO_TERM_NOTE]
            ranking.notes.append(f"{only} candidates found by meaning only (embeddings)")


def _other_script(index: SearchIndex, dense: dict[int, int], script: int) -> dict[int, int]:
    """The dense hits written in another script than the query, with their dense rank.
    Keywords cannot match across scripts (an English question, a Chinese turn): there the
    dense rank stands in for the lexical rank the turn could never have, so a turn found by
    meaning can pass weak keyword (or shared character) matches. A store of one script
    keeps the plain fusion."""
    texts = index.texts(dense)
    return {i: at for i, at in dense.items() if i in texts and script_of(texts[i]) != script}
