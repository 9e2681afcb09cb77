"""The ranking's weights and limits: :class:`RankConfig`, grouped by the stage that reads
them (see :mod:`gitmem.search.rank`); every field has a measured default."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any


@dataclass(frozen=True)
class QueryConfig:
    """How much of a query is read, and how near a typo must be to a stored word."""

    max_query_terms: int = 48
    max_query_chars: int = 4000
    typo_min_ratio: float = 80.0


@dataclass(frozen=True)
class FirstRoundConfig:
    """BM25 of the query terms: its parameters and how many postings are read."""

    # BM25 with a low length normalisation: short chat turns are not penalised for brevity
    k1: float = 0.9
    b: float = 0.3
    # postings read per query term (highest impact first); rarer terms are read in full
    postings_limit: int = 3000
    postings_floor: int = 200
    # when filters leave at most this many documents, they are scored one by one
    scan_limit: int = 1500


@dataclass(frozen=True)
class ExpansionConfig:
    """Pseudo relevance feedback and the second (multi-hop) round."""

    prf_docs: int = 3
    prf_terms: int = 10
    prf_weight: float = 0.2
    # postings read per expansion term (scaled down for common words like postings_limit)
    prf_postings: int = 300
    # second round (multi-hop): the rarest terms of the best first-round turns find the
    # other sessions that talk about the same people, places and things
    hop_weight: float = 0.1
    hop_docs: int = 3
    hop_terms: int = 4
    hop_max_df: int = 20


@dataclass(frozen=True)
class FusionConfig:
    """What the first round lends a turn's neighbours, session and summary, and how many
    documents go on to be finished."""

    candidates: int = 100
    # first-round documents considered for the final scoring (plus neighbours, dated turns)
    rescore_pool: int = 300
    neighbour_weight: float = 0.5
    # a turn right after one of the best turns that ends in a question: the answer to it
    answer_weight: float = 0.35
    # ... and that question counts this share of the turn before it too ("What got you
    # into it?" asks about what was just said); chosen by leave-one-conversation-out on
    # LoCoMo dev (benchmarks/loo_weights.py; grid 0, 0.25, 0.5, 0.75, 1: two folds chose
    # 0.5, one 1)
    answer_context: float = 0.5
    # the neighbours of this many best first-round turns become candidates themselves
    neighbour_pool: int = 20
    session_weight: float = 0.3
    # a session's strength is the mean of its best turns (not one lucky turn)
    session_top: int = 3
    summary_weight: float = 0.5


@dataclass(frozen=True)
class MatchConfig:
    """Components that need the document itself: the speaker named and fuzzy spelling."""

    speaker_weight: float = 1.0
    # plus this share of the turn's own score: a lift that grows with the match, so a
    # named speaker's weak turn cannot outvote the other person's strong one by itself
    speaker_share: float = 0.2
    # the newest turns of each person a query names that are candidates even when no other
    # word of the query matches them
    speaker_pool: int = 50
    fuzzy_weight: float = 0.05
    fuzzy_candidates: int = 30


@dataclass(frozen=True)
class DateConfig:
    """A query naming a date prefers memories from then."""

    # a query naming a date ("in July 2023") prefers memories from then
    temporal_weight: float = 0.3
    temporal_half_life_days: float = 7.0
    # a query naming a date with a year also gets the turns of that time as candidates
    date_pool: int = 30
    # ... and at most this many turns that talk about that time ("yesterday" said the day
    # after it), per date named
    event_pool: int = 30


@dataclass(frozen=True)
class PeriodConfig:
    """A query naming a period ("in June 2023", "during the spring", "六月") decides: the
    turns said in it or about it are candidates, and every score is multiplied by
    ``1 - period_weight + period_weight * overlap`` (overlap: 1 inside, halving per
    ``period_half_life_days`` outside); 0 turns it off. Both chosen by every fold of
    leave-one-conversation-out on LoCoMo dev (benchmarks/loo_weights.py; grid weight 0, 0.5,
    0.7, 0.85 x half-life 3, 7, 14 days)."""

    period_weight: float = 0.5
    period_half_life_days: float = 3.0
    # at most this many turns said in, and as many turns about, each span named
    period_pool: int = 300


@dataclass(frozen=True)
class AggregateConfig:
    """A question that gathers ("What books has Melanie read?", see search/aggregate.py):
    each hit's score is multiplied by ``1 - repeat_session_weight`` for every better hit of
    its session, so its first hits cover more sessions; 0 turns it off. Chosen by
    leave-one-conversation-out on LoCoMo dev (benchmarks/loo_weights.py; grid 0, 0.05,
    0.1, 0.15: two folds chose 0.1, one 0.05; 0.15 costs one conversation 1.2 points of
    R@5, so the knob is kept small). Preferring the one person the question names (other
    speakers' turns lowered) was tried too and left out: the one fold that chose it lost
    R@5 on its held-out conversation."""

    repeat_session_weight: float = 0.1


@dataclass(frozen=True)
class RecencyConfig:
    """Multipliers for a memory's age and for how often it was used."""

    decay_weight: float = 0.1
    half_life_days: float = 180.0
    activation_weight: float = 0.05


@dataclass(frozen=True)
class CutoffConfig:
    """Which hits are kept, and how much of their text is shown."""

    min_score: float = 0.05
    # hits scoring below this share of the best hit's score are dropped too
    relative_min: float = 0.2
    snippet_chars: int = 200


@dataclass(frozen=True)
class DenseConfig:
    """Embeddings, when a model is configured: fused with the lexical order."""

    # reciprocal rank fusion of the lexical order with the dense top-N (search/fusion.py),
    # fit on LoCoMo dev with all-MiniLM-L6-v2 (the only model that runs here offline):
    # weight 1 and k 60 took turn R@5 from 73.3 to 59.6, these 74.1; a stronger model may
    # earn more weight
    dense_weight: float = 0.3
    rrf_k: float = 5.0
    dense_candidates: int = 50
    dense_min_similarity: float = 0.3
    # a search embeds at most this many memories still without a vector (the rest wait)
    dense_catchup: int = 128
    # score every stored vector exactly (slower on large stores: see search/vectors.py)
    dense_exact: bool = False


@dataclass(frozen=True)
class RankConfig:
    """Weights and limits of the ranking, grouped by stage; every field has a measured default.

    ``RankConfig().tuned(prf_weight=0, min_score=0.1)`` changes fields by name, wherever
    their group is."""

    query: QueryConfig = field(default_factory=QueryConfig)
    first: FirstRoundConfig = field(default_factory=FirstRoundConfig)
    expansion: ExpansionConfig = field(default_factory=ExpansionConfig)
    fusion: FusionConfig = field(default_factory=FusionConfig)
    match: MatchConfig = field(default_factory=MatchConfig)
    dates: DateConfig = field(default_factory=DateConfig)
    period: PeriodConfig = field(default_factory=PeriodConfig)
    aggregate: AggregateConfig = field(default_factory=AggregateConfig)
    recency: RecencyConfig = field(default_factory=RecencyConfig)
    cutoff: CutoffConfig = field(default_factory=CutoffConfig)
    dense: DenseConfig = field(default_factory=DenseConfig)

    def tuned(self, **changes: Any) -> RankConfig:
        """A copy with the named fields (``prf_weight``, ``min_score``, ...) changed."""
        grouped: dict[str, dict[str, Any]] = {}
        for name, value in changes.items():
            group = _GROUP_OF.get(name)
            if group is None:
                raise TypeError(f"RankConfig has no field {name!r}")
            grouped.setdefault(group, {})[name] = value
        return replace(self, **{g: replace(getattr(self, g), **c) for g, c in grouped.items()})


# field name -> the RankConfig group that holds it
_GROUP_OF = {
    f.name: group.name
    for group in fields(RankConfig)
    for f in fields(getattr(RankConfig(), group.name))
}
