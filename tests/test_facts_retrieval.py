"""The curated facts in retrieval and search: ``retrieve_context`` opens with "What you know"
(relevant facts with their ids, within a share of the budget), ``search(kind="fact")``
returns facts, ``commit=`` reads the facts of then, and a broken memory file never breaks
either (a note says why the facts are missing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem.cli import cli
from gitmem.errors import ValidationError
from gitmem.manager import MemoryManager
from gitmem.search.context import FACTS_HEADER, MESSAGE_OVERHEAD
from gitmem.search.tokens import default_counter
from tests.conftest import git


@pytest.fixture
def mm(store: Path) -> MemoryManager:
    manager = MemoryManager.init(store)
    manager.save_interaction(
        "chat",
        "Which tea should I buy for the office?",
        "Something mild; you said you like green tea.",
    )
    manager.save_interaction(
        "other", "The cat Biscuit knocked the vase over.", "Cats do that; put it somewhere higher."
    )
    return manager


def used(messages: list[dict[str, str]]) -> int:
    counter = default_counter()
    return sum(counter.count(m["content"]) + MESSAGE_OVERHEAD for m in messages)


def test_what_you_know_comes_first_with_the_fact_ids(mm: MemoryManager) -> None:
    tea = mm.remember("Prefers green tea, no sugar.", section="Preferences")
    city = mm.remember("Lives in Lisbon.", section="User")
    messages = mm.retrieve_context("chat", "which tea", 2000, explain=True)
    first = messages[0]
    assert first["role"] == "system"
    assert first["content"].startswith("What you know")
    lines = first["content"].splitlines()
    # the match only: the other fact is not relevant, small as the file is
    assert lines[1:] == [f"- Prefers green tea, no sugar. [{tea.id}]"]
    # the session's turns follow
    assert [m["role"] for m in messages[1:3]] == ["user", "assistant"]
    assert messages.explanation is not None
    facts = messages.explanation["facts"]
    assert facts["included"] == [tea.id] and facts["weighed_all"] is True
    assert [c["id"] for c in facts["cut"]] == [city.id]
    sources = [row["source"] for row in messages.explanation["budget"]["included"]]
    assert sources[:1] == ["fact"]


def test_no_facts_no_message_and_with_facts_false_leaves_them_out(mm: MemoryManager) -> None:
    assert not mm.retrieve_context("chat", "tea", 2000)[0]["content"].startswith("What you")
    mm.remember("Prefers green tea.")
    assert mm.retrieve_context("chat", "tea", 2000)[0]["content"].startswith("What you know")
    plain = mm.retrieve_context("chat", "tea", 2000, with_facts=False)
    assert all(not m["content"].startswith("What you know") for m in plain)


def test_superseded_and_ended_facts_are_not_shown(mm: MemoryManager) -> None:
    berlin = mm.remember("Lives in Berlin.", section="User")
    lisbon = mm.supersede(berlin.id, "Lives in Lisbon.")
    ended = mm.remember("Works at Acme in Berlin.", valid_until="2020-01-01")
    text = mm.retrieve_context("chat", "where in Berlin or Lisbon", 2000)[0]["content"]
    assert f"[{lisbon.id}]" in text
    assert f"[{berlin.id}]" not in text and "Lives in Berlin" not in text
    assert f"[{ended.id}]" not in text


def test_facts_get_a_bounded_share_and_only_matches(mm: MemoryManager) -> None:
    for n in range(60):
        mm.remember(f"Project number {n} uses the vendor called alpha{n}.", section="Projects")
    wanted = mm.remember("The office kettle is broken.", section="Office")
    messages = mm.retrieve_context("chat", "kettle", 400, explain=True)
    body = messages[0]["content"]
    assert body.startswith("What you know")
    # 61 facts do not fit in 30% of 400 tokens: only the match is shown
    assert body.splitlines()[1:] == [f"- The office kettle is broken. [{wanted.id}]"]
    info = messages.explanation
    assert info is not None and info["facts"]["weighed_all"] is False
    counter = default_counter()
    assert counter.count(body) + MESSAGE_OVERHEAD <= int(400 * 0.3)
    assert any(c["reason"].startswith("not relevant") for c in info["facts"]["cut"])
    # with room for every fact, still only the match comes
    roomy = mm.retrieve_context("chat", "kettle", 20000)[0]["content"].splitlines()
    assert roomy[1:] == [f"- The office kettle is broken. [{wanted.id}]"]


@pytest.mark.parametrize("budget", [1, 2, 5, 10, 17, 30, 45, 64, 100, 150, 333])
def test_tiny_budgets_are_never_exceeded(mm: MemoryManager, budget: int) -> None:
    for n in range(8):
        mm.remember(f"Fact {n}: green tea is kept in cupboard {n} of the kitchen.")
    mm.summarize("chat", offline=True)
    messages = mm.retrieve_context("chat", "green tea cupboard", budget, explain=True)
    assert used(messages) <= budget
    assert messages.explanation is not None
    assert messages.explanation["budget"]["used"] <= budget


def test_search_kind_fact_returns_the_fact(mm: MemoryManager) -> None:
    tea = mm.remember("Prefers green tea.", section="Preferences", tags=["drinks"])
    mm.remember("Lives in Lisbon.", section="User")
    hits = mm.search("green tea", kind="fact")
    assert [h.interaction_id for h in hits] == [tea.id]
    hit = hits[0]
    assert hit.kind == "fact" and hit.session_id == "" and hit.snippet == "Prefers green tea."
    assert hit.commit == mm.head() and hit.score > 0
    # "any": the facts first, then the turns
    mixed = mm.search("green tea", kind="any", k=4)
    assert mixed[0].kind == "fact" and any(h.session_id == "chat" for h in mixed[1:])
    assert len(mixed) <= 4
    # the default stays the sessions only
    assert all(h.kind != "fact" for h in mm.search("green tea"))
    assert not mm.search("kettle", kind="fact") and mm.search("kettle", kind="fact").notes
    with pytest.raises(ValidationError, match="kind 'facts'"):
        mm.search("tea", kind="facts")
    with pytest.raises(ValidationError, match="empty"):
        mm.search("  ", kind="fact")


def test_time_travel_uses_the_facts_of_then(mm: MemoryManager) -> None:
    berlin = mm.remember("Lives in Berlin.", section="User")
    then = mm.head()
    assert then is not None
    lisbon = mm.supersede(berlin.id, "Lives in Lisbon.")
    now = mm.retrieve_context("chat", "lives", 2000)[0]["content"]
    old = mm.retrieve_context("chat", "lives", 2000, commit=then)[0]["content"]
    assert f"[{lisbon.id}]" in now and f"[{berlin.id}]" not in now
    assert f"[{berlin.id}]" in old and f"[{lisbon.id}]" not in old
    assert [h.interaction_id for h in mm.search("lives", kind="fact", commit=then)] == [berlin.id]
    assert [h.interaction_id for h in mm.at(then).search("lives", kind="fact")] == [berlin.id]


def test_a_broken_memory_file_gives_a_note_and_the_rest(mm: MemoryManager, store: Path) -> None:
    mm.remember("Prefers green tea.")
    path = store / "memory" / "MEMORY.md"
    path.write_text(path.read_text() + "- broken {#bad id ← x}\n")
    git(store, "commit", "-qam", "a bad hand edit")
    messages = mm.retrieve_context("chat", "which tea", 2000, explain=True)
    assert messages and all(not m["content"].startswith("What you know") for m in messages)
    assert any(m["role"] == "user" for m in messages)  # the session is still there
    info = messages.explanation
    assert info is not None
    note = next(n for n in info["notes"] if "facts were left out" in n)
    assert "memory/MEMORY.md:" in note  # path:line of the problem
    hits = mm.search("tea", kind="fact")
    assert not hits and any("memory/MEMORY.md:" in n for n in hits.notes)
    assert any(h.session_id == "chat" for h in mm.search("tea", kind="any"))
    assert path.read_text().endswith("- broken {#bad id ← x}\n")  # never written over


def test_cli_search_kind_fact(mm: MemoryManager, store: Path) -> None:
    tea = mm.remember("Prefers green tea.")
    result = CliRunner().invoke(
        cli, ["--repo", str(store), "search", "--kind", "fact", "green tea"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert f"fact · {tea.id}" in result.output and "Prefers green tea." in result.output
    result = CliRunner().invoke(
        cli,
        ["--repo", str(store), "--json", "search", "--kind", "fact", "green tea"],
        catch_exceptions=False,
    )
    data = json.loads(result.output)
    assert data["hits"][0]["kind"] == "fact" and data["hits"][0]["interaction_id"] == tea.id
    result = CliRunner().invoke(
        cli, ["--repo", str(store), "context", "chat", "green tea"], catch_exceptions=False
    )
    assert (
        f"What you know (curated facts, each with its id in brackets):\n- Prefers green "
        f"tea. [{tea.id}]" in result.output
    )
    assert FACTS_HEADER in result.output


def test_the_write_path_cache_matches_the_file_on_disk(
    mm: MemoryManager, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """remember/supersede/forget reuse the parsed file and the rendered lines (a change to a
    file of 10,000 facts must not parse it again): what they leave must be exactly what a
    fresh parse of the committed file gives."""
    import gitmem.facts.methods as facts_methods
    from gitmem.format.facts import parse_facts, render_facts

    parsed: list[int] = []

    def counting(text: str | bytes, path: str = "memory/MEMORY.md") -> object:
        parsed.append(len(text))
        return parse_facts(text, path)

    monkeypatch.setattr(facts_methods, "parse_facts", counting)  # a spy: the real parse runs
    aws = "AKIA" + "ABCDEFGHIJKLMNOP"
    first = mm.remember("Lives in Berlin.", section="User")
    mm.remember("Prefers green tea.", section="Preferences", tags=["drinks"])
    secret = mm.remember(f"The deploy key is {aws}.", section="User")
    assert aws not in secret.text  # the guard ran on the new fact
    assert aws not in git(store, "show", "HEAD:memory/MEMORY.md")
    assert secret.id in git(store, "log", "-1", "--format=%(trailers:key=Gitmem-Fact)")
    mm.supersede(first.id, "Lives in Lisbon.")
    mm.forget(secret.id, "not a fact")
    mm.update_fact(first.id, "Lived in Berlin.")
    assert mm.facts(query="Lisbon")
    assert parsed == []  # every version was known from the write that made it
    committed = git(store, "show", "HEAD:memory/MEMORY.md")
    fresh = parse_facts(committed.encode())
    assert mm.memory_file() == fresh
    assert render_facts(fresh) == committed
    with MemoryManager(store) as other:  # another process parses it from scratch
        assert other.memory_file() == fresh
    assert git(store, "status", "--porcelain") == ""


def test_the_mcp_remember_and_facts_tools(store: Path) -> None:
    from tests.mcp_client import stdio_session
    from tests.test_mcp_tools import ok, run, trailer

    MemoryManager.init(store).close()

    async def main() -> None:
        async with stdio_session(store, client="claude") as session:
            said = await ok(
                session, "save_interaction", {"session": "chat", "user": "I moved to Lisbon."}
            )
            made = await ok(
                session,
                "remember",
                {
                    "text": "Lives in Lisbon.",
                    "section": "User",
                    "sources": [f"chat#{said['interaction_id']}"],
                    "tags": ["home"],
                },
            )
            fact = made["fact"]
            assert fact["sources"] == [f"chat#{said['interaction_id']}"]
            assert trailer(store, "Gitmem-Op") == ["remember"]
            assert trailer(store, "Gitmem-Fact") == [fact["id"]]
            assert trailer(store, "Gitmem-Via") == ["mcp"]
            listed = await ok(session, "facts", {"query": "Lisbon"})
            assert [f["id"] for f in listed["facts"]] == [fact["id"]]
            assert (await ok(session, "facts", {"query": "Berlin"}))["facts"] == []
            context = await ok(session, "get_context", {"session": "chat", "query": "home"})
            first = context["messages"][0]["content"]
            assert first.startswith("What you know") and f"[{fact['id']}]" in first
        async with stdio_session(store, "--read-only") as session:
            tools = {t.name for t in (await session.list_tools()).tools}
            assert "facts" in tools and "remember" not in tools

    run(main())
    assert git(store, "status", "--porcelain") == ""
