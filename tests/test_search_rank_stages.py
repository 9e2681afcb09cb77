"""The ranking's stages one at a time, over a small in-memory index."""

from __future__ import annotations

import pytest

from gitmem.search.index import KIND_INTERACTION, SearchIndex
from gitmem.search.rank import Filters, FirstRound, Ranker, Ranking, RankState
from gitmem.search.rankconfig import RankConfig
from tests.test_search_retrieval import _index, _session


@pytest.fixture
def index() -> SearchIndex:
    return _index(
        _session(
            "garden",
            [
                ("Ana", "Which tomatoes did you plant this spring?"),
                ("Ben", "Cherry ones, next to the basil and the greenhouse."),
                ("Ana", "The greenhouse needs new glass."),
            ],
        ),
        _session("code", [("Ana", "The parser fails on nested lists."), ("Ben", "Use a stack.")]),
        _session("trip", [("Ben", "We hiked to the lake and saw herons.")]),
    )


def _state(query: str, filters: Filters | None = None) -> RankState:
    return RankState(Ranking(query, {}, {}, {}, [], []), filters or Filters(), None)


def _through(ranker: Ranker, query: str, stages: int, filters: Filters | None = None) -> RankState:
    state = _state(query, filters)
    steps = [ranker.parse_query, ranker.choose_candidates, ranker.first_round, ranker.expand]
    steps.append(ranker.fuse)
    assert steps[0](state)
    for step in steps[1:stages]:
        step(state)
    return state


def test_parse_query_weights_terms_and_stops_with_a_note(index: SearchIndex) -> None:
    ranker = Ranker(index)
    state = _state("tomatoes tomatoes greenhouse")
    assert ranker.parse_query(state)
    assert state.weights == {"tomato": 2.0, "greenhous": 1.0}
    assert state.idf["tomato"] > state.idf["greenhous"] > 0  # rarer term weighs more
    assert state.ideal == pytest.approx(
        (2 * state.idf["tomato"] + state.idf["greenhous"]) * (ranker.config.first.k1 + 1)
    )
    for query, filters, note in [
        ("   ", None, "empty query"),
        ("zebra", None, "no query term occurs in any memory"),
        ("tomatoes", Filters(sessions=("nowhere",)), "no session matches the filters"),
    ]:
        stopped = _state(query, filters)
        assert not ranker.parse_query(stopped)
        assert stopped.ranking.notes == [note]


def test_choose_candidates_scans_few_filtered_documents(index: SearchIndex) -> None:
    plain = _through(Ranker(index), "tomatoes", 2)
    assert plain.scan is None and plain.limit == RankConfig().first.postings_limit
    only = Filters(sessions=("garden",))
    scanned = _through(Ranker(index), "tomatoes", 2, only)
    assert scanned.scan is not None and len(scanned.scan) == 3
    assert {place[0] for place in scanned.where.values()} == scanned.allowed
    deep = _through(Ranker(index, RankConfig().tuned(scan_limit=0)), "tomatoes", 2, only)
    assert deep.scan is None and deep.limit == 10 * RankConfig().first.postings_limit


def test_first_round_scores_only_matching_documents(index: SearchIndex) -> None:
    state = _through(Ranker(index), "greenhouse", 3)
    assert len(state.base) == 2 and all(v > 0 for v in state.base.values())
    assert sorted(state.where[i][1] for i in state.base) == [1, 2]  # garden's 2nd and 3rd turn
    filtered = _through(Ranker(index), "greenhouse", 3, Filters(sessions=("code",)))
    assert filtered.base == {}


def test_expand_normalises_and_adds_borrowed_terms(index: SearchIndex) -> None:
    # "greenhouse" is in the best turn and in another one: a term worth borrowing
    plain = _through(Ranker(index, RankConfig().tuned(prf_weight=0, hop_weight=0)), "cherry", 4)
    assert plain.ranking.expansion == {} and plain.extra == {}
    assert plain.first == {i: v / plain.ideal for i, v in plain.base.items()}
    assert all(0 < v <= 1 for v in plain.first.values())
    fed = _through(Ranker(index, RankConfig().tuned(hop_weight=0)), "cherry", 4)
    assert fed.ranking.expansion == {"greenhous": 1.0}
    assert len(fed.first) == 2 and all(fed.first[i] > plain.first.get(i, 0.0) for i in fed.first)


def test_fuse_adds_the_neighbours_and_names_every_component(index: SearchIndex) -> None:
    config = RankConfig().tuned(prf_weight=0, hop_weight=0)
    state = _through(Ranker(index, config), "tomatoes", 5)
    # the answer after the question joins the pool though it never says "tomatoes"
    assert len(state.pool) > len(state.base)
    answer = next(i for i in state.pool if state.where[i][1] == 1)
    total, comp = state.pre[answer]
    assert comp["keyword"] == 0.0 and comp["answer"] > 0 and comp["context"] > 0
    assert total == sum(comp.values())
    small = _through(Ranker(index, RankConfig().tuned(candidates=1)), "tomatoes", 5)
    assert len(small.pool) == 1


def test_first_round_view_means_the_best_turns_of_a_session() -> None:
    where = {1: (7, 0, KIND_INTERACTION), 2: (7, 1, KIND_INTERACTION), 3: (7, 2, KIND_INTERACTION)}
    first = {1: 0.9, 2: 0.3, 3: 0.6}
    view = FirstRound.of(first, where, {(7, 0)}, RankConfig().tuned(session_top=2))
    assert view.session(7) == pytest.approx((0.9 + 0.6) / 2)
    assert view.session(8) == 0.0
    assert view.beside(7, 1) == 0.9
    config = view.config
    assert view.pre_score(2) == pytest.approx(
        0.3
        + config.fusion.session_weight * 0.75
        + config.fusion.answer_weight * 0.9
        + config.fusion.neighbour_weight * 0.9
    )


def test_finish_orders_reads_texts_and_drops_the_weak(index: SearchIndex) -> None:
    ranker = Ranker(index)
    state = _through(ranker, "tomatoes greenhouse", 5)
    ranker.finish(state, 1, "HEAD")
    ranking = state.ranking
    scores = [c.score for c in ranking.candidates]
    assert scores == sorted(scores, reverse=True)
    assert len(ranking.hits) == 1 and ranking.hits[0].commit == "HEAD"
    assert all(c.doc.text for c in ranking.candidates)
    strict = _through(Ranker(index, RankConfig().tuned(relative_min=1.0)), "tomatoes greenhouse", 5)
    Ranker(index, RankConfig().tuned(relative_min=1.0)).finish(strict, 10, None)
    assert len(strict.ranking.hits) == 1
    assert strict.ranking.below_min == len(strict.ranking.candidates) - 1


def test_tuned_changes_a_field_in_its_group_and_refuses_unknown_names() -> None:
    config = RankConfig().tuned(prf_weight=0.0, min_score=0.5, dense_exact=True)
    assert config.expansion.prf_weight == 0.0 and config.expansion.prf_docs == 3
    assert config.cutoff.min_score == 0.5 and config.dense.dense_exact
    assert config.fusion == RankConfig().fusion
    with pytest.raises(TypeError, match="no field 'prf'"):
        RankConfig().tuned(prf=1)


def test_an_answer_counts_the_turn_its_question_asks_about() -> None:
    # topic (0) -> short question about it (1) -> its answer (2), which repeats no word
    where = {i: (7, i, KIND_INTERACTION) for i in range(3)}
    first = {0: 0.8, 1: 0.2, 2: 0.0}
    config = RankConfig().tuned(session_weight=0, neighbour_weight=0, summary_weight=0)
    view = FirstRound.of(first, where, {(7, 1)}, config)
    assert view.asked(7, 2) == pytest.approx(0.2 + config.fusion.answer_context * 0.8)
    assert view.pre_score(2) == pytest.approx(config.fusion.answer_weight * view.asked(7, 2))
    plain = FirstRound.of(first, where, {(7, 1)}, config.tuned(answer_context=0))
    assert plain.pre_score(2) == pytest.approx(config.fusion.answer_weight * 0.2)


def test_the_answer_to_a_question_about_the_best_turn_ranks_above_weak_matches() -> None:
    index = _index(
        _session(
            "march",
            [
                ("Ana", "I marched for veterans rights downtown last weekend."),
                ("Ben", "What inspired you?"),
                ("Ana", "My grandfather served in the navy, so it felt personal."),
                ("Ben", "Respect."),
            ],
        ),
        _session("art", [("Ana", "The mural inspired me to paint again.")]),
        _session("book", [("Ben", "This novel inspired a whole film.")]),
        _session("talk", [("Ana", "Rights of tenants came up at the meeting.")]),
    )
    query = "What inspired Ana to march for veterans rights?"

    def rank_of_answer(config: RankConfig) -> int:
        hits = Ranker(index, config).rank(query, k=10).hits
        return [(h.session_id, h.interaction_id) for h in hits].index(("march", "t2"))

    assert rank_of_answer(RankConfig()) < rank_of_answer(RankConfig().tuned(answer_context=0))
