"""Unusable LLM answers fall back to the offline summary with the reason recorded; a slow
server's message states the real time spent; a summary's content round-trips."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gitmem import MemoryManager
from gitmem.llm.config import LLMConfig
from gitmem.summary.engines import LLMSummarizer
from tests.conftest import git
from tests.fake_openai import FakeServer, completion, llm_server, structured

__all__ = ["llm_server"]  # the fixture, imported for pytest


def _config(server: FakeServer, **kwargs: object) -> LLMConfig:
    settings: dict[str, object] = {
        "model": "fake-model",
        "base_url": server.base_url,
        "api_key": "sk-test",
        "timeout": 5.0,
        "max_retries": 0,
    }
    settings.update(kwargs)
    return LLMConfig(**settings)  # type: ignore[arg-type]


@pytest.fixture
def mm(store: Path, llm_server: FakeServer) -> MemoryManager:
    manager = MemoryManager.init(store)
    manager.save_interaction(
        "py",
        "Recommend books on Python asyncio.",
        "Try 'Using Asyncio in Python' by Caleb Hattingh.",
    )
    manager.save_interaction("py", "My budget is 40 euros.", "Both fit your budget.")
    manager.summarizer = LLMSummarizer(_config(llm_server))
    return manager


def _fallback(store: Path) -> str:
    return git(store, "log", "-1", "--format=%(trailers:key=Gitmem-Fallback,valueonly)").strip()


@pytest.mark.parametrize("answer", ["[1, 2, 3]", '"just a string"', "42", "null"])
def test_a_json_value_that_is_not_an_object_is_not_a_summary(
    mm: MemoryManager, store: Path, llm_server: FakeServer, answer: str
) -> None:
    llm_server.default = lambda request: completion(answer)
    mm.summarize("py")
    session = mm.load_memory("py")
    assert session is not None and session.summary is not None
    # (turn ids are random hex: "42" may be in one)
    text = re.sub(r"\[i[0-9a-f]+\]", "", session.summary.text)
    assert session.summary.text != answer and answer not in text
    assert session.summary.model == "gitmem-extractive"
    assert "not a summary" in _fallback(store)


def test_a_huge_answer_is_refused(mm: MemoryManager, store: Path, llm_server: FakeServer) -> None:
    facts = [f"fact number {n} about asyncio" for n in range(50_000)]
    llm_server.default = lambda request: completion(structured("- huge", facts))
    mm.summarize("py")
    session = mm.load_memory("py")
    assert session is not None and session.summary is not None
    assert len(session.summary.facts) < 100
    assert "too large" in _fallback(store)


def test_too_many_key_facts_are_refused(
    mm: MemoryManager, store: Path, llm_server: FakeServer
) -> None:
    facts = [f"f{n}" for n in range(500)]
    llm_server.default = lambda request: completion(structured("- many", facts))
    mm.summarize("py")
    assert "too many key facts (500; at most 100)" in _fallback(store)


def test_a_long_summary_text_is_refused(llm_server: FakeServer) -> None:
    from tests.test_summary_engines import BOOK_TURNS

    llm_server.default = lambda request: completion(structured("x" * 30_000, ["a fact"]))
    result = LLMSummarizer(_config(llm_server)).summarize(BOOK_TURNS)
    assert result.mode == "extractive"
    assert result.fallback is not None and "summary text is too long" in result.fallback


def test_key_facts_that_look_like_labels_round_trip(
    mm: MemoryManager, llm_server: FakeServer
) -> None:
    facts = [
        "**Keywords**:",
        "**Key facts**: budget 40 euros",
        "*asyncio* is the topic",
        "-5 degrees in Oslo",
        "> a quote",
    ]
    entities = ["**Keywords**", "Caleb Hattingh"]
    llm_server.default = lambda request: completion(structured("- books", facts, entities))
    mm.summarize("py")
    session = MemoryManager(mm.path).load_memory("py")
    assert session is not None and session.summary is not None
    assert session.summary.model == "fake-model"
    assert session.summary.facts == facts
    assert session.summary.keywords == entities


def test_a_slow_server_message_states_the_real_budget(llm_server: FakeServer) -> None:
    from tests.test_summary_engines import BOOK_TURNS

    def slow(request: dict[str, object]) -> tuple[int, dict[str, str], bytes]:
        llm_server.sleep(5)
        return completion(json.dumps({"summary": "late"}))

    llm_server.default = slow
    config = _config(llm_server, timeout=0.2, max_retries=1)
    result = LLMSummarizer(config).summarize(BOOK_TURNS)
    assert result.mode == "extractive"
    assert len(llm_server.requests) == 2  # the client retried once
    assert result.fallback is not None
    assert "2 attempts timed out after 0.2s each" in result.fallback
    assert "GITMEM_LLM_TIMEOUT" in result.fallback
    assert config.worst_case_seconds == pytest.approx(0.2 * 2 + 0.5)
    assert LLMConfig(timeout=60, max_retries=2).worst_case_seconds == pytest.approx(181.5)


def _slow_llm(llm_server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point gitmem's LLM settings at ``llm_server``, which answers only after 5 s."""

    def slow(request: dict[str, object]) -> tuple[int, dict[str, str], bytes]:
        llm_server.sleep(5)
        return completion("- late")

    llm_server.default = slow
    monkeypatch.setenv("GITMEM_LLM_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("GITMEM_LLM_MODEL", "fake-model")


def test_timeout_and_retries_from_the_environment_reach_the_server(
    store: Path, llm_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _slow_llm(llm_server, monkeypatch)
    monkeypatch.setenv("GITMEM_LLM_TIMEOUT", "0.2")
    mm = MemoryManager.init(store)
    git(store, "config", "gitmem.llm.retries", "0")
    mm = MemoryManager(store)
    mm.save_interaction("py", "Recommend books on Python asyncio.", "Try Hattingh.")
    mm.summarize("py")
    assert len(llm_server.requests) == 1
    assert "1 attempt timed out after 0.2s each" in _fallback(store)


def test_cli_summarize_llm_uses_the_git_config_budget(
    store: Path, llm_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from gitmem.cli import cli

    _slow_llm(llm_server, monkeypatch)
    MemoryManager.init(store).save_interaction("py", "Books on asyncio?", "Try Hattingh.")
    git(store, "config", "gitmem.llm.timeout", "0.2")
    git(store, "config", "gitmem.llm.retries", "0")
    result = CliRunner().invoke(cli, ["--repo", str(store), "summarize", "py", "--llm"])
    assert result.exit_code == 0, result.output
    assert "1 attempt timed out after 0.2s each" in result.output
    assert len(llm_server.requests) == 1


def test_a_json_answer_off_the_schema_is_described_without_pydantic_wording(
    store: Path, llm_server: FakeServer
) -> None:
    manager = MemoryManager.init(store)
    manager.save_interaction("py", "Recommend books on Python asyncio.", "Try Fluent Python.")
    manager.summarizer = LLMSummarizer(_config(llm_server, modes=("json_schema",)))
    llm_server.default = lambda request: completion(json.dumps({"summary": 5, "key_facts": "x"}))
    manager.summarize("py")
    message = git(store, "log", "-1", "--format=%B")
    assert "does not fit the schema (summary: " in message
    for wording in (
        "Value error,",
        "validation error for",
        "errors.pydantic.dev",
        "type=",
        "input_value",
    ):
        assert wording not in message
