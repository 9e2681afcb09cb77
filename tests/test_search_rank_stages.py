"""The stages of one ranking, each on its own: parse the query, the first round, the
expansions, the fusion of context signals, the finish; and ``rank`` is exactly them in order."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from gitmem.search.rank import Filters, RankConfig, Ranker, Ranking, RankState
from tests.test_search_retrieval import _index, _session

NOW = datetime(2024, 5, 1, tzinfo=UTC)

GARDEN = _session(
    "garden",
    [
        ("user", "Which tomato variety grows well on a balcony?"),
        ("assistant", "Try Sungold cherry tomatoes in a deep pot."),
        ("user", "And the basil next to them?"),
        ("assistant", "Basil likes the same sun; water both in the morning."),
    ],
)
TRAVEL = _session(
    "travel",
    [
        ("user", "Which train goes from Lisbon to Porto?"),
        ("assistant", "The Alfa Pendular, about three hours."),
        ("user", "Can I bring Sungold seedlings on the train?"),
    ],
)
KITCHEN = _session("kitchen", [("user", "The oven timer beeps twice."), ("assistant", "Noted.")])


def _state(ranker: Ranker, query: str, filters: Filters | None = None) -> RankState:
    return RankState(query, filters or Filters(), NOW, Ranking(query, {}, {}, {}, [], []))


def test_parse_query_weighs_terms_corrects_typos_and_stops_with_a_reason() -> None:
    ranker = Ranker(_index(GARDEN, TRAVEL, KITCHEN))
    state = _state(ranker, "tomatto balcony")
    assert ranker.parse_query(state)
    assert state.ranking.corrections == {"tomatto": "tomato"}
    assert set(state.weights) == {"tomato", "balconi"} and state.ideal > 1
    assert all(state.idf[t] > 0 for t in state.weights)
    for query, filters, note in [
        ("   ", None, "empty query"),
        ("xylophone quasar", None, "no query term occurs in any memory"),
        ("tomato", Filters(tags=("nowhere",)), "no session matches the filters"),
    ]:
        stopped = _state(ranker, query, filters)
        assert not ranker.parse_query(stopped)
        assert stopped.ranking.notes == [note]


def test_the_first_round_scores_one_by_one_when_the_filters_leave_few_documents() -> None:
    ranker = Ranker(_index(GARDEN, TRAVEL, KITCHEN))
    everywhere = _state(ranker, "Sungold")
    assert ranker.parse_query(everywhere)
    ranker.first_round(everywhere)
    assert everywhere.scan is None
    sessions = {everywhere.where[d][0] for d in everywhere.base}
    assert len(sessions) == 2 and all(v > 0 for v in everywhere.base.values())
    one = _state(ranker, "Sungold", Filters(sessions=("travel",)))
    assert ranker.parse_query(one)
    ranker.first_round(one)
    assert one.scan is not None and len(one.base) == 1
    assert set(one.base) < set(everywhere.base)


def test_expand_borrows_terms_and_hops_only_into_other_sessions() -> None:
    config = RankConfig(hop_max_df=5)
    ranker = Ranker(_index(GARDEN, TRAVEL, KITCHEN), config)
    state = _state(ranker, "balcony")
    assert ranker.parse_query(state)
    ranker.first_round(state)
    ranker.expand(state)
    assert state.ranking.expansion and "balconi" not in state.ranking.expansion
    assert set(state.first) >= set(state.base)
    top_session = state.where[max(state.base, key=state.base.__getitem__)][0]
    assert state.hop and all(state.where[d][0] != top_session for d in state.hop)
    off = Ranker(ranker.index, replace(config, prf_weight=0.0, hop_weight=0.0))
    plain = _state(off, "balcony")
    assert off.parse_query(plain)
    off.first_round(plain)
    off.expand(plain)
    assert not plain.ranking.expansion and not plain.hop
    assert plain.first == {d: v / plain.ideal for d, v in plain.base.items()}


def test_fuse_adds_the_answer_after_a_question_and_the_neighbours() -> None:
    ranker = Ranker(_index(GARDEN, TRAVEL, KITCHEN))
    state = _state(ranker, "train Lisbon Porto")
    assert ranker.parse_query(state)
    ranker.first_round(state)
    ranker.expand(state)
    ranker.fuse(state)
    by_place = {(state.where[d][0], state.where[d][1]): d for d in state.pool}
    question = max(state.base, key=state.base.__getitem__)
    skey, pos, _ = state.where[question]
    answer = by_place[skey, pos + 1]  # shares no word with the query
    assert answer not in state.base
    components = state.pre[answer][1]
    assert components["answer"] > 0 and components["context"] > 0
    assert state.pre[answer][0] == sum(components.values())
    assert len(state.pool) <= ranker.config.candidates and set(state.pre) == set(state.pool)


def test_finish_orders_drops_the_weak_and_cuts_to_k() -> None:
    ranker = Ranker(_index(GARDEN, TRAVEL, KITCHEN))
    state = _state(ranker, "Sungold tomatoes")
    assert ranker.parse_query(state)
    for stage in (ranker.first_round, ranker.expand, ranker.fuse):
        stage(state)
    ranker.finish(state, 1, None)
    ranking = state.ranking
    scores = [c.score for c in ranking.candidates]
    assert scores == sorted(scores, reverse=True)
    assert len(ranking.hits) == 1 and ranking.hits[0].score == pytest.approx(scores[0], abs=1e-6)
    floor = max(ranker.config.min_score, ranker.config.relative_min * scores[0])
    assert ranking.below_min == sum(1 for s in scores if s < floor)
    assert ranking.hits[0].snippet  # the text is read for what is shown


def test_rank_is_the_stages_in_order() -> None:
    ranker = Ranker(_index(GARDEN, TRAVEL, KITCHEN))
    for query in ["Sungold tomatoes", "train Lisbon Porto", "oven", "basil morning water"]:
        state = _state(ranker, query)
        if ranker.parse_query(state):
            for stage in (ranker.first_round, ranker.expand, ranker.fuse):
                stage(state)
            ranker.finish(state, 5, None)
        whole = ranker.rank(query, k=5, now=NOW)
        assert [(h.session_id, h.interaction_id, h.score) for h in whole.hits] == [
            (h.session_id, h.interaction_id, h.score) for h in state.ranking.hits
        ]
