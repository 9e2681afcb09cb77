"""Ranking, filters, context assembly and the search/context CLI on real stores."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem import MemoryManager
from gitmem.cli import cli
from gitmem.errors import ValidationError
from gitmem.models import Interaction, Message, Session, Summary
from gitmem.search.context import Memory, assemble
from gitmem.search.index import SearchIndex
from gitmem.search.rank import Filters, Ranker
from gitmem.search.rankconfig import RankConfig
from gitmem.search.tokens import EstimateCounter
from gitmem.text import dates, stem, terms, words

T0 = datetime(2024, 4, 15, 15, 30, tzinfo=UTC)


@pytest.fixture
def mm(store: Path) -> MemoryManager:
    return MemoryManager.init(store, agent="tester")


def _session(
    sid: str,
    turns: list[tuple[str, str]],
    *,
    when: datetime = T0,
    tags: list[str] | None = None,
    summary: str | None = None,
    links: list[str] | None = None,
    project: str | None = None,
) -> Session:
    interactions = [
        Interaction(
            id=f"t{n}",
            timestamp=when + timedelta(minutes=n),
            messages=[Message(speaker=speaker, content=text)],
        )
        for n, (speaker, text) in enumerate(turns)
    ]
    return Session(
        id=sid,
        created=when,
        last_active=when,
        interactions=interactions,
        participants=sorted({s for s, _ in turns}),
        tags=tags or [],
        links=links or [],
        project=project,
        summary=Summary(text=summary, generated=when) if summary else None,
    )


def _index(*sessions: Session) -> SearchIndex:
    index = SearchIndex(":memory:")
    with index.writing():
        for session in sessions:
            index.put_session(session, path=session.id, blob="b-" + session.id)
    return index


# --- analysis ----------------------------------------------------------------------------


def test_terms_stem_english_and_drop_stopwords() -> None:
    assert terms("What did the decorators do?") == ["decor"]
    assert stem("running") == "run" and stem("relational") == "relat"
    assert terms("Caroline's adoption agencies") == ["carolin", "adopt", "agenc"]
    assert words("The Python decorators!") == ["python", "decorators"]


def test_terms_cut_cjk_into_characters_and_pairs() -> None:
    got = terms("Python装饰器")
    assert got[0] == "python"
    assert {"装", "饰", "器", "装饰", "饰器"} <= set(got)
    # particles are dropped as single characters but stay inside pairs
    assert "的" not in terms("我的书") and "我的" in terms("我的书")


def test_dates_named_in_text() -> None:
    assert dates("What did she do on 31 July, 2023?") == [(2023, 7, 31)]
    assert dates("in July 2023") == [(2023, 7, None)]
    assert dates("camping in June") == [(None, 6, None)]
    assert dates("2024年4月15日的会议") == [(2024, 4, 15)]
    assert dates("may I ask something") == []


# --- ranking -----------------------------------------------------------------------------


def test_keyword_match_ranks_first_with_components() -> None:
    index = _index(
        _session(
            "books",
            [
                ("User", "Recommend books about Python asyncio"),
                ("Assistant", "Try Using Asyncio in Python"),
            ],
        ),
        _session(
            "food",
            [("User", "How do I bake sourdough bread?"), ("Assistant", "Feed your starter first")],
        ),
    )
    hits = Ranker(index).rank("asyncio book recommendations", k=5).hits
    assert hits[0].session_id == "books"
    assert hits[0].interaction_id == "t0"
    assert hits[0].components["keyword"] > 0
    assert set(hits[0].components) >= {"keyword", "context", "session", "decay", "activation"}
    assert all(h.session_id != "food" for h in hits)


def test_unrelated_query_gives_nothing_rather_than_a_guess() -> None:
    index = _index(_session("a", [("User", "We talked about gardening tomatoes")]))
    ranking = Ranker(index).rank("quantum chromodynamics lattice", k=5)
    assert ranking.hits == []
    assert ranking.notes


def test_min_score_cuts_weak_matches() -> None:
    index = _index(_session("a", [("User", "tomatoes " + "filler words here " * 30)]))
    strict = Ranker(index, RankConfig().tuned(min_score=0.99)).rank("tomatoes", k=5)
    assert strict.hits == [] and strict.below_min == 1
    assert Ranker(index).rank("tomatoes", k=5).hits


def test_cjk_query_finds_chinese_memory(mm: MemoryManager) -> None:
    mm.save_interaction(
        "py-zh", "Python装饰器怎么用？", "装饰器是接收一个函数并返回新函数的函数。", timestamp=T0
    )
    mm.save_interaction("cooking", "怎么做红烧肉？", "先焯水，再炒糖色。", timestamp=T0)
    mm.save_interaction("en", "What is a Python list?", "An ordered sequence.", timestamp=T0)
    hits = mm.search("Python装饰器")
    assert hits[0].session_id == "py-zh"
    assert "装饰器" in hits[0].snippet
    assert mm.search("讲讲装饰器")[0].session_id == "py-zh"


def test_typo_is_corrected_from_the_vocabulary() -> None:
    index = _index(
        _session("a", [("User", "I love the asyncio library")]),
        _session("b", [("User", "Cooking pasta tonight")]),
    )
    ranking = Ranker(index).rank("asyncoi", k=3)
    assert ranking.corrections == {"asyncoi": "asyncio"}
    assert ranking.hits[0].session_id == "a"


def test_summary_lifts_its_sessions_turns() -> None:
    plain = _session("plain", [("User", "we planned the garden"), ("User", "tomatoes or beans")])
    summed = _session(
        "summed",
        [("User", "we planned the garden"), ("User", "tomatoes or beans")],
        summary="A long talk about the vegetable garden layout",
    )
    hits = Ranker(_index(plain, summed)).rank("garden", k=10).hits
    turns = [h for h in hits if h.kind == "interaction"]
    assert turns[0].session_id == "summed"
    assert turns[0].components["summary"] > 0
    assert any(h.kind == "summary" for h in hits)


def test_neighbouring_turn_lends_context() -> None:
    session = _session(
        "s",
        [
            ("Melanie", "What did you take away from the book Becoming Nicole?"),
            ("Caroline", "It taught me self-acceptance and hope."),
            ("Melanie", "Unrelated chat about weather."),
        ],
    )
    hits = Ranker(_index(session)).rank("Becoming Nicole book", k=5).hits
    by_id = {h.interaction_id: h for h in hits}
    assert by_id["t1"].components["keyword"] == 0
    assert by_id["t1"].components["context"] > 0


def test_speaker_named_in_query_is_preferred() -> None:
    session = _session(
        "s", [("Jon", "I opened a dance studio"), ("Gina", "I opened a clothing store")]
    )
    hits = Ranker(_index(session)).rank("What did Gina open?", k=2).hits
    assert hits[0].interaction_id == "t1"
    assert hits[0].components["speaker"] > 0


def test_date_in_query_prefers_memories_from_then() -> None:
    may = _session(
        "may", [("Maria", "I went hiking with friends")], when=datetime(2023, 5, 3, tzinfo=UTC)
    )
    july = _session(
        "july", [("Maria", "I went hiking with friends")], when=datetime(2023, 7, 20, tzinfo=UTC)
    )
    index = _index(may, july)
    hits = Ranker(index).rank("Where did Maria go hiking in July 2023?", k=2).hits
    assert hits[0].session_id == "july"
    assert hits[0].components["temporal"] > hits[1].components["temporal"]
    # no word in common: the turns of that month are still found
    hits = Ranker(index).rank("What did Maria do in July 2023?", k=2).hits
    assert [h.session_id for h in hits] == ["july"]


def test_decay_prefers_recent_and_activation_prefers_used() -> None:
    old = _session(
        "old", [("User", "notes on the budget spreadsheet")], when=datetime(2020, 1, 1, tzinfo=UTC)
    )
    new = _session(
        "new", [("User", "notes on the budget spreadsheet")], when=datetime(2024, 1, 1, tzinfo=UTC)
    )
    index = _index(old, new)
    now = datetime(2024, 2, 1, tzinfo=UTC)
    hits = Ranker(index).rank("budget spreadsheet", k=2, now=now).hits
    assert hits[0].session_id == "new"
    config = RankConfig().tuned(decay_weight=0.0, activation_weight=0.5)
    index.touch([("old", "t0")] * 1, when=0)
    index.touch([("old", "t0")], when=0)
    hits = Ranker(index, config).rank("budget spreadsheet", k=2, now=now).hits
    assert hits[0].session_id == "old"
    assert hits[0].components["activation"] > 1


def test_filters_narrow_the_candidates() -> None:
    a = _session("a", [("User", "python testing tips")], tags=["python", "work"], project="alpha")
    b = _session(
        "b",
        [("Bob", "python testing tricks")],
        tags=["python"],
        project="beta",
        when=datetime(2024, 6, 1, tzinfo=UTC),
    )
    index = _index(a, b)
    rank = Ranker(index).rank

    def ids(filters: Filters) -> set[str]:
        return {h.session_id for h in rank("python testing", k=5, filters=filters).hits}

    assert ids(Filters()) == {"a", "b"}
    assert ids(Filters(tags=("work",))) == {"a"}
    assert ids(Filters(tags=("python", "work"))) == {"a"}
    assert ids(Filters(project="beta")) == {"b"}
    assert ids(Filters(participants=("bob",))) == {"b"}
    assert ids(Filters(sessions=("a",))) == {"a"}
    assert ids(Filters(since=datetime(2024, 5, 1, tzinfo=UTC))) == {"b"}
    assert ids(Filters(until=datetime(2024, 5, 1, tzinfo=UTC))) == {"a"}
    unknown = rank("python", k=5, filters=Filters(tags=("nope",)))
    assert unknown.hits == [] and "no session matches the filters" in unknown.notes


def test_postings_limit_keeps_the_best_documents() -> None:
    sessions = [_session(f"s{n}", [("User", "common word " + "pad " * n)]) for n in range(30)]
    index = _index(*sessions)
    config = RankConfig().tuned(postings_limit=5, postings_floor=5, prf_weight=0)
    hits = Ranker(index, config).rank("common", k=10).hits
    assert hits[0].session_id == "s0"  # shortest document, highest impact
    assert {h.session_id for h in hits} <= {f"s{n}" for n in range(5)}


# --- manager API ---------------------------------------------------------------------------


def test_search_bad_input(mm: MemoryManager) -> None:
    mm.save_interaction("s", "Tell me about the Rust borrow checker", "It tracks lifetimes.")
    with pytest.raises(ValidationError, match="empty"):
        mm.search("")
    with pytest.raises(ValidationError, match="empty"):
        mm.search("  \n\t ")
    with pytest.raises(ValidationError, match="k must"):
        mm.search("rust", k=0)
    big = mm.search("borrow checker " + "x" * 100_000)
    assert big[0].session_id == "s"
    assert any("only the first" in n for n in big.notes)
    weird = mm.search("borrow\x00\x1b[31m checker\x7f")
    assert weird[0].session_id == "s"
    none = mm.search("rust", tags=["no-such-tag"])
    assert list(none) == []
    assert "no session has the tag 'no-such-tag'" in none.notes


def test_search_explain_and_commit(mm: MemoryManager) -> None:
    first = mm.save_interaction("s", "We adopted a cat named Miso", "Lovely name!")
    mm.save_interaction("s", "Miso learned to open doors", "Clever cat.")
    hits = mm.search("Miso cat", explain=True)
    assert hits.explanation is not None
    assert hits.explanation["terms"] == {"miso": 1.0, "cat": 1.0}
    rows = hits.explanation["candidates"]
    assert rows[0]["status"] == "hit" and "keyword" in rows[0]["components"]
    assert hits[0].commit == mm.head()
    past = mm.search("doors", commit=first)
    assert list(past) == []
    assert mm.search("doors")[0].interaction_id is not None


def test_include_links_adds_linked_summaries(mm: MemoryManager) -> None:
    mm.put_session(
        _session(
            "design",
            [("User", "the storage layer design")],
            summary="We chose SQLite for the derived index.",
        )
    )
    mm.put_session(
        _session("main", [("User", "see [[design]] about the storage layer")], links=["design"])
    )
    hits = mm.search("storage layer", include_links=True, session="main")
    linked = [h for h in hits if h.components.get("link")]
    assert [h.session_id for h in linked] == ["design"]
    assert linked[0].kind == "summary"


# --- context -----------------------------------------------------------------------------


def _memories(n: int) -> list[Memory]:
    return [
        Memory(f"other-{i}", f"t{i}", "interaction", T0, f"memory number {i} " * 5, 1 / (i + 1))
        for i in range(n)
    ]


def test_context_never_exceeds_the_budget_and_keeps_order() -> None:
    session = _session(
        "cur",
        [("User", f"turn {n} " + "words " * n) for n in range(12)],
        summary="Summary text " * 10,
    )
    counter = EstimateCounter()
    for budget in range(1, 400, 7):
        plan = assemble(session, _memories(6), budget, counter)
        assert plan.used <= budget
        assert sum(counter.count(m["content"]) + 4 for m in plan.messages) == plan.used
        roles = [m["role"] for m in plan.messages]
        # summary first, memories last
        if plan.messages and plan.messages[-1]["content"].startswith("Relevant memories"):
            assert roles[-1] == "system"
    plan = assemble(session, _memories(3), 2000, counter)
    assert plan.messages[0]["content"].startswith("Summary of this conversation")
    assert plan.messages[-1]["content"].splitlines()[1].startswith("- [other-0 · turn t0")
    turns = [m["content"] for m in plan.messages[1:-1]]
    assert turns == sorted(turns, key=lambda t: int(t.split()[1]))  # chronological
    assert len(turns) == 8  # recent_turns default


def test_context_cuts_memories_then_turns_without_gaps() -> None:
    session = _session("cur", [("User", f"turn {n} " + "words " * 20) for n in range(6)])
    plan = assemble(session, _memories(4), 80, EstimateCounter())
    kept = [p.ref for p in plan.included if p.source == "recent"]
    assert kept == ["t5", "t4"][: len(kept)]
    assert any(p.reason == "over budget" for p in plan.cut)


def test_retrieve_context_through_the_manager(mm: MemoryManager) -> None:
    mm.save_interaction(
        "trip", "We booked flights to Lisbon for May", "Great, pack light.", timestamp=T0
    )
    mm.save_interaction("today", "Any plans?", "Not yet.", timestamp=T0 + timedelta(days=3))
    messages = mm.retrieve_context("today", "Lisbon flights", max_tokens=500, explain=True)
    assert messages[0] == {"role": "user", "content": "Any plans?"}
    assert messages[1] == {"role": "assistant", "content": "Not yet."}
    assert messages[-1]["role"] == "system"
    assert "[trip · turn" in messages[-1]["content"] and "Lisbon" in messages[-1]["content"]
    assert messages.explanation is not None
    assert messages.explanation["budget"]["used"] <= 500
    # what went into a context counts as used
    assert mm.search("Lisbon")[0].components["activation"] > 1
    tiny = mm.retrieve_context("today", "Lisbon flights", max_tokens=12)
    assert sum(EstimateCounter().count(m["content"]) + 4 for m in tiny) <= 12
    assert mm.retrieve_context("today", "", max_tokens=500) == messages[:2]
    assert mm.retrieve_context("brand-new", "Lisbon", max_tokens=500)[0]["role"] == "system"
    with pytest.raises(ValidationError):
        mm.retrieve_context("today", "x", max_tokens=0)


def test_token_counter_is_pluggable(mm: MemoryManager) -> None:
    class Chars:
        name = "chars"

        def count(self, text: str) -> int:
            return len(text)

    mm.save_interaction("s", "hello there", "general kenobi")
    messages = mm.retrieve_context(
        "s", "kenobi", max_tokens=40, token_counter=Chars(), explain=True
    )
    assert messages.explanation is not None
    assert messages.explanation["budget"]["counter"] == "chars"
    assert sum(len(m["content"]) + 4 for m in messages) <= 40


# --- CLI ---------------------------------------------------------------------------------


def test_cli_search_and_context(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction(
        "s1", "Recommend books on asyncio", "Try Using Asyncio in Python", tags=["python"]
    )
    runner = CliRunner()
    out = runner.invoke(cli, ["--repo", str(store), "search", "asyncio books", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["hits"][0]["session_id"] == "s1"
    out = runner.invoke(cli, ["--repo", str(store), "search", "asyncio", "--explain"])
    assert out.exit_code == 0 and "keyword" in out.output and "terms: asyncio" in out.output
    out = runner.invoke(cli, ["--repo", str(store), "search", "zebra", "--tag", "nope"])
    assert out.exit_code == 0 and "no session has the tag 'nope'" in out.output
    out = runner.invoke(cli, ["--repo", str(store), "search", ""])
    assert out.exit_code == 1 and "empty" in out.output
    out = runner.invoke(
        cli, ["--repo", str(store), "context", "s1", "asyncio", "--explain", "--max-tokens", "300"]
    )
    assert out.exit_code == 0 and "budget:" in out.output and "[assistant]" in out.output
    out = runner.invoke(cli, ["--repo", str(store), "--json", "context", "s1", "asyncio"])
    assert json.loads(out.output)["messages"][0]["role"] == "user"
    out = runner.invoke(cli, ["--repo", str(store), "--json", "reindex"])
    assert out.exit_code == 0 and json.loads(out.output)["sessions"] == 1


def test_async_manager_has_the_retrieval_methods(store: Path) -> None:
    import asyncio

    from gitmem import AsyncMemoryManager

    async def run() -> None:
        amm = AsyncMemoryManager.init(store)
        await amm.save_interaction("s", "the moon landing in 1969", "Apollo 11")
        hits = await amm.search("moon landing")
        assert hits[0].session_id == "s"
        messages = await amm.retrieve_context("other", "Apollo", max_tokens=200)
        assert "Apollo" in messages[-1]["content"]
        report = await amm.reindex()
        assert report.indexed == 1

    asyncio.run(run())
