"""Retrieval II: irregular inflections, the answer after a question, the second (multi-hop)
round and the speaker lift, on real stores and in-memory indexes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from gitmem import MemoryManager
from gitmem.search.index import SearchIndex
from gitmem.search.rank import Ranker
from gitmem.search.rankconfig import RankConfig
from gitmem.text import IRREGULAR, stem, terms
from tests.conftest import git
from tests.test_search_retrieval import _index, _session

T0 = datetime(2024, 4, 15, 15, 30, tzinfo=UTC)


def _order(index: SearchIndex, query: str, config: RankConfig | None = None) -> list[str]:
    ranking = Ranker(index, config or RankConfig()).rank(query, k=10)
    return [f"{h.session_id}/{h.interaction_id}" for h in ranking.hits]


# --- irregular inflections -----------------------------------------------------------------


def test_irregular_forms_share_the_base_words_term() -> None:
    for form, base in [
        ("met", "meet"),
        ("went", "go"),
        ("ran", "run"),
        ("bought", "buy"),
        ("children", "child"),
        ("taught", "teach"),
        ("swam", "swim"),
    ]:
        assert stem(form) == stem(base), form
    assert terms("We met when she ran and went swimming") == terms("we meet, she run, go swim")
    # nouns that are also past forms keep their own meaning
    for noun in ("rose", "wound", "ground", "left", "lead"):
        assert noun not in IRREGULAR


def test_a_past_tense_memory_answers_a_present_tense_question(store: Path) -> None:
    mm = MemoryManager.init(store, agent="tester")
    mm.save_interaction("trip", "We went to Lisbon and met my old teacher there.", "Nice!")
    mm.save_interaction("other", "The weather is grey.", "It is.")
    hits = mm.search("Who did I meet when I go to Lisbon?", k=3)
    assert hits and hits[0].session_id == "trip"
    explained = mm.search("did they meet", k=3, explain=True)
    assert explained and explained[0].session_id == "trip"
    assert "meet" in explained.explanation["terms"]
    assert git(store, "status", "--porcelain") == ""


# --- the answer after a question ---------------------------------------------------------


def _asked_and_answered() -> SearchIndex:
    chat = _session(
        "chat",
        [
            ("Bo", "I finally bought the new running shoes this weekend."),
            ("Cy", "Love that purple colour on the shoes! For trails or for the track?"),
            ("Bo", "Mostly up in the mountains near home."),
            ("Cy", "Nice, have fun out there."),
        ],
    )
    noise = [
        _session(
            f"n{n}",
            [
                ("Bo", f"Shoes {n}: the shop had shoes of every colour, {w}."),
                ("Cy", f"Colour talk {n}: {w} is a good colour for shoes."),
            ],
            when=T0 - timedelta(days=n + 1),
        )
        for n, w in enumerate(["red", "blue", "green", "black", "white", "grey"])
    ]
    return _index(chat, *noise)


def test_the_turn_after_a_matching_question_is_lifted_as_its_answer() -> None:
    index = _asked_and_answered()
    query = "What colour shoes for trails or the track?"
    ranking = Ranker(index, RankConfig()).rank(query, k=10)
    answer = next(h for h in ranking.hits if (h.session_id, h.interaction_id) == ("chat", "t2"))
    assert answer.components["answer"] > 0
    with_answer = _order(index, query)
    without = _order(index, query, RankConfig().tuned(answer_weight=0.0))
    assert with_answer.index("chat/t2") < without.index("chat/t2")


def test_a_statement_before_a_turn_gives_no_answer_component() -> None:
    index = _asked_and_answered()
    ranking = Ranker(index, RankConfig()).rank("bought new running shoes weekend", k=10)
    after = [h for h in ranking.hits if (h.session_id, h.interaction_id) == ("chat", "t1")]
    assert not after or "answer" not in after[0].components


# --- the second round (multi-hop) ------------------------------------------------------


def _two_hops() -> SearchIndex:
    # the question names the studio; only the first session ties it to "Moravec", and
    # the second session talks about Moravec without ever naming the studio
    first = _session(
        "s1",
        [
            ("Jo", "My pottery studio is run by Moravec, a patient teacher."),
            ("Al", "Sounds lovely."),
        ],
    )
    second = _session(
        "s2",
        [
            ("Jo", "Moravec showed me how to glaze a bowl in cobalt blue."),
            ("Al", "Cobalt is a beautiful colour."),
        ],
        when=T0 + timedelta(days=3),
    )
    fillers = [
        _session(
            f"f{n}",
            [
                ("Jo", f"Pottery day {n}: the studio was busy with {w} classes."),
                ("Al", f"I hope the {w} class went well."),
            ],
            when=T0 - timedelta(days=n + 1),
        )
        for n, w in enumerate(["morning", "evening", "weekend", "kids", "beginner"])
    ]
    return _index(first, second, *fillers)


def test_the_second_round_finds_another_session_through_a_rare_name() -> None:
    index = _two_hops()
    query = "What did Jo learn at the pottery studio?"
    ranking = Ranker(index, RankConfig()).rank(query, k=10)
    assert "moravec" in ranking.hop_terms
    hopped = next(h for h in ranking.hits if (h.session_id, h.interaction_id) == ("s2", "t0"))
    assert hopped.components["hop"] > 0
    plain = Ranker(index, RankConfig().tuned(hop_weight=0.0)).rank(query, k=10)
    before = next(h for h in plain.hits if (h.session_id, h.interaction_id) == ("s2", "t0"))
    assert "hop" not in before.components and before.score < hopped.score


def test_the_second_round_never_scores_the_sources_own_session() -> None:
    index = _two_hops()
    ranking = Ranker(index, RankConfig()).rank("pottery studio Moravec", k=10)
    for hit in ranking.hits:
        if hit.session_id == "s1":
            assert "hop" not in hit.components


def test_single_hop_order_holds_with_the_second_round() -> None:
    index = _two_hops()
    config = RankConfig()
    plain = config.tuned(hop_weight=0.0)
    query = "Who runs the pottery studio?"
    assert _order(index, query, config)[0] == _order(index, query, plain)[0] == "s1/t0"


# --- the speaker lift ----------------------------------------------------------------------


def test_the_speaker_lift_grows_with_the_turns_own_match() -> None:
    index = _index(
        _session(
            "s",
            [
                ("Mia", "The lighthouse keeper showed me the old lighthouse lamp."),
                ("Mia", "I ate lunch near the harbour."),
                ("Tom", "The lighthouse lamp is from 1890."),
            ],
        )
    )
    ranking = Ranker(index, RankConfig()).rank("What did Mia see at the lighthouse?", k=10)
    by_id = {h.interaction_id: h for h in ranking.hits}
    strong, weak = by_id["t0"].components, by_id.get("t1")
    assert strong["speaker"] > (weak.components["speaker"] if weak else 0.0)
    flat = Ranker(index, RankConfig().tuned(speaker_share=0.0)).rank(
        "What did Mia see at the lighthouse?"
    )
    flat_strong = next(h for h in flat.hits if h.interaction_id == "t0").components["speaker"]
    assert strong["speaker"] > flat_strong


# --- bad input -----------------------------------------------------------------------------


def test_odd_queries_give_clear_answers_and_write_nothing(store: Path) -> None:
    mm = MemoryManager.init(store, agent="tester")
    mm.save_interaction("trip", "We went to Lisbon and met my old teacher there.", "Nice!")
    head = git(store, "rev-parse", "HEAD")
    # a script no memory uses: an empty list that says why
    thai = mm.search("ครูเก่าของฉันอยู่ที่ลิสบอน", explain=True)
    assert list(thai) == [] and any("no query term" in n for n in thai.notes)
    # 100 KB of words, the real ones first: the cut is said, the hit still comes
    huge = mm.search("Lisbon teacher " + "meeting " * 12_500, explain=True)
    assert huge and huge[0].session_id == "trip"
    assert any("only the first" in n for n in huge.notes)
    # a query of words that each occur everywhere or nowhere still ranks without error
    assert mm.search("went met", k=2)[0].session_id == "trip"
    assert git(store, "rev-parse", "HEAD") == head
    assert git(store, "status", "--porcelain") == ""
