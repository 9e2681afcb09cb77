"""Ranking: which stored interactions and summaries answer a query, and why.

A query is cut into the same terms as the index (:mod:`gitmem.text`). Candidates come
from the inverted index; each gets a score built from named components so that
``--explain`` can show how it came about:

- ``keyword``: BM25 of the query terms, divided by the best score any document could get
  for this query, so it lies in 0..1 and a fixed minimum score means the same for every
  query;
- ``expansion``: BM25 of terms borrowed from the best first-round documents (pseudo
  relevance feedback, RM3-style), which finds turns that talk about the topic in other words;
- ``speaker``: the query names who said it (:mod:`.speakerlift`: the name's lift plus a
  share of the turn's own score; that person's newest turns are candidates too);
- ``context``: the neighbouring turns of the same session match too (answers often sit one
  turn after the question that prompted them);
- ``answer``: the turn right before ends in a question and is one of the best matches: this
  turn is most likely its answer, even when it repeats none of the question's words;
- ``hop``: a second round (multi-hop): the rarest terms of the best first-round documents
  (names, places, things) find turns of other sessions about the same entities;
- ``session``: the turn's session as a whole matches (best turn of the session);
- ``summary``: the session's summary matches, lifting all of its turns;
- ``fuzzy``: rapidfuzz ``token_set_ratio`` of the stopword-free query and memory words, for
  typos and near-spellings (never ``WRatio``: it ties hundreds of turns on long text);
- ``temporal`` and ``period``: the dates and periods the query names (:mod:`.periodrank`);
- ``decay`` and ``activation``: multipliers for age and for how often a memory was used.

Weights live in :class:`RankConfig`. Hits scoring below ``min_score`` are dropped, so the
answer to an unrelated query is an empty list, not the least bad guess.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from operator import itemgetter

from rapidfuzz import fuzz, process

from gitmem.models import Hit
from gitmem.search.aggregate import is_aggregate, spread
from gitmem.search.index import KIND_INTERACTION, KIND_SUMMARY, DocRow, SearchIndex, SessionRow
from gitmem.search.periodrank import PeriodRanker, QueryTimes
from gitmem.search.rankconfig import RankConfig
from gitmem.search.speakerlift import NamedSpeakers, newest_turns
from gitmem.search.speakerrows import spoke
from gitmem.text import find_term, name_terms, strip_controls, terms


@dataclass(frozen=True)
class Filters:
    """Metadata filters; every given condition must hold (tags, participants and speakers:
    all). ``speakers``: only turns in which each of these people (any case) spoke."""

    tags: tuple[str, ...] = ()
    project: str | None = None
    participants: tuple[str, ...] = ()
    speakers: tuple[str, ...] = ()
    sessions: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None

    @property
    def empty(self) -> bool:
        return not (
            self.tags
            or self.project
            or self.participants
            or self.speakers
            or self.sessions
            or self.since
            or self.until
        )

    @property
    def period(self) -> tuple[float, float]:
        """``since`` and ``until`` as epoch seconds (unbounded when not given)."""
        return (
            self.since.timestamp() if self.since else -math.inf,
            self.until.timestamp() if self.until else math.inf,
        )


@dataclass
class RankedCandidate:
    """A scored document with its score components (for ``--explain``)."""

    doc: DocRow
    session: SessionRow
    score: float
    components: dict[str, float]


@dataclass
class Ranking:
    """The result of one ranking: hits plus everything ``--explain`` shows."""

    query: str
    terms: dict[str, float]
    expansion: dict[str, float]
    corrections: dict[str, str]
    hits: list[Hit]
    candidates: list[RankedCandidate]
    below_min: int = 0
    hop_terms: dict[str, float] = field(default_factory=dict)  # the second round's terms
    notes: list[str] = field(default_factory=list)


@dataclass
class RankState:
    """What flows between the stages of one ranking (see :meth:`Ranker.rank`)."""

    ranking: Ranking
    filters: Filters
    now: datetime | None
    text: str = ""
    n_docs: int = 0
    avgdl: float = 0.0
    # query terms with their weights and idf (expansion and hop terms join the idf)
    weights: dict[str, float] = field(default_factory=dict)
    idf: dict[str, float] = field(default_factory=dict)
    # the best BM25 score any document could get for the query terms
    ideal: float = 1.0
    # the people who spoke whom the query names (see speakerlift.py)
    named: NamedSpeakers = field(default_factory=NamedSpeakers)
    # the speaker lift of each candidate whose speaker the query names
    lift: dict[int, float] = field(default_factory=dict)
    # the sessions the filters allow (None: all), and their documents when few enough
    allowed: set[int] | None = None
    scan: dict[int, DocRow] | None = None
    limit: int = 0
    # document id -> (session key, position, kind) of every document seen
    where: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    base: dict[int, float] = field(default_factory=dict)
    extra: dict[int, float] = field(default_factory=dict)
    ideal_x: float = 1.0
    hop: dict[int, float] = field(default_factory=dict)
    # the normalised first round with the expansions added
    first: dict[int, float] = field(default_factory=dict)
    pool: list[int] = field(default_factory=list)
    pre: dict[int, tuple[float, dict[str, float]]] = field(default_factory=dict)
    # the dates and periods the query names, and the turns said in or about the periods
    times: QueryTimes = field(default_factory=QueryTimes)


@dataclass
class FirstRound:
    """What the first round says about each turn's neighbours, session and summary."""

    first: dict[int, float]
    where: dict[int, tuple[int, int, int]]
    # the places of the best turns that end in a question
    asking: set[tuple[int, int]]
    config: RankConfig
    at_place: dict[tuple[int, int], float] = field(default_factory=dict)
    in_session: defaultdict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    summary_score: dict[int, float] = field(default_factory=dict)
    sessions: dict[int, float] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        first: dict[int, float],
        where: dict[int, tuple[int, int, int]],
        asking: set[tuple[int, int]],
        config: RankConfig,
    ) -> FirstRound:
        view = cls(first, where, asking, config)
        for doc_id, value in first.items():
            skey, pos, kind = where[doc_id]
            if kind == KIND_SUMMARY:
                view.summary_score[skey] = max(view.summary_score.get(skey, 0.0), value)
            else:
                view.at_place[skey, pos] = value
                view.in_session[skey].append(value)
        return view

    def session(self, skey: int) -> float:
        """The mean of the session's best turns (cached)."""
        found = self.sessions.get(skey)
        if found is None:
            top_n = max(self.config.fusion.session_top, 1)
            values = self.in_session.get(skey, ())
            best = values if len(values) <= top_n else heapq.nlargest(top_n, values)
            found = self.sessions[skey] = sum(best) / top_n
        return found

    def beside(self, skey: int, pos: int) -> float:
        """The better first-round score of the turns before and after."""
        return max(self.at_place.get((skey, pos - 1), 0.0), self.at_place.get((skey, pos + 1), 0.0))

    def asked(self, skey: int, pos: int) -> float:
        """The strength of the question the turn at ``pos`` answers: the asking turn's
        first-round score plus ``answer_context`` of the turn before it, which a short
        question such as "What inspired you to join it?" refers to."""
        value = self.at_place.get((skey, pos - 1), 0.0)
        share = self.config.fusion.answer_context
        if share:
            value += share * self.at_place.get((skey, pos - 2), 0.0)
        return value

    def pre_score(self, doc_id: int) -> float:
        """The score that chooses which documents go on to be finished."""
        cfg = self.config
        skey, pos, kind = self.where[doc_id]
        value = self.first.get(doc_id, 0.0) + cfg.fusion.session_weight * self.session(skey)
        if kind == KIND_INTERACTION:
            if (skey, pos - 1) in self.asking:
                value += cfg.fusion.answer_weight * self.asked(skey, pos)
            value += cfg.fusion.neighbour_weight * self.beside(skey, pos)
            value += cfg.fusion.summary_weight * self.summary_score.get(skey, 0.0)
        return value

    def components(self, doc_id: int, state: RankState) -> tuple[float, dict[str, float]]:
        """The named parts of a document's score so far, and their sum."""
        cfg = self.config
        skey, pos, kind = self.where[doc_id]
        comp = {
            "keyword": state.base.get(doc_id, 0.0) / state.ideal,
            "expansion": cfg.expansion.prf_weight * state.extra.get(doc_id, 0.0) / state.ideal_x,
        }
        if doc_id in state.hop:
            comp["hop"] = state.hop[doc_id]
        if kind == KIND_INTERACTION:
            if (skey, pos - 1) in self.asking:
                comp["answer"] = cfg.fusion.answer_weight * self.asked(skey, pos)
            if cfg.fusion.neighbour_weight:
                comp["context"] = cfg.fusion.neighbour_weight * self.beside(skey, pos)
            if cfg.fusion.summary_weight:
                comp["summary"] = cfg.fusion.summary_weight * self.summary_score.get(skey, 0.0)
        if cfg.fusion.session_weight:
            comp["session"] = cfg.fusion.session_weight * self.session(skey)
        return sum(comp.values()), comp


# candidates whose text is read (hits beyond these are never shown, even by --explain)
SHOWN_CANDIDATES = 25

_second = itemgetter(1)


def snippet(text: str, query_terms: Iterable[str], limit: int = 200) -> str:
    """A piece of ``text`` of at most ``limit`` characters around the first matching word."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    first = find_term(flat, set(query_terms))
    start = max((first or 0) - limit // 4, 0)
    piece = flat[start : start + limit]
    return ("…" if start else "") + piece + ("…" if start + limit < len(flat) else "")


class Ranker:
    """Scores a :class:`~gitmem.search.index.SearchIndex` for queries (see the module docs)."""

    def __init__(self, index: SearchIndex, config: RankConfig | None = None) -> None:
        self.index = index
        self.config = config or RankConfig()
        self.times = PeriodRanker(index, self.config)

    # --- query terms -----------------------------------------------------------------

    def _query_terms(
        self, text: str, n_docs: int
    ) -> tuple[dict[str, float], dict[str, int], dict[str, str]]:
        """Weighted query terms, their document frequencies and typo corrections."""
        counts = Counter(terms(text))
        df = self.index.df(counts)
        corrections: dict[str, str] = {}
        if self.config.match.speaker_weight and any(t not in df for t in counts):
            # a name that only ever appears as a speaker still counts (for the speaker part)
            for name, spoken in self.index.speakers().items():
                for term in name_terms(name):
                    if term in counts and term not in df:
                        df[term] = spoken
        weights: dict[str, float] = {t: float(c) for t, c in counts.items() if t in df}
        missing = [t for t in counts if t not in df and len(t) >= 4 and t.isalpha()]
        if missing:
            vocab = self.index.vocabulary()
            for term in missing[:8]:
                found = process.extractOne(
                    term, vocab, scorer=fuzz.ratio, score_cutoff=self.config.query.typo_min_ratio
                )
                if found is not None:
                    corrections[term] = found[0]
                    weights[found[0]] = max(weights.get(found[0], 0.0), found[1] / 100)
            df.update(self.index.df(corrections.values()))
        if len(weights) > self.config.query.max_query_terms:
            rarest = sorted(weights, key=lambda t: (df.get(t, 0), t))
            weights = {t: weights[t] for t in rarest[: self.config.query.max_query_terms]}
        return weights, df, corrections

    def _idf(self, df: int, n_docs: int) -> float:
        return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))

    # --- scoring ---------------------------------------------------------------------

    def _bm25_doc(
        self, doc: DocRow, weights: dict[str, float], idf: dict[str, float], avgdl: float
    ) -> float:
        if not doc.dl:
            return 0.0
        cfg = self.config
        norm = cfg.first.k1 * (1 - cfg.first.b + cfg.first.b * doc.dl / avgdl)
        tf = Counter(t for t in doc.terms.split() if t in weights)
        return sum(weights[t] * idf[t] * n * (cfg.first.k1 + 1) / (n + norm) for t, n in tf.items())

    def _bm25(
        self,
        weights: dict[str, float],
        idf: dict[str, float],
        avgdl: float,
        allowed: set[int] | None,
        limit: int,
        scan: dict[int, DocRow] | None,
        where: dict[int, tuple[int, int, int]],
        floor: int | None = None,
    ) -> dict[int, float]:
        """BM25 of every matching document (from the scan, or from the postings)."""
        if scan is not None:
            return {
                d.id: s for d in scan.values() if (s := self._bm25_doc(d, weights, idf, avgdl)) > 0
            }
        cfg = self.config
        scores: dict[int, float] = {}
        k1, b = cfg.first.k1, cfg.first.b
        n_docs = self.index.stats()[0]
        top_idf = self._idf(1, n_docs) or 1.0
        for term, weight in weights.items():
            w = weight * idf[term] * (k1 + 1)
            # common words add little to any score: read only their best postings
            cap = max(
                cfg.first.postings_floor if floor is None else floor,
                int(limit * idf[term] / top_idf),
            )
            for doc_id, tf, dl, skey, pos, kind in self.index.postings(term, cap):
                if allowed is not None and skey not in allowed:
                    continue
                scores[doc_id] = scores.get(doc_id, 0.0) + w * tf / (
                    tf + k1 * (1 - b + b * dl / avgdl)
                )
                where[doc_id] = (skey, pos, kind)
        return scores

    def rank(
        self,
        query: str,
        k: int = 10,
        filters: Filters | None = None,
        *,
        now: datetime | None = None,
        head: str | None = None,
    ) -> Ranking:
        """Rank the index for ``query``; see :class:`Ranking` for what comes back.

        The stages run in order over one :class:`RankState`: parse the query, choose where
        candidates come from, score the first round, add the expansions, fuse the
        components, and finish with what needs the documents themselves."""
        state = RankState(Ranking(query, {}, {}, {}, [], []), filters or Filters(), now)
        if state.filters.speakers and not strip_controls(query).strip():
            self.list_spoken(state, k, head)
            return state.ranking
        if not self.parse_query(state):
            return state.ranking
        self.choose_candidates(state)
        self.first_round(state)
        self.expand(state)
        self.fuse(state)
        self.finish(state, k, head)
        return state.ranking

    # --- stages ----------------------------------------------------------------------

    def parse_query(self, state: RankState) -> bool:
        """Query terms, their weights and idf, and the sessions the filters allow; False
        (with a note on the ranking) when nothing can match."""
        cfg = self.config
        ranking = state.ranking
        state.text = strip_controls(ranking.query)[: cfg.query.max_query_chars]
        state.n_docs, state.avgdl = self.index.stats()
        if not state.text.strip() or state.n_docs == 0:
            ranking.notes.append("empty query" if not state.text.strip() else "the index is empty")
            return False
        weights, df, corrections = self._query_terms(state.text, state.n_docs)
        ranking.terms, ranking.corrections = weights, corrections
        if not weights:
            ranking.notes.append("no query term occurs in any memory")
            return False
        state.allowed = None if state.filters.empty else self._allowed(state.filters)
        if state.allowed is not None and not state.allowed:
            ranking.notes.append("no session matches the filters")
            return False
        state.weights = weights
        state.idf = {t: self._idf(df[t], state.n_docs) for t in weights}
        state.ideal = sum(w * state.idf[t] for t, w in weights.items()) * (cfg.first.k1 + 1) or 1.0
        if cfg.match.speaker_weight:
            state.named = NamedSpeakers.find(self.index, weights, state.text, state.n_docs)
        state.times = self.times.read(state.text, state.allowed, state.now)
        return True

    def list_spoken(self, state: RankState, k: int, head: str | None) -> None:
        """No query, only speakers: their newest turns (of the sessions the other filters
        allow), newest first."""
        filters, ranking = state.filters, state.ranking
        found = newest_turns(
            self.index, filters.speakers, k, self._allowed(filters), *filters.period
        )
        ranking.candidates = [RankedCandidate(*row, 1.0, {"speaker": 1.0}) for row in found]
        ranking.hits = [self._hit(c, {}, head) for c in ranking.candidates]
        if not ranking.hits:
            ranking.notes.append(f"no turn spoken by {' and '.join(filters.speakers)}")

    def choose_candidates(self, state: RankState) -> None:
        """Where the candidates come from: a scan of the few documents the filters leave,
        or the postings (read deeper when the filters will drop most of them)."""
        state.limit = self.config.first.postings_limit
        if state.allowed is None:
            return
        if self.index.count_session_docs(state.allowed) <= self.config.first.scan_limit:
            state.scan = {d.id: d for d in self.index.session_docs(state.allowed, text=False)}
            state.where = {d.id: (d.skey, d.pos, d.kind) for d in state.scan.values()}
        else:  # most postings read will be filtered out: read deeper
            state.limit *= 10

    def first_round(self, state: RankState) -> None:
        """BM25 of the query terms."""
        state.base = self._bm25(
            state.weights,
            state.idf,
            state.avgdl,
            state.allowed,
            state.limit,
            state.scan,
            state.where,
        )

    def expand(self, state: RankState) -> None:
        """Pseudo relevance feedback and the second round, added to the normalised first
        round (``state.first``)."""
        cfg = self.config
        expansion = self._feedback(state)
        state.ranking.expansion = expansion
        idf = state.idf
        state.ideal_x = sum(w * idf[t] for t, w in expansion.items()) * (cfg.first.k1 + 1) or 1.0
        first = {i: v / state.ideal for i, v in state.base.items()}
        for i, v in state.extra.items():
            first[i] = first.get(i, 0.0) + cfg.expansion.prf_weight * v / state.ideal_x
        state.hop, state.ranking.hop_terms = self._second_round(
            first,
            state.weights,
            idf,
            state.n_docs,
            state.avgdl,
            state.allowed,
            state.scan,
            state.where,
        )
        for i, v in state.hop.items():
            first[i] = first.get(i, 0.0) + v
        state.first = first

    def fuse(self, state: RankState) -> None:
        """The best first-round documents plus their neighbours, dated turns and what the
        people the query names said, scored with what the first round says about their
        neighbours, session and summary (and the speaker lift); the best ``candidates`` of
        them go on with their components (``state.pre``)."""
        cfg = self.config
        ordered = [i for i, _ in sorted(state.first.items(), key=_second, reverse=True)]
        consider = set(ordered[: cfg.fusion.rescore_pool])
        consider |= self._neighbours(ordered[: cfg.fusion.neighbour_pool], state.where, state.scan)
        consider |= self.times.turns(state.times, state.allowed, state.where)
        spoken = state.named.turns(
            self.index, cfg.match.speaker_pool, state.allowed, state.where, *state.filters.period
        )
        by_name = spoken - consider
        consider = self._by_speaker(state, consider | by_name, by_name)
        asking = (
            self._asking(ordered[: cfg.fusion.neighbour_pool], state.where)
            if cfg.fusion.answer_weight
            else set()
        )
        context = FirstRound.of(state.first, state.where, asking, cfg)
        lift, times = state.lift, state.times
        # a named period decides which documents go on, too
        pool = heapq.nlargest(
            cfg.fusion.candidates,
            consider,
            key=lambda i: (
                (context.pre_score(i) + lift.get(i, 0.0)) * self.times.pre_factor(times, i)
            ),
        )
        state.pool = pool
        state.pre = {doc_id: context.components(doc_id, state) for doc_id in pool}

    def finish(self, state: RankState, k: int, head: str | None) -> None:
        """Score what needs the documents, order, read the shown texts and drop the weak."""
        cfg = self.config
        scan, pool = state.scan, state.pool
        rows = {i: scan[i] for i in pool} if scan is not None else self.index.docs(pool, text=False)
        candidates = self._score_documents(rows, state)
        candidates.sort(key=lambda c: (-c.score, c.session.session_id, c.doc.pos))
        if is_aggregate(state.text):
            candidates = self._gathered(candidates)
        # the text is read for the candidates that may be shown only
        shown = candidates[: max(k, SHOWN_CANDIDATES)]
        texts = self.index.texts(c.doc.id for c in shown)
        for cand in shown:
            cand.doc = replace(cand.doc, text=texts.get(cand.doc.id, ""))
        floor = max(
            cfg.cutoff.min_score,
            cfg.cutoff.relative_min * candidates[0].score if candidates else 0.0,
        )
        kept = [c for c in candidates if c.score >= floor]
        ranking = state.ranking
        ranking.below_min = len(candidates) - len(kept)
        ranking.candidates = candidates
        ranking.hits = [self._hit(c, state.weights, head) for c in kept[:k]]

    # --- stage helpers ---------------------------------------------------------------

    def _gathered(self, candidates: list[RankedCandidate]) -> list[RankedCandidate]:
        """An aggregate question's order, spread over sessions (see :mod:`.aggregate`);
        each factor below 1 joins the components as ``coverage``."""
        weight = self.config.aggregate.repeat_session_weight
        if not weight:
            return candidates
        picked = spread(candidates, lambda c: c.score, lambda c: c.doc.skey, weight)
        for cand, factor in picked:
            if factor < 1:
                cand.components["coverage"] = factor
                cand.score *= factor
        return [cand for cand, _ in picked]

    def _feedback(self, state: RankState) -> dict[str, float]:
        """Pseudo relevance feedback: terms borrowed from the best first-round documents
        (their BM25 goes to ``state.extra``)."""
        cfg = self.config
        if not (cfg.expansion.prf_weight > 0 and cfg.expansion.prf_docs > 0 and state.base):
            return {}
        base, scan, n_docs = state.base, state.scan, state.n_docs
        top = [i for i, _ in heapq.nlargest(cfg.expansion.prf_docs, base.items(), key=_second)]
        rows = {i: scan[i] for i in top} if scan is not None else self.index.docs(top)
        expansion = self._expansion(rows, base, state.weights, n_docs)
        if not expansion:
            return expansion
        idf = state.idf
        idf.update({t: self._idf(c, n_docs) for t, c in self.index.df(expansion).items()})
        expansion = {t: w for t, w in expansion.items() if t in idf}
        state.extra = self._bm25(
            expansion,
            idf,
            state.avgdl,
            state.allowed,
            cfg.expansion.prf_postings,
            scan,
            state.where,
            floor=cfg.expansion.prf_postings // 2,
        )
        return expansion

    def _second_round(
        self,
        first: dict[int, float],
        weights: dict[str, float],
        idf: dict[str, float],
        n_docs: int,
        avgdl: float,
        allowed: set[int] | None,
        scan: dict[int, DocRow] | None,
        where: dict[int, tuple[int, int, int]],
    ) -> tuple[dict[int, float], dict[str, float]]:
        """Multi-hop: the turns of OTHER sessions that share the rarest terms (names,
        places, things) of the best first-round documents, with their weighted scores; and
        those terms. Evidence of one question is often spread over sessions that only the
        entities tie together."""
        cfg = self.config
        if not (cfg.expansion.hop_weight and cfg.expansion.hop_docs and first):
            return {}, {}
        top = [i for i, _ in heapq.nlargest(cfg.expansion.hop_docs, first.items(), key=_second)]
        rows = {i: scan[i] for i in top} if scan is not None else self.index.docs(top, text=False)
        own = {i: set(row.terms.split()) - weights.keys() for i, row in rows.items()}
        df = self.index.df(set().union(*own.values()))
        chosen: dict[str, float] = {}
        for found in own.values():
            rare = sorted(
                (t for t in found if 1 < df.get(t, 0) <= cfg.expansion.hop_max_df),
                key=lambda t: (df[t], t),
            )
            for term in rare[: cfg.expansion.hop_terms]:
                chosen[term] = 1.0
                idf.setdefault(term, self._idf(df[term], n_docs))
        if not chosen:
            return {}, {}
        scores = self._bm25(
            chosen,
            idf,
            avgdl,
            allowed,
            cfg.expansion.prf_postings,
            scan,
            where,
            floor=cfg.expansion.prf_postings // 2,
        )
        ideal = sum(idf[t] for t in chosen) * (cfg.first.k1 + 1) or 1.0
        sources = {where[i][0] for i in top}
        return {
            i: cfg.expansion.hop_weight * v / ideal
            for i, v in scores.items()
            if where[i][0] not in sources
        }, chosen

    def _by_speaker(self, state: RankState, consider: set[int], by_name: set[int]) -> set[int]:
        """Only the turns of the speakers filtered for; and the lift of each turn whose
        speaker the query names (``state.lift``; ``by_name``: the turns only the name
        found)."""
        names = state.filters.speakers
        if not (state.named.people or names):
            return consider
        scan = state.scan
        if scan is not None and consider <= scan.keys():
            speakers = {i: scan[i].speaker for i in consider}
        else:
            speakers = self.index.doc_speakers(consider)
        if names:
            consider = {i for i in consider if spoke(speakers.get(i, ""), names)}
            speakers = {i: speakers.get(i, "") for i in consider}
        cfg = self.config
        scale = cfg.match.speaker_weight * (cfg.first.k1 + 1) / state.ideal
        state.lift = state.named.lifts(speakers, by_name, state.weights, state.idf, scale)
        return consider

    def _asking(
        self, best: list[int], where: dict[int, tuple[int, int, int]]
    ) -> set[tuple[int, int]]:
        """The places of those of the best first-round turns that end in a question: the
        turn after one is where its answer usually is."""
        texts = self.index.texts(i for i in best if where[i][2] == KIND_INTERACTION)
        return {where[i][:2] for i, text in texts.items() if text.rstrip().endswith("?")}

    def _neighbours(
        self,
        best: list[int],
        where: dict[int, tuple[int, int, int]],
        scan: dict[int, DocRow] | None,
    ) -> set[int]:
        """The turns next to the best first-round turns (added to ``where``)."""
        if not (self.config.fusion.neighbour_weight and best):
            return set()
        places = {
            (where[i][0], where[i][1] + step)
            for i in best
            if where[i][2] == KIND_INTERACTION
            for step in (-1, 1)
        }
        if scan is not None:
            found = {
                d.id: (d.skey, d.pos, d.kind)
                for d in scan.values()
                if d.kind == KIND_INTERACTION and (d.skey, d.pos) in places
            }
        else:
            found = self.index.neighbours(places)
        for doc_id, place in found.items():
            where.setdefault(doc_id, place)
        return set(found)

    def _allowed(self, filters: Filters) -> set[int]:
        keys = self.index.session_keys(
            session_ids=filters.sessions,
            tags=filters.tags,
            project=filters.project,
            participants=filters.participants,
            active_since=filters.since.timestamp() if filters.since else None,
            created_until=filters.until.timestamp() if filters.until else None,
        )
        for name in filters.speakers:
            keys &= self.index.speaker_sessions(name)
        return keys

    def _expansion(
        self,
        rows: dict[int, DocRow],
        base: dict[int, float],
        weights: dict[str, float],
        n_docs: int,
    ) -> dict[str, float]:
        cfg = self.config
        total = sum(base[i] for i in rows) or 1.0
        mass: dict[str, float] = {}
        for doc_id, row in rows.items():
            if not row.dl:
                continue
            share = base[doc_id] / total
            for term, n in Counter(row.terms.split()).items():
                if term not in weights:
                    mass[term] = mass.get(term, 0.0) + share * n / row.dl
        if not mass:
            return {}
        df = self.index.df(mass)
        scored = {
            t: m * self._idf(df.get(t, 1), n_docs) for t, m in mass.items() if df.get(t, 0) > 1
        }
        best = sorted(scored, key=lambda t: (-scored[t], t))[: cfg.expansion.prf_terms]
        if not best:
            return {}
        top = scored[best[0]]
        return {t: scored[t] / top for t in best}

    def _score_documents(self, rows: dict[int, DocRow], state: RankState) -> list[RankedCandidate]:
        """Add what needs the document itself: speaker, fuzzy, date, age and use."""
        cfg = self.config
        pre = state.pre
        text, filters, now = state.text, state.filters, state.now
        sessions = self.index.sessions({r.skey for r in rows.values()})
        access = (
            self.index.access_counts(s.session_id for s in sessions.values())
            if cfg.recency.activation_weight
            else {}
        )
        # a query of names only: their turns are ordered by time, not by spelling
        fuzzy_query = (
            " ".join(terms(text)) if cfg.match.fuzzy_weight and not state.named.names_only else ""
        )
        fuzzy_pool = set(sorted(rows, key=lambda i: -pre[i][0])[: cfg.match.fuzzy_candidates])
        stamp = (now or datetime.now(UTC)).timestamp()
        lo, hi = filters.period
        out: list[RankedCandidate] = []
        for doc_id, row in rows.items():
            session = sessions.get(row.skey)
            if session is None or not lo <= row.ts <= hi:
                continue
            additive, comp = pre[doc_id]
            comp = dict(comp)
            lift = state.lift.get(doc_id, 0.0)
            if lift:
                comp["speaker"] = lift + cfg.match.speaker_share * additive
            if doc_id in fuzzy_pool and fuzzy_query:
                ratio = fuzz.token_set_ratio(fuzzy_query, row.terms)
                comp["fuzzy"] = cfg.match.fuzzy_weight * ratio / 100
            temporal = self.times.temporal(state.times, row)
            if temporal is not None:
                comp["temporal"] = temporal
            additive = sum(comp.values())
            period = self.times.period(state.times, row)
            if period is not None:
                comp["period"] = period
                additive *= period
            decay = 1.0
            if cfg.recency.decay_weight:
                age_days = max(stamp - row.ts, 0.0) / 86400
                fresh = 0.5 ** (age_days / cfg.recency.half_life_days)
                decay = 1 - cfg.recency.decay_weight + cfg.recency.decay_weight * fresh
            activation = 1.0
            if cfg.recency.activation_weight:
                used = access.get((session.session_id, row.iid or ""), 0)
                activation = 1 + cfg.recency.activation_weight * math.log1p(used)
            comp["decay"] = decay
            comp["activation"] = activation
            out.append(RankedCandidate(row, session, additive * decay * activation, comp))
        return out

    def _hit(self, cand: RankedCandidate, weights: dict[str, float], head: str | None) -> Hit:
        row = cand.doc
        # the values are valid by construction: skip pydantic's validation on the hot path
        return Hit.model_construct(
            session_id=cand.session.session_id,
            interaction_id=row.iid,
            score=round(cand.score, 6),
            snippet=snippet(row.text, weights, self.config.cutoff.snippet_chars),
            commit=cand.session.commit or head,
            kind="summary" if row.kind == KIND_SUMMARY else "interaction",
            speaker=row.speaker or None,
            timestamp=datetime.fromtimestamp(row.ts, UTC),
            components={key: round(value, 6) for key, value in cand.components.items()},
        )
