"""Which curated facts open a context: only those that matter for the query and the session
(the query's matches, the pinned ones, those learned in this session), within the facts'
share of the budget, however small the memory file; ``--explain`` says why each fact came
or stayed out. ``pin_fact`` / ``gitmem facts pin`` pin a fact, one commit each."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem.aio import AsyncMemoryManager
from gitmem.cli import cli
from gitmem.errors import FactNotFound, ValidationError
from gitmem.format.facts import Fact
from gitmem.manager import MemoryManager
from gitmem.search.context import FACTS_HEADER
from tests.conftest import git

NOT_RELEVANT = "not relevant to the query"


@pytest.fixture
def mm(store: Path) -> MemoryManager:
    manager = MemoryManager.init(store)
    manager.save_interaction(
        "chat", "My cat keeps scratching the sofa.", "Try a scratching post near the sofa."
    )
    manager.save_interaction("other", "Which train goes to Porto?", "The Alfa Pendular.")
    return manager


@pytest.fixture
def topics(mm: MemoryManager) -> dict[str, Fact]:
    """A small memory file about several unrelated topics (all of it fits the share)."""
    return {
        "tea": mm.remember("Prefers green tea without sugar.", section="Preferences"),
        "city": mm.remember("Lives in Lisbon near the river.", section="User"),
        "cat": mm.remember("The cat is called Biscuit and is four years old.", section="Pets"),
        "car": mm.remember("Drives an old blue Volvo estate.", section="User"),
    }


def facts_lines(messages: list[dict[str, str]]) -> list[str]:
    first = messages[0]["content"] if messages else ""
    return first.splitlines()[1:] if first.startswith(FACTS_HEADER) else []


def invoke(store: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--repo", str(store), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_a_query_about_one_topic_gets_that_fact_and_not_the_others(
    mm: MemoryManager, topics: dict[str, Fact]
) -> None:
    messages = mm.retrieve_context("other", "what is the cat called", 2000, explain=True)
    cat = topics["cat"]
    assert facts_lines(messages) == [f"- {cat.text} [{cat.id}]"]
    text = "\n".join(m["content"] for m in messages)
    for name in ("tea", "city", "car"):
        assert f"[{topics[name].id}]" not in text
    info = messages.explanation
    assert info is not None
    facts = info["facts"]
    assert facts["included"] == [cat.id] and facts["weighed_all"] is True
    why = {row["id"]: row["reason"] for row in facts["included_reasons"]}
    assert why[cat.id].startswith("matched: ") and "cat" in why[cat.id]
    cut = {row["id"]: row["reason"] for row in facts["cut"]}
    assert set(cut) == {topics[n].id for n in ("tea", "city", "car")}
    assert all(reason.startswith(NOT_RELEVANT) for reason in cut.values())


def test_no_match_and_no_pin_gives_no_facts_message(
    mm: MemoryManager, topics: dict[str, Fact]
) -> None:
    messages = mm.retrieve_context("other", "which train to Porto", 2000, explain=True)
    assert facts_lines(messages) == []
    assert all(not m["content"].startswith(FACTS_HEADER) for m in messages)
    assert messages.explanation is not None
    assert len(messages.explanation["facts"]["cut"]) == len(topics)


def test_a_pinned_fact_always_comes_first(
    mm: MemoryManager, store: Path, topics: dict[str, Fact]
) -> None:
    tea = topics["tea"]
    before = mm.head()
    pinned = mm.pin_fact(tea.id)
    assert "pinned" in pinned.tags and mm.fact(tea.id).tags == ("pinned",)
    assert git(store, "rev-list", "--count", f"{before}..HEAD").strip() == "1"
    assert git(store, "log", "-1", "--format=%(trailers:key=Gitmem-Op,valueonly)").strip() == (
        "pin-fact"
    )
    assert mm.pin_fact(tea.id).tags == ("pinned",)  # already pinned: no commit
    assert git(store, "rev-list", "--count", f"{before}..HEAD").strip() == "1"
    messages = mm.retrieve_context("other", "what is the cat called", 2000, explain=True)
    cat = topics["cat"]
    assert facts_lines(messages) == [f"- {tea.text} [{tea.id}]", f"- {cat.text} [{cat.id}]"]
    assert messages.explanation is not None
    why = {row["id"]: row["reason"] for row in messages.explanation["facts"]["included_reasons"]}
    assert why[tea.id] == "pinned"
    # an empty query or one that matches nothing still gets the pinned fact
    assert facts_lines(mm.retrieve_context("other", "", 2000)) == [f"- {tea.text} [{tea.id}]"]
    assert facts_lines(mm.retrieve_context("other", "Porto", 2000)) == [f"- {tea.text} [{tea.id}]"]
    unpinned = mm.pin_fact(tea.id, pinned=False)
    assert unpinned.tags == ()
    assert git(store, "log", "-1", "--format=%(trailers:key=Gitmem-Op,valueonly)").strip() == (
        "unpin-fact"
    )
    assert facts_lines(mm.retrieve_context("other", "Porto", 2000)) == []
    with pytest.raises(FactNotFound):
        mm.pin_fact("fnope")


def test_a_replaced_fact_cannot_be_pinned(mm: MemoryManager, topics: dict[str, Fact]) -> None:
    newer = mm.supersede(topics["city"].id, "Lives in Porto.")
    with pytest.raises(ValidationError, match=newer.id):
        mm.pin_fact(topics["city"].id)


def test_pinned_facts_stay_within_the_share(mm: MemoryManager) -> None:
    made = [
        mm.remember(f"Pinned note number {n} about the kitchen cupboard {n}.") for n in range(30)
    ]
    for fact in made:
        mm.pin_fact(fact.id)
    messages = mm.retrieve_context("other", "Porto", 400, explain=True)
    shown = facts_lines(messages)
    assert 0 < len(shown) < len(made)
    assert messages.explanation is not None
    cut = messages.explanation["facts"]["cut"]
    assert cut and all(row["reason"] == "over the facts' share of the budget" for row in cut)


def test_a_fact_learned_in_this_session_comes(mm: MemoryManager, topics: dict[str, Fact]) -> None:
    turn = mm.load_memory("chat").interactions[0].id
    learned = mm.remember("Buys cardboard scratchers in bulk.", source=("chat", turn))
    messages = mm.retrieve_context("chat", "which train to Porto", 2000, explain=True)
    assert facts_lines(messages) == [f"- {learned.text} [{learned.id}]"]
    assert messages.explanation is not None
    why = {row["id"]: row["reason"] for row in messages.explanation["facts"]["included_reasons"]}
    assert why == {learned.id: "from this session"}
    # another session does not get it
    assert facts_lines(mm.retrieve_context("other", "which train to Porto", 2000)) == []
    # a match of the query comes before it
    both = facts_lines(mm.retrieve_context("chat", "what is the cat called", 2000))
    assert both == [
        f"- {topics['cat'].text} [{topics['cat'].id}]",
        f"- {learned.text} [{learned.id}]",
    ]


def test_cli_pin_unpin_and_context_explain(
    mm: MemoryManager, store: Path, topics: dict[str, Fact]
) -> None:
    car = topics["car"]
    assert invoke(store, "facts", "pin", car.id).strip() == car.id
    assert "pinned" in mm.fact(car.id).tags
    shown = invoke(store, "context", "other", "what is the cat called", "--explain")
    assert f"- {car.text} [{car.id}]" in shown
    assert f"[{topics['tea'].id}]" not in shown.split("[system]", 1)[1]
    lines = shown.splitlines()
    row = next(line for line in lines if line.startswith("  + fact") and car.id in line)
    assert row.endswith("(pinned)")
    row = next(line for line in lines if line.startswith("  + fact") and topics["cat"].id in line)
    assert "(matched: " in row
    row = next(line for line in lines if line.startswith("  - fact") and topics["tea"].id in line)
    assert NOT_RELEVANT in row
    data = json.loads(invoke(store, "--json", "facts", "unpin", car.id))
    assert data["id"] == car.id and data["tags"] == []
    data = json.loads(invoke(store, "--json", "context", "other", "Porto", "--explain"))
    assert data["explanation"]["facts"]["included"] == []
    assert git(store, "status", "--porcelain") == ""


def test_async_pin_fact(mm: MemoryManager, topics: dict[str, Fact], store: Path) -> None:
    async def main() -> tuple[str, ...]:
        async with AsyncMemoryManager(store) as amm:
            return (await amm.pin_fact(topics["cat"].id)).tags

    assert asyncio.run(main()) == ("pinned",)


def test_the_mcp_context_tool_selects_the_same_facts(
    mm: MemoryManager, store: Path, topics: dict[str, Fact]
) -> None:
    from tests.mcp_client import stdio_session
    from tests.test_mcp_tools import ok, run

    mm.pin_fact(topics["car"].id)
    mm.close()

    async def main() -> None:
        async with stdio_session(store) as session:
            context = await ok(
                session, "get_context", {"session": "other", "query": "what is the cat called"}
            )
            first = context["messages"][0]["content"]
            assert first.splitlines()[1:] == [
                f"- {topics['car'].text} [{topics['car'].id}]",
                f"- {topics['cat'].text} [{topics['cat'].id}]",
            ]

    run(main())


def test_another_sessions_turn_comes_only_by_relevance_and_says_why(tmp_path: Path) -> None:
    mm = MemoryManager.init(tmp_path / "store")
    mm.save_interaction("billing", "I use Postgres 16 for the billing service", "ok")
    mm.save_interaction("pets", "My cat is called Tom", "nice")
    mm.save_interaction("now", "what database do we use?", "-")
    messages = mm.retrieve_context("now", "database postgres", 500, explain=True)
    assert messages.explanation is not None
    budget = messages.explanation["budget"]
    memories = [p for p in budget["included"] if p["source"] == "memory"]
    assert [p["ref"].split("#")[0] for p in memories] == ["billing"]  # not the cat
    assert memories[0]["reason"].startswith("another session, relevant to the query: score ")
    assert "keyword" in memories[0]["reason"]
    mm.close()
