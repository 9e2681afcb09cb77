"""Consolidation of facts: the offline extractor, the LLM's proposals over real HTTP, the
loss guard and its review branch, the triggers, and the CLI commands."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from gitmem import MemoryManager
from gitmem.cli.base import GitmemGroup, cli
from gitmem.cli.consolidate import consolidate_command, review_command
from gitmem.facts.extract import KeyFact, NewTurn, extract, fact_section, has_specifics
from gitmem.facts.proposal import Change, FactsConfig, check_loss, parse_proposal
from gitmem.format.facts import Fact, MemoryFile
from gitmem.models import Interaction, Message
from tests.conftest import git
from tests.fake_openai import FakeServer, completion, error, llm_server

__all__ = ["llm_server"]


@pytest.fixture
def mm(store: Path) -> MemoryManager:
    return MemoryManager.init(store, agent="tester", model="chat-model")


def _turn(tid: str, text: str, speaker: str = "User") -> Interaction:
    from datetime import UTC, datetime

    return Interaction(
        id=tid,
        timestamp=datetime(2024, 1, 1, tzinfo=UTC),
        messages=[Message(speaker=speaker, content=text)],
    )


def _llm(monkeypatch: pytest.MonkeyPatch, server: FakeServer) -> None:
    monkeypatch.setenv("GITMEM_LLM_BASE_URL", server.base_url)
    monkeypatch.setenv("GITMEM_LLM_MODEL", "fake-curator")
    monkeypatch.setenv("GITMEM_LLM_RETRIES", "0")
    monkeypatch.setenv("GITMEM_LLM_TIMEOUT", "5")


def _answer(*changes: dict[str, Any]) -> Any:
    return lambda request: completion(json.dumps({"changes": list(changes)}))


def _seed(mm: MemoryManager) -> list[Fact]:
    """Four facts by the agent and one by hand."""
    mm.save_interaction("s1", "I live in Berlin.", "Noted.", interaction_id="t1")
    facts = [
        mm.remember("Lives in Berlin", section="User", source=("s1", "t1")),
        mm.remember("Works at Siemens", section="User", source=("s1", "t1")),
        mm.remember("Has a cat named Tom", section="User", source=("s1", "t1")),
        mm.remember("Plays chess on Sundays", section="User", source=("s1", "t1")),
        mm.remember("Prefers green tea", section="Preferences", by_hand=True),
    ]
    return facts


# --- offline -----------------------------------------------------------------------------


def test_offline_keeps_specific_sentences_and_drops_small_talk() -> None:
    turns = [
        NewTurn("s", _turn("a", "Hi! How are you doing today?")),
        NewTurn("s", _turn("b", "Wow, that's great, thanks so much!")),
        NewTurn("s", _turn("c", "I moved to Lisbon in March 2021 with my partner Ana.")),
        NewTurn("s", _turn("d", "I moved to Lisbon in March 2021 with my partner Ana!")),
        NewTurn("s", _turn("e", "Sure, I can help with that.", speaker="Assistant")),
    ]
    picked = extract([], [], turns, budget=1000)
    assert [c.text for c in picked] == [
        "The user moved to Lisbon in March 2021 with the user's partner Ana."
    ]
    # the near-duplicate is one fact with both sources
    assert [str(s) for s in picked[0].sources] == ["s#c", "s#d"]
    assert picked[0].section == "User"


def test_offline_skips_what_the_memory_holds_and_respects_the_budget() -> None:
    known = Fact(id="f1", text="Moved to Lisbon in March 2021 with partner Ana")
    turns = [
        NewTurn("s", _turn("c", "I moved to Lisbon in March 2021 with my partner Ana.")),
        NewTurn("s", _turn("d", "My sister Clara studies physics at ETH Zurich.")),
    ]
    picked = extract([known], [], turns, budget=1000)
    assert [c.text for c in picked] == ["The user's sister Clara studies physics at ETH Zurich."]
    assert extract([], [], turns, budget=20) == []


def test_sections_and_specifics() -> None:
    assert fact_section("The user prefers dark roast coffee", "User") == "Preferences"
    assert fact_section("The user is working on the gitmem release", "user") == "Projects"
    assert fact_section("The user has a cat", "user") == "User"
    # a named person's statements stay under their name, whatever the topic
    assert fact_section("Caroline prefers Sweden", "Caroline") == "Caroline"
    assert has_specifics("we met Anna there") and has_specifics("born 1990")
    assert has_specifics("住在北京") and not has_specifics("It was a lovely evening.")


def test_offline_consolidation_commits_with_sources_and_keeps_hand_facts(
    mm: MemoryManager, store: Path
) -> None:
    hand = mm.remember("Prefers green tea", section="Preferences", by_hand=True)
    mm.save_interaction(
        "s1",
        "The user's daughter Lena turned 7 in May 2024.",
        "Happy birthday!",
        interaction_id="t1",
    )
    mm.save_interaction("s1", "ok thanks", "bye", interaction_id="t2")
    result = mm.consolidate()
    assert result.status == "committed" and result.engine == "offline"
    assert [c.op for c in result.changes] == ["add"]
    added = mm.facts(query="Lena")[0]
    assert added.text == "The user's daughter Lena turned 7 in May 2024."
    assert [str(s) for s in added.sources] == ["s1#t1"]
    assert mm.fact(hand.id) == hand  # a fact written by hand survives
    assert "+- The user's daughter Lena" in result.diff
    message = git(store, "log", "-1", "--format=%B")
    assert "Gitmem-Op: consolidate" in message and "Gitmem-Engine: offline" in message
    assert "Gitmem-Model: gitmem-offline" in message
    assert git(store, "status", "--porcelain") == ""
    assert mm.consolidate().status == "unchanged"  # since the last consolidation: nothing new


def test_summary_key_facts_are_consolidated_with_their_turn(mm: MemoryManager) -> None:
    from datetime import UTC, datetime

    from gitmem.models import Session, Summary

    when = datetime(2024, 4, 1, tzinfo=UTC)
    turns = [
        _turn("t1", "Sounds lovely, thanks!"),
        _turn("t2", "The flight to Tokyo leaves on 3 May, and Ken comes along."),
    ]
    mm.put_session(
        Session(
            id="s1",
            created=when,
            last_active=when,
            interactions=turns,
            summary=Summary(
                text="Holiday plans.",
                generated=when,
                covers=["t1", "t2"],
                facts=["Flies to Tokyo on 3 May with Ken", "Likes holidays"],
            ),
        )
    )
    head = mm.head()
    result = mm.consolidate(apply=False)
    assert result.status == "proposed" and mm.head() == head  # nothing written
    found = {c.text: [str(s) for s in c.sources] for c in result.changes}
    assert found["Flies to Tokyo on 3 May with Ken"] == ["s1#t2"]  # the turn it came from
    assert "Likes holidays" not in found  # no name, number or date: not kept offline
    assert len(result.changes) == 1  # the turn says the same: a duplicate


# --- the LLM -------------------------------------------------------------------------------


def test_llm_proposal_add_update_supersede(
    mm: MemoryManager, store: Path, monkeypatch: pytest.MonkeyPatch, llm_server: FakeServer
) -> None:
    facts = _seed(mm)
    mm.save_interaction("s2", "I moved to Lisbon last month.", "Exciting!", interaction_id="t9")
    _llm(monkeypatch, llm_server)
    llm_server.default = _answer(
        {
            "op": "supersede",
            "id": facts[0].id,
            "text": "Lives in Lisbon",
            "reason": "moved",
            "sources": ["s2#t9"],
        },
        {
            "op": "update",
            "id": facts[1].id,
            "text": "Works at Siemens in Munich",
            "reason": "sharper",
            "sources": ["s2#t9"],
        },
        {
            "op": "add",
            "text": "Speaks Portuguese",
            "section": "User",
            "reason": "new",
            "sources": ["s2#t9"],
        },
    )
    result = mm.consolidate()
    assert result.status == "committed" and result.engine == "fake-curator"
    assert result.fallback is None
    old = mm.fact(facts[0].id)
    assert old.valid_until is not None and old.replaced_by is not None  # never deleted
    assert mm.fact(old.replaced_by).text == "Lives in Lisbon"
    assert mm.fact(facts[1].id).text == "Works at Siemens in Munich"
    assert "Speaks Portuguese" in [f.text for f in mm.facts()]
    sent = llm_server.requests[0]["messages"][-1]["content"]
    assert facts[0].id in sent and "s2#t9" in sent
    message = git(store, "log", "-1", "--format=%B")
    assert "Gitmem-Model: fake-curator" in message and "Gitmem-Engine: llm" in message


@pytest.mark.parametrize(
    "reply",
    [
        lambda request: completion("this is not json at all"),
        lambda request: completion(json.dumps({"facts": []})),
        lambda request: error(500, "internal error"),
    ],
)
def test_llm_failure_falls_back_offline_and_loses_nothing(
    mm: MemoryManager,
    store: Path,
    monkeypatch: pytest.MonkeyPatch,
    llm_server: FakeServer,
    reply: Any,
) -> None:
    facts = _seed(mm)
    mm.save_interaction(
        "s2", "My brother Paul lives in Oslo since 2020.", "Nice", interaction_id="t9"
    )
    _llm(monkeypatch, llm_server)
    llm_server.default = reply
    result = mm.consolidate()
    assert result.engine == "offline" and result.fallback
    assert result.status == "committed"
    assert all(mm.fact(f.id) == f for f in facts)
    assert "The user's brother Paul lives in Oslo since 2020." in [f.text for f in mm.facts()]
    assert "Gitmem-Fallback: " in git(store, "log", "-1", "--format=%B")


def test_llm_timeout_falls_back(
    mm: MemoryManager, monkeypatch: pytest.MonkeyPatch, llm_server: FakeServer
) -> None:
    mm.save_interaction("s2", "My brother Paul lives in Oslo since 2020.", "Nice")
    _llm(monkeypatch, llm_server)
    monkeypatch.setenv("GITMEM_LLM_TIMEOUT", "0.2")

    def slow(request: dict[str, Any]) -> Any:
        llm_server.sleep(3)
        return completion("{}")

    llm_server.default = slow
    result = mm.consolidate()
    assert result.engine == "offline" and "no answer" in (result.fallback or "")
    assert result.status == "committed"


def test_unknown_ids_are_rejected_per_change(
    mm: MemoryManager, monkeypatch: pytest.MonkeyPatch, llm_server: FakeServer
) -> None:
    facts = _seed(mm)
    mm.save_interaction("s2", "I adopted a dog.", "Cute", interaction_id="t9")
    _llm(monkeypatch, llm_server)
    llm_server.default = _answer(
        {"op": "forget", "id": "fdeadbe", "reason": "?"},
        {"op": "update", "id": "nope", "text": "x"},
        {"op": "add", "text": "Has a dog", "section": "User", "sources": ["s2#t9"]},
    )
    result = mm.consolidate()
    assert result.status == "committed"
    assert [c.op for c in result.changes] == ["add"]
    assert "'fdeadbe', 'nope'" in result.rejected[-1]
    assert all(mm.fact(f.id) == f for f in facts)


def test_parse_proposal_rejects_bad_changes() -> None:
    memory = MemoryFile(facts=(Fact(id="f1", text="x"),))
    changes, rejected = parse_proposal(
        json.dumps(
            {
                "changes": [
                    {"op": "explode", "id": "f1"},
                    {"op": "add"},
                    {"op": "forget", "id": "f1"},
                ]
            }
        ),
        memory,
    )
    assert [c.op for c in changes] == ["forget"]
    assert "op 'explode'" in rejected[0] and "add needs a non-empty text" in rejected[1]


# --- the loss guard ------------------------------------------------------------------------


def test_loss_guard_counts_removals_and_hand_facts() -> None:
    facts = tuple(Fact(id=f"f{n}", text=f"fact {n}", sources=()) for n in range(4))
    memory = MemoryFile(facts=facts)
    assert check_loss(memory, [Change(op="forget", id="f1")], 0.25).fires  # by hand
    agent = MemoryFile(facts=tuple(f.model_copy(update={"by": "bot"}) for f in facts))
    assert not check_loss(agent, [Change(op="forget", id="f1")], 0.25).fires
    assert check_loss(
        agent, [Change(op="forget", id="f1"), Change(op="supersede", id="f2", text="y")], 0.25
    ).fires


def test_loss_guard_holds_for_review_then_accept(
    mm: MemoryManager, store: Path, monkeypatch: pytest.MonkeyPatch, llm_server: FakeServer
) -> None:
    facts = _seed(mm)
    mm.save_interaction("s2", "Forget everything.", "OK", interaction_id="t9")
    _llm(monkeypatch, llm_server)
    llm_server.default = _answer(
        *[{"op": "forget", "id": f.id, "reason": "stale"} for f in facts[:3]]
    )
    head = mm.head()
    result = mm.consolidate()
    assert result.status == "review" and result.branch == "gitmem/review-facts"
    assert mm.head() == head and len(mm.facts()) == 5  # nothing applied
    assert git(store, "rev-parse", "gitmem/review-facts").strip() == result.commit
    shown = mm.review_facts_show()
    assert "Loss guard: removes 3 of 5" in shown["message"] and facts[0].id in shown["diff"]
    later = mm.remember("Has a bike", section="User", source=("s2", "t9"))
    sha = mm.review_facts_accept()
    assert sha is not None
    assert {f.id for f in mm.facts()} == {facts[3].id, facts[4].id, later.id}
    assert git(store, "branch", "--list", "gitmem/review-facts") == ""
    assert "Gitmem-Review: accepted" in git(store, "log", "-1", "--format=%B")


def test_hand_fact_change_is_refused_or_rejected(
    mm: MemoryManager, monkeypatch: pytest.MonkeyPatch, llm_server: FakeServer
) -> None:
    facts = _seed(mm)
    mm.save_interaction("s2", "I switched to coffee.", "OK", interaction_id="t9")
    _llm(monkeypatch, llm_server)
    llm_server.default = _answer({"op": "update", "id": facts[4].id, "text": "Prefers coffee"})
    head = mm.head()
    refused = mm.consolidate(on_loss="refuse")
    assert refused.status == "refused" and refused.loss is not None
    assert refused.loss.by_hand == [facts[4].id]
    assert mm.head() == head
    held = mm.consolidate()
    assert held.status == "review"
    mm.review_facts_reject()
    assert mm.fact(facts[4].id) == facts[4]
    with pytest.raises(Exception, match="no consolidation is waiting"):
        mm.review_facts_accept()


# --- triggers and settings -----------------------------------------------------------------


def test_trigger_every_n_summaries(mm: MemoryManager, store: Path) -> None:
    git(store, "config", "gitmem.facts.every", "2")
    git(store, "config", "gitmem.facts.offline", "true")
    mm2 = MemoryManager(store)
    mm2.save_interaction("a", "My cousin Rita lives in Porto since 2015.", "ok")
    mm2.summarize("a", offline=True)
    mm2.save_interaction("b", "I bought a Yamaha piano in 2022.", "ok")
    assert mm2.facts() == []  # one summary so far
    mm2.summarize("b", offline=True)
    mm2.save_interaction("b", "thanks", "bye")
    assert "Gitmem-Trigger: every" in git(
        store, "log", "-1", "--format=%B", "--", "memory/MEMORY.md"
    )
    assert mm2.facts(query="Yamaha")


def test_bad_setting_is_named(store: Path) -> None:
    from gitmem.errors import ConfigError

    with pytest.raises(ConfigError, match=r"gitmem\.facts\.every"):
        FactsConfig.from_git({"gitmem.facts.every": "soon"})
    with pytest.raises(ConfigError, match=r"gitmem\.facts\.idle"):
        FactsConfig.from_git({"gitmem.facts.idle": "later"})
    with pytest.raises(ConfigError, match=r"unknown setting gitmem\.facts\.colour"):
        FactsConfig.from_git({"gitmem.facts.colour": "red"})
    config = FactsConfig.from_git(
        {
            "gitmem.facts.onLoss": "refuse",
            "gitmem.facts.idle": "2h",
            "gitmem.facts.threshold": "0.5",
        }
    )
    assert config.on_loss == "refuse" and config.threshold == 0.5 and config.idle is not None


# --- the CLI --------------------------------------------------------------------------------


@pytest.fixture
def facts_cli() -> Iterator[click.Group]:
    """``gitmem`` with the two commands attached to its ``facts`` group (made here when the
    group is not there yet), as ``gitmem/cli/facts.py`` attaches them."""
    made = "facts" not in cli.commands
    group = cli.commands["facts"] if not made else GitmemGroup("facts")
    assert isinstance(group, click.Group)
    added = [c for c in (consolidate_command, review_command) if c.name not in group.commands]
    for command in added:
        group.add_command(command)
    if made:
        cli.add_command(group)
    yield cli
    for command in added:
        del group.commands[str(command.name)]
    if made:
        del cli.commands["facts"]


def test_cli_consolidate_dry_run_and_json(
    mm: MemoryManager, store: Path, facts_cli: click.Group
) -> None:
    mm.save_interaction("s1", "The user's daughter Lena turned 7 in May 2024.", "Yay")
    runner = CliRunner()
    head = mm.head()
    dry = runner.invoke(
        facts_cli, ["--repo", str(store), "facts", "consolidate", "--dry-run", "--offline"]
    )
    assert dry.exit_code == 0, dry.output
    assert "+- The user's daughter Lena turned 7 in May 2024." in dry.output and mm.head() == head
    done = runner.invoke(facts_cli, ["--repo", str(store), "--json", "facts", "consolidate"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert data["status"] == "committed" and data["changes"][0]["sources"] == [
        f"s1#{mm.load_memory('s1').interactions[0].id}"
    ]  # type: ignore[union-attr]
    none = runner.invoke(facts_cli, ["--repo", str(store), "facts", "review", "show"])
    assert none.exit_code == 1 and "no consolidation is waiting" in none.output


def test_a_bullet_written_into_the_file_by_hand_survives(mm: MemoryManager, store: Path) -> None:
    mm.remember("Has a cat named Tom", section="User", source="s0")
    path = store / "memory" / "MEMORY.md"
    path.write_text(path.read_text() + "- Allergic to peanuts\n")  # not committed
    mm.save_interaction("s1", "My sister Clara studies physics at ETH Zurich.", "Nice")
    result = mm.consolidate(offline=True)
    assert result.status == "committed"
    texts = [f.text for f in mm.facts()]
    assert "Allergic to peanuts" in texts and "Has a cat named Tom" in texts
    assert "The user's sister Clara studies physics at ETH Zurich." in texts
    log = git(store, "log", "-3", "--format=%s")
    assert "Record hand edit of memory/MEMORY.md" in log
    assert git(store, "status", "--porcelain") == ""


def test_idle_trigger(mm: MemoryManager, store: Path) -> None:
    git(store, "config", "gitmem.facts.idle", "2h")
    mm2 = MemoryManager(store)
    mm2.save_interaction("a", "My cousin Rita lives in Porto since 2015.", "ok")
    assert mm2.facts() == []  # the save came right after the one before
    assert mm2.maybe_consolidate(now="2000-01-01T00:00:00") is None  # not quiet yet
    result = mm2.maybe_consolidate(now="2999-01-01T00:00:00")
    assert result is not None and result.status == "committed"
    assert "Gitmem-Trigger: idle" in git(store, "log", "-1", "--format=%B")


def test_llm_facts_that_are_not_statements_are_rejected() -> None:
    memory = MemoryFile(facts=())
    answer = json.dumps(
        {
            "changes": [
                {"op": "add", "text": "What is a Python decorator?"},
                {"op": "add", "text": "User: I like green tea"},
                {"op": "add", "text": "I keep it in the fridge."},
                {"op": "add", "text": "Caroline: moved from Sweden"},
                {"op": "add", "text": "The user likes green tea."},
            ]
        }
    )
    changes, rejected = parse_proposal(answer, memory, ["Caroline", "user"])
    assert [c.text for c in changes] == ["The user likes green tea."]
    assert [r.split(": the text is ")[1] for r in rejected] == [
        "a question",
        "starts with the speaker label 'User'",
        "in the first person",
        "starts with the speaker label 'Caroline'",
    ]


def test_key_points_lose_their_turn_id_and_the_assistants_suggestions() -> None:
    points = [
        KeyFact("Caroline moved from Sweden in 2019. [t7]", "s", ("t7", "t8")),
        KeyFact("The assistant suggested trying Fluent Python 2nd edition. [t8]", "s", ("t8",)),
    ]
    picked = extract([], points, [], budget=1000)
    assert [c.text for c in picked] == ["Caroline moved from Sweden in 2019."]
    assert [str(s) for s in picked[0].sources] == ["s#t7"]
