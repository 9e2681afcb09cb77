"""``retrieve_context(rerank=True)``: the configured chat model, over real HTTP to the loopback
fake server, chooses and condenses the memories; every failure of the model gives exactly the
lexical context plus a note; the budget holds; nothing is written."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gitmem import AsyncMemoryManager, MemoryManager
from gitmem.cli import cli
from gitmem.errors import ValidationError
from gitmem.search.context import Memory
from gitmem.search.rerank import PROMPT_CHARS, condense, reference
from gitmem.search.tokens import default_counter
from tests.conftest import git
from tests.fake_openai import FakeServer, Reply, closed_port, completion, error, llm_server

__all__ = ["llm_server"]

QUERY = "hike"


def _llm(monkeypatch: pytest.MonkeyPatch, base_url: str, timeout: str = "5") -> None:
    monkeypatch.setenv("GITMEM_LLM_BASE_URL", base_url)
    monkeypatch.setenv("GITMEM_LLM_MODEL", "fake-reranker")
    monkeypatch.setenv("GITMEM_LLM_RETRIES", "0")
    monkeypatch.setenv("GITMEM_LLM_TIMEOUT", timeout)


@pytest.fixture
def mm(store: Path) -> MemoryManager:
    """Four past turns about hiking in three sessions, and the current session "now"."""
    mm = MemoryManager.init(store, agent="tester", model="chat-model")
    mm.save_interaction(
        "trip",
        "We hiked in the Alps near Zermatt last summer.",
        "Sounds lovely, the Matterhorn views!",
        interaction_id="t1",
    )
    mm.save_interaction(
        "trip",
        "The hike to the Hörnli hut took six hours.",
        "That is a long hike.",
        interaction_id="t2",
    )
    mm.save_interaction(
        "food", "My favourite hike snack is dried mango.", "Good energy.", interaction_id="f1"
    )
    mm.save_interaction(
        "work",
        "I have a meeting about the hike budget for the team offsite.",
        "OK.",
        interaction_id="w1",
    )
    mm.save_interaction("now", "Hello again", "Hi!", interaction_id="n1")
    return mm


def _choose(*rows: tuple[str, str, str]) -> Any:
    body = {"chosen": [{"id": i, "text": t, "why": w} for i, t, w in rows]}
    return lambda request: completion(json.dumps(body))


def _memory_lines(messages: list[dict[str, str]]) -> list[str]:
    found = [m["content"] for m in messages if m["content"].startswith("Relevant memories")]
    return found[0].splitlines()[1:] if found else []


def _state(store: Path) -> tuple[str, str]:
    return git(store, "rev-parse", "HEAD"), git(store, "status", "--porcelain")


def test_the_models_choice_sets_the_memories_their_order_and_text(
    mm: MemoryManager, store: Path, llm_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    lexical = _memory_lines(mm.retrieve_context("now", QUERY, k=2))
    assert [line.split(" · ")[1] for line in lexical] == ["turn t2", "turn t1"]
    before = _state(store)
    _llm(monkeypatch, llm_server.base_url)
    llm_server.script.append(
        _choose(
            ("f1", "Favourite hike snack: dried mango.", "a snack"),
            ("t1", "Hiked near Zermatt.", "the trip"),
        )
    )
    out = mm.retrieve_context("now", QUERY, k=2, rerank=True, explain=True)
    lines = _memory_lines(out)
    # the fourth lexical candidate comes first: the model chose from more than k
    assert lines[0].startswith("- [food · turn f1 · ")
    assert lines[0].endswith("] Favourite hike snack: dried mango.")
    assert lines[1].startswith("- [trip · turn t1 · ") and lines[1].endswith("Hiked near Zermatt.")
    assert len(lines) == 2
    assert out.explanation is not None
    info = out.explanation["rerank"]
    assert info["model"] == "fake-reranker" and info["fallback"] is None
    assert set(info["asked"]) == {"t1", "t2", "f1", "w1"}
    assert [(c["id"], c["why"]) for c in info["chosen"]] == [("f1", "a snack"), ("t1", "the trip")]
    assert info["chosen"][0]["chars"] == len("Favourite hike snack: dried mango.")
    assert _state(store) == before  # nothing written


def test_the_request_holds_the_query_the_candidates_and_json_mode(
    mm: MemoryManager, llm_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _llm(monkeypatch, llm_server.base_url)
    llm_server.script.append(_choose(("t2", "Six hours to the Hörnli hut.", "duration")))
    mm.retrieve_context("now", QUERY, rerank=True)
    (request,) = llm_server.requests
    assert request["response_format"] == {"type": "json_object"}
    assert request["model"] == "fake-reranker"
    system, user = (m["content"] for m in request["messages"])
    assert '"chosen"' in system and '"why"' in system
    assert "Query: hike" in user
    for ref, text in (
        ("t1", "near Zermatt"),
        ("t2", "Hörnli hut"),
        ("f1", "dried mango"),
        ("w1", "hike budget"),
    ):
        assert f"[{ref}] (session " in user and text in user
    assert "Hello again" not in user  # the current session's recent turns are not candidates


def test_ids_that_name_no_candidate_are_dropped_and_listed(
    mm: MemoryManager, llm_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _llm(monkeypatch, llm_server.base_url)
    llm_server.script.append(
        _choose(
            ("zz9", "invented", "made up"),
            ("work#w1", "Hike budget meeting.", "long form id"),
            ("n1", "the current turn", "not a candidate"),
        )
    )
    out = mm.retrieve_context("now", QUERY, rerank=True, explain=True)
    assert _memory_lines(out) == [_memory_lines(out)[0]]
    assert _memory_lines(out)[0].endswith("] Hike budget meeting.")
    assert out.explanation is not None
    info = out.explanation["rerank"]
    assert info["invalid"] == ["zz9", "n1"] and info["fallback"] is None
    assert [c["ref"] for c in info["chosen"]] == ["work#w1"]


def test_the_budget_holds_and_a_longer_condensed_text_is_cut(
    mm: MemoryManager, llm_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _llm(monkeypatch, llm_server.base_url)
    long = "An elaborate retelling of a snack. " * 40
    for max_tokens in (2000, 60, 25):
        llm_server.script.append(_choose(("f1", long, "verbose"), ("t2", "Six hours.", "time")))
        out = mm.retrieve_context("now", QUERY, max_tokens, rerank=True, explain=True)
        counter = default_counter()
        used = sum(counter.count(m["content"]) + 4 for m in out)
        assert used <= max_tokens
        assert out.explanation is not None and out.explanation["budget"]["used"] <= max_tokens
        lines = _memory_lines(out)
        if max_tokens == 2000:
            original = "User: My favourite hike snack is dried mango. Assistant: Good energy."
            snack = lines[0].split("] ", 1)[1]
            assert len(snack) <= len(original) and snack.startswith("An elaborate retelling")
            assert lines[1].endswith("] Six hours.")
        else:
            assert len(lines) < 2


def _sleepy(server: FakeServer) -> Any:
    def handler(request: dict[str, Any]) -> Reply:
        server.sleep(5)
        return completion('{"chosen": []}')

    return handler


FAILURES: dict[str, Any] = {
    "http-500": (lambda s: lambda r: error(500, "boom"), "HTTP 500"),
    "not-json": (lambda s: lambda r: completion("I think t1 is best."), "not JSON"),
    "wrong-shape": (lambda s: lambda r: completion('{"chosen": "t1"}'), "is not"),
    "rows-not-objects": (lambda s: lambda r: completion('{"chosen": ["t1"]}'), "is not"),
    "unknown-ids": (
        lambda s: _choose(("x1", "a", "b"), ("trip#t9", "c", "d")),
        "no candidate it was given",
    ),
    "empty-choice": (lambda s: lambda r: completion('{"chosen": []}'), "chose no candidate"),
    "timeout": (_sleepy, "no answer within"),
}


@pytest.mark.parametrize("case", sorted(FAILURES))
def test_every_failure_of_the_model_gives_the_lexical_context_and_a_note(
    case: str,
    mm: MemoryManager,
    store: Path,
    llm_server: FakeServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lexical = mm.retrieve_context("now", QUERY, 300, k=3)
    before = _state(store)
    make, reason = FAILURES[case]
    _llm(monkeypatch, llm_server.base_url, timeout="0.5" if case == "timeout" else "5")
    llm_server.script.append(make(llm_server))
    out = mm.retrieve_context("now", QUERY, 300, k=3, rerank=True, explain=True)
    assert list(out) == list(lexical)
    assert len(llm_server.requests) == 1
    assert out.explanation is not None
    info = out.explanation["rerank"]
    assert reason in info["fallback"] and info["chosen"] == []
    assert any(
        n.startswith("rerank fell back to the lexical order: ") for n in out.explanation["notes"]
    )
    assert _state(store) == before


def test_a_slow_model_gets_the_rerank_timeout_once_not_the_summaries_budget(
    mm: MemoryManager, store: Path, llm_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    lexical = mm.retrieve_context("now", QUERY, 300, k=3)
    before = _state(store)
    _llm(monkeypatch, llm_server.base_url, timeout="60")
    monkeypatch.setenv("GITMEM_LLM_RETRIES", "2")  # the summaries' budget: 60 s, three tries
    monkeypatch.setattr("gitmem.search.methods.RERANK_TIMEOUT", 0.5)
    llm_server.default = _sleepy(llm_server)
    out = mm.retrieve_context("now", QUERY, 300, k=3, rerank=True, explain=True)
    assert list(out) == list(lexical)
    assert out.explanation is not None
    assert "no answer within 0.5s" in out.explanation["rerank"]["fallback"]
    assert len(llm_server.requests) == 1  # no retry
    assert _state(store) == before


def test_no_llm_or_no_server_gives_the_lexical_context(
    mm: MemoryManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    lexical = mm.retrieve_context("now", QUERY)
    out = mm.retrieve_context("now", QUERY, rerank=True, explain=True)
    assert list(out) == list(lexical) and out.explanation is not None
    assert out.explanation["rerank"]["fallback"].startswith("no LLM configured")
    assert out.explanation["rerank"]["model"] is None
    _llm(monkeypatch, f"http://127.0.0.1:{closed_port()}/v1")
    out = mm.retrieve_context("now", QUERY, rerank=True, explain=True)
    assert list(out) == list(lexical) and out.explanation is not None
    assert out.explanation["rerank"]["fallback"].startswith("the model failed: fake-reranker")


def test_the_prompt_is_bounded(
    mm: MemoryManager, llm_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(30):
        mm.save_interaction(
            f"long{n}", "hike " + "trail mix and switchbacks " * 400, "ok", interaction_id=f"L{n}"
        )
    _llm(monkeypatch, llm_server.base_url)
    llm_server.script.append(_choose(("L3", "Trail mix.", "snack")))
    out = mm.retrieve_context(
        "now", QUERY + " x" * 50_000, rerank=True, rerank_candidates=40, explain=True
    )
    user = llm_server.requests[0]["messages"][1]["content"]
    assert len(user) <= PROMPT_CHARS
    assert out.explanation is not None
    asked = out.explanation["rerank"]["asked"]
    assert 0 < len(asked) < 34  # the candidates past the limit are not asked
    assert all(f"[{ref}]" in user for ref in asked)


def test_summaries_and_clashing_turn_ids_get_distinct_references(
    mm: MemoryManager, llm_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    mm.save_interaction("other", "Another hike, up the Rigi.", "Nice.", interaction_id="t1")
    mm.summarize("trip", offline=True)
    _llm(monkeypatch, llm_server.base_url)
    llm_server.script.append(
        _choose(
            ("summary:trip", "Alps hiking trip.", "overview"),
            ("other#t1", "Rigi hike.", "another hike"),
        )
    )
    out = mm.retrieve_context("now", QUERY, rerank=True, explain=True)
    user = llm_server.requests[0]["messages"][1]["content"]
    assert "[summary:trip] (session trip" in user
    assert "[t1] (session " in user and "#t1] (session " in user
    lines = _memory_lines(out)
    assert lines[0].startswith("- [trip · summary · ") and lines[0].endswith("] Alps hiking trip.")
    assert lines[1].startswith("- [other · turn t1 · ") and lines[1].endswith("] Rigi hike.")


def test_references_and_condensing_rules() -> None:
    a = Memory("s1", "t1", "interaction", None, "one two three", 1.0)
    b = Memory("s2", "t1", "interaction", None, "four", 1.0)
    s = Memory("s3", None, "summary", None, "sum", 1.0)
    taken: set[str] = set()
    refs = []
    for memory in (a, b, s):
        refs.append(reference(memory, taken))
        taken.add(refs[-1])
    assert refs == ["t1", "s2#t1", "summary:s3"]
    assert condense("one two three", "  two\n three ") == "two three"
    assert condense("one two three", "") == "one two three"
    assert condense("one two three", None) == "one two three"
    assert condense("short", "much longer than that") == "much…"


def test_rerank_candidates_must_be_positive(mm: MemoryManager) -> None:
    with pytest.raises(ValidationError, match="rerank_candidates must be at least 1, not 0"):
        mm.retrieve_context("now", QUERY, rerank=True, rerank_candidates=0)


def test_cli_context_rerank_explain_shows_the_choice(
    mm: MemoryManager, store: Path, llm_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _llm(monkeypatch, llm_server.base_url)
    llm_server.script.append(
        _choose(
            ("w1", "Hike budget.", "the budget asked about"),
            ("f1", "x", "not among the first 3 candidates"),
        )
    )
    result = CliRunner().invoke(
        cli,
        [
            "--repo",
            str(store),
            "context",
            "now",
            QUERY,
            "--rerank",
            "--candidates",
            "3",
            "--explain",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "rerank by fake-reranker: asked 3 candidates: t2, t1, " in result.output
    assert "  1  work#w1  (12 of " in result.output
    assert "the budget asked about" in result.output
    assert "ids the model cited that were not candidates (dropped): 'f1'" in result.output
    assert "- [work · turn w1 · 2" in result.output and "- [food" not in result.output
    llm_server.script.append(lambda r: error(500, "down"))
    result = CliRunner().invoke(
        cli, ["--repo", str(store), "context", "now", QUERY, "--rerank", "--explain"]
    )
    assert result.exit_code == 0, result.output
    assert "fell back to the lexical order: the model failed: fake-reranker" in result.output


def test_the_async_twin_passes_rerank_through(
    mm: MemoryManager, store: Path, llm_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _llm(monkeypatch, llm_server.base_url)
    llm_server.script.append(_choose(("w1", "Budget meeting.", "work")))

    async def go() -> list[dict[str, str]]:
        async with AsyncMemoryManager(store) as amm:
            return list(await amm.retrieve_context("now", QUERY, rerank=True))

    assert _memory_lines(asyncio.run(go()))[0].endswith("] Budget meeting.")
