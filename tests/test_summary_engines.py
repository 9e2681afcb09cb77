"""Summarizers against a real loopback Chat Completions server, the offline summarizer,
triggers and the loss guard."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gitmem.llm.config import LLMConfig
from gitmem.models import Interaction, Message, StructuredSummary, Summary
from gitmem.summary.engines import (
    IDLE,
    TOPIC_SHIFT,
    TURNS,
    ExtractiveSummarizer,
    LLMSummarizer,
    default_summarizer,
)
from gitmem.summary.loss import check_loss, covers_label
from gitmem.summary.triggers import Triggers, check_triggers, parse_duration
from tests.fake_openai import (
    FakeServer,
    closed_port,
    completion,
    error,
    llm_server,
    mode_of,
    structured,
)

__all__ = ["llm_server"]  # the fixture, imported for pytest

T0 = datetime(2024, 4, 15, 15, 30, tzinfo=UTC)


def turn(n: int, user: str, assistant: str = "Noted.") -> Interaction:
    return Interaction(
        id=f"i{n:03d}",
        timestamp=T0 + timedelta(minutes=n),
        messages=[
            Message(speaker="user", content=user),
            Message(speaker="assistant", content=assistant),
        ],
    )


BOOK_TURNS = [
    turn(
        1,
        "Recommend some books on Python asyncio.",
        "Try 'Using Asyncio in Python' by Caleb Hattingh.",
    ),
    turn(2, "My budget is 40 euros and I read on a Kindle.", "Both books have Kindle editions."),
    turn(3, "I prefer books with exercises.", "Then start with the exercises in chapter 3."),
]

GOOD = structured(
    "User's needs:\n- Books on Python asyncio, Kindle, budget 40 euros",
    ["User wants books on Python asyncio", "Budget is 40 euros", "User reads on a Kindle"],
    ["Python", "asyncio", "Kindle", "Caleb Hattingh"],
    ["python", "Books", "async io"],
)


def config(server: FakeServer, **kwargs: object) -> LLMConfig:
    settings: dict[str, object] = {
        "model": "fake-model",
        "base_url": server.base_url,
        "api_key": "sk-test",
        "timeout": 5.0,
        "max_retries": 0,
    }
    settings.update(kwargs)
    return LLMConfig(**settings)  # type: ignore[arg-type]


# --- the LLM path, over real HTTP ------------------------------------------------------------


def test_good_structured_answer(llm_server: FakeServer) -> None:
    llm_server.default = lambda request: completion(GOOD)
    result = LLMSummarizer(config(llm_server)).summarize(BOOK_TURNS)
    assert result.fallback is None
    assert result.mode == "json_schema"
    assert result.model == "fake-model"
    assert result.covers == ("i001", "i002", "i003")
    assert result.content.key_facts[1] == "Budget is 40 euros"
    assert result.content.tags == ["python", "books", "async-io"]
    # what the client really sent
    [request] = llm_server.requests
    assert llm_server.paths == ["/v1/chat/completions"]
    assert llm_server.headers[0]["authorization"] == "Bearer sk-test"
    assert request["model"] == "fake-model"
    assert request["temperature"] <= 0.3
    fmt = request["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"]["required"] == ["summary", "key_facts", "entities", "tags"]
    prompt = request["messages"][-1]["content"]
    assert "[i002]" in prompt and "My budget is 40 euros" in prompt
    assert "Open items" in prompt


def test_json_mode_only_server(llm_server: FakeServer) -> None:
    def json_mode_only(request: dict[str, object]) -> tuple[int, dict[str, str], bytes]:
        if mode_of(request) == "json_schema":  # type: ignore[arg-type]
            return error(400, "response_format json_schema is not supported")
        return completion(GOOD)

    llm_server.default = json_mode_only
    summarizer = LLMSummarizer(config(llm_server))
    result = summarizer.summarize(BOOK_TURNS)
    assert result.fallback is None
    assert result.mode == "json_object"
    assert [mode_of(r) for r in llm_server.requests] == ["json_schema", "json_object"]
    assert "JSON" in llm_server.requests[1]["messages"][0]["content"]
    assert result.attempts[0].startswith("json_schema: HTTP 400")
    # the summarizer remembers: the next call goes straight to JSON mode
    summarizer.summarize(BOOK_TURNS)
    assert [mode_of(r) for r in llm_server.requests[2:]] == ["json_object"]


def test_plain_text_only_server(llm_server: FakeServer) -> None:
    text = (
        "User's needs:\n- Python asyncio books for a Kindle\n- Budget: 40 euros\n"
        "Open items:\n- Pick a book with exercises"
    )

    def text_only(request: dict[str, object]) -> tuple[int, dict[str, str], bytes]:
        if mode_of(request) != "none":  # type: ignore[arg-type]
            return error(400, "unknown field response_format")
        return completion(text)

    llm_server.default = text_only
    result = LLMSummarizer(config(llm_server)).summarize(BOOK_TURNS)
    assert result.fallback is None
    # prompt-JSON is asked first (no response_format); a prose answer to it is not JSON,
    # so the summarizer then asks for plain text
    assert result.mode == "text"
    assert [mode_of(r) for r in llm_server.requests] == [
        "json_schema",
        "json_object",
        "none",
        "none",
    ]
    assert result.content.summary == text
    assert "Budget: 40 euros" in result.content.key_facts
    assert "User's needs:" not in result.content.key_facts
    assert "Kindle" in result.content.entities


def test_prompt_json_answer_is_used(llm_server: FakeServer) -> None:
    llm_server.default = lambda request: (
        completion(f"```json\n{GOOD}\n```")
        if mode_of(request) == "none"
        else error(422, "response_format unsupported")
    )
    result = LLMSummarizer(config(llm_server)).summarize(BOOK_TURNS)
    assert (result.mode, result.fallback) == ("prompt_json", None)
    assert "Budget is 40 euros" in result.content.key_facts


def test_rate_limited_then_success(llm_server: FakeServer) -> None:
    llm_server.script = [lambda request: error(429, "slow down", headers={"retry-after-ms": "20"})]
    llm_server.default = lambda request: completion(GOOD)
    result = LLMSummarizer(config(llm_server, max_retries=2)).summarize(BOOK_TURNS)
    assert result.fallback is None and result.mode == "json_schema"
    assert len(llm_server.requests) == 2  # the client retried the 429 itself


def test_rate_limited_beyond_retries_falls_back(llm_server: FakeServer) -> None:
    llm_server.default = lambda request: error(429, "slow down", headers={"retry-after-ms": "5"})
    result = LLMSummarizer(config(llm_server, max_retries=1)).summarize(BOOK_TURNS)
    assert result.mode == "extractive"
    assert result.fallback is not None and "HTTP 429" in result.fallback
    assert len(llm_server.requests) == 2


def test_timeout_falls_back(llm_server: FakeServer) -> None:
    def slow(request: dict[str, object]) -> tuple[int, dict[str, str], bytes]:
        llm_server.sleep(5)
        return completion(GOOD)

    llm_server.default = slow
    result = LLMSummarizer(config(llm_server, timeout=0.3)).summarize(BOOK_TURNS)
    assert result.mode == "extractive"
    assert result.fallback is not None and "timed out after 0.3s" in result.fallback
    assert result.content.key_facts  # the offline summary is complete


def test_invalid_json_falls_back(llm_server: FakeServer) -> None:
    llm_server.default = lambda request: completion('{"summary": "cut off', model="x")
    result = LLMSummarizer(config(llm_server)).summarize(BOOK_TURNS)
    # broken JSON in JSON-schema mode: ask for plain text once, then give up
    assert [mode_of(r) for r in llm_server.requests] == ["json_schema", "none"]
    assert result.mode == "extractive"
    assert result.fallback is not None and "broken JSON" in result.fallback
    assert any("not valid JSON" in line for line in result.attempts)


def test_schema_mismatch_is_not_accepted(llm_server: FakeServer) -> None:
    llm_server.script = [lambda request: completion(json.dumps({"summary": ""}))]
    llm_server.default = lambda request: completion("- Books on asyncio\n- Budget 40 euros")
    result = LLMSummarizer(config(llm_server)).summarize(BOOK_TURNS)
    assert result.mode == "text" and result.fallback is None
    assert "does not fit the schema" in result.attempts[0]


def test_server_down_falls_back() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    summarizer = LLMSummarizer(LLMConfig(model="m", base_url=url, max_retries=0, timeout=2))
    result = summarizer.summarize(BOOK_TURNS)
    assert result.mode == "extractive" and result.model == "gitmem-extractive"
    assert result.fallback is not None
    assert result.fallback.startswith("LLM m: cannot reach http://127.0.0.1:")
    assert result.covers == ("i001", "i002", "i003")


def test_server_error_falls_back(llm_server: FakeServer) -> None:
    llm_server.default = lambda request: error(404, "model 'nope' not found")
    result = LLMSummarizer(config(llm_server, model="nope")).summarize(BOOK_TURNS)
    assert result.fallback is not None and "HTTP 404" in result.fallback
    assert len(llm_server.requests) == 1


def test_long_input_is_cut_to_fit(llm_server: FakeServer) -> None:
    llm_server.default = lambda request: completion(GOOD)
    turns = [turn(n, "word " * 200) for n in range(1, 11)]
    result = LLMSummarizer(config(llm_server, max_input_chars=2500)).summarize(turns)
    assert result.covers == ("i001", "i002")  # the rest stays uncovered for next time
    assert "[i003]" not in llm_server.requests[0]["messages"][-1]["content"]


def test_previous_summary_and_custom_prompt_are_sent(llm_server: FakeServer) -> None:
    llm_server.default = lambda request: completion(GOOD)
    previous = Summary(text="- Earlier: user likes Go", generated=T0, covers=["i000"])
    template = "Bullets max {max_bullets}. Before: {previous}. Now: {conversation} {json}"
    LLMSummarizer(config(llm_server, prompt=template, max_bullets=3)).summarize(
        BOOK_TURNS, previous=previous
    )
    prompt = llm_server.requests[0]["messages"][-1]["content"]
    assert prompt.startswith("Bullets max 3. Before: - Earlier: user likes Go. Now: [i001]")
    assert prompt.endswith("{json}")  # unknown placeholders are left alone


def test_config_from_env() -> None:
    assert LLMConfig.from_env({}) is None
    env = {
        "OPENAI_API_KEY": "sk-a",
        "OPENAI_BASE_URL": "http://a/v1",
        "OPENAI_MODEL": "a",
        "GITMEM_LLM_MODEL": "llama3.1:8b",
        "GITMEM_LLM_BASE_URL": "http://b/v1",
    }
    found = LLMConfig.from_env(env, timeout=5.0)
    assert found is not None
    assert (found.model, found.base_url, found.api_key, found.timeout) == (
        "llama3.1:8b",
        "http://b/v1",
        "sk-a",
        5.0,
    )
    only_key = LLMConfig.from_env({"OPENAI_API_KEY": "sk-a"})
    assert only_key is not None and only_key.model == "gpt-4o-mini"


def test_default_summarizer_is_offline_without_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    assert isinstance(default_summarizer(), ExtractiveSummarizer)
    monkeypatch.setenv("GITMEM_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    assert isinstance(default_summarizer(), LLMSummarizer)
    assert isinstance(default_summarizer(offline=True), ExtractiveSummarizer)


# --- offline summarizer -----------------------------------------------------------------------


def test_extractive_is_deterministic_and_picks_facts() -> None:
    turns = [
        turn(1, "Hi there!", "Hello!"),
        turn(2, "I moved to Lisbon in March 2023 for a job at Feedzai.", "Congratulations!"),
        turn(3, "Cool.", "Yes."),
        turn(4, "My daughter Ana starts school in Lisbon in September.", "Exciting."),
        turn(5, "The school is the Lisbon International School.", "Sounds good."),
    ]
    first = ExtractiveSummarizer().summarize(turns)
    again = ExtractiveSummarizer().summarize(turns)
    assert first == again
    assert first.mode == "extractive" and first.fallback is None
    facts = "\n".join(first.content.key_facts)
    assert "Lisbon in March 2023" in facts and "Ana starts school" in facts
    assert "Hi there" not in facts and "Cool." not in facts
    assert "Lisbon" in first.content.entities and "Feedzai" in first.content.entities


def test_extractive_removes_redundancy() -> None:
    same = "The deployment to the staging cluster failed because the database migration timed out."
    turns = [turn(n, same, "I see.") for n in range(1, 8)]
    turns.append(turn(9, "Rolling back the release fixed the checkout page errors.", "Good."))
    facts = ExtractiveSummarizer().summarize(turns).content.key_facts
    assert sum("staging cluster" in f for f in facts) == 1
    assert any("rolling back the release" in f.casefold() for f in facts)


def test_extractive_keeps_previous_facts() -> None:
    previous = Summary(text="- Alice likes green tea", generated=T0, covers=["i000"])
    old = StructuredSummary(summary="- x", key_facts=[f"old fact number {n}" for n in range(10)])
    result = ExtractiveSummarizer(max_facts=12).structured(BOOK_TURNS, previous)
    # a summary without stored facts: its bullets are its facts
    assert result.key_facts[:1] == ["Alice likes green tea"]
    kept = ExtractiveSummarizer(max_facts=12)._merge_facts(old.key_facts, ["a", "b", "c", "d"])
    assert len(kept) == 12 and kept[-4:] == ["a", "b", "c", "d"]
    assert check_loss(None, old, []).share == 0.0


def test_extractive_handles_chinese_and_empty_turns() -> None:
    turns = [
        turn(1, "请推荐几本关于Python异步编程的书。", "可以看《Python异步编程实战》。"),
        turn(2, "我的预算是四十欧元。", "好的。"),
        Interaction(id="i003", timestamp=T0, messages=[]),
    ]
    result = ExtractiveSummarizer().summarize(turns)
    assert any("预算" in fact for fact in result.content.key_facts)
    assert result.covers == ("i001", "i002", "i003")
    empty = ExtractiveSummarizer().summarize([Interaction(id="e1", timestamp=T0)])
    assert empty.content.summary == "- 1 turns without text"


# --- triggers ----------------------------------------------------------------------------------


def test_parse_duration() -> None:
    assert parse_duration("30m") == timedelta(minutes=30)
    assert parse_duration("2h") == timedelta(hours=2)
    assert parse_duration("1d12h") == timedelta(days=1, hours=12)
    assert parse_duration(" 90s ") == timedelta(seconds=90)
    for bad in ("", "30", "m", "2 hours", "-1h"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_turn_threshold_counts_uncovered_turns() -> None:
    turns = [turn(n, f"question {n} about gardening tomatoes") for n in range(1, 6)]
    triggers = Triggers(every_turns=4, topic_shift=None)
    decision = check_triggers(turns, None, triggers)
    assert decision is not None and decision.trigger == TURNS
    summary = Summary(text="- x", generated=T0, covers=["i001", "i002"])
    assert check_triggers(turns, summary, triggers) is None


def test_topic_shift() -> None:
    garden = [
        turn(
            n,
            f"How deep should I plant tomato seedlings in clay soil, take {n}?",
            "Plant tomato seedlings deep in the soil; clay soil needs compost.",
        )
        for n in range(1, 6)
    ]
    tax = [
        turn(
            n,
            "How do I file my income tax return as a freelancer?",
            "File the income tax return online before the deadline.",
        )
        for n in range(6, 9)
    ]
    triggers = Triggers(every_turns=None, topic_shift=0.05, shift_window=3, shift_history=4)
    decision = check_triggers([*garden, *tax], None, triggers)
    assert decision is not None and decision.trigger == TOPIC_SHIFT
    assert decision.count == 5  # summarize the gardening turns, keep the new topic open
    more_garden = [
        turn(n, "Should tomato seedlings get compost in clay soil?", "Yes, compost.")
        for n in range(6, 9)
    ]
    assert check_triggers([*garden, *more_garden], None, triggers) is None


def test_idle_trigger() -> None:
    turns = [turn(1, "hello")]
    triggers = Triggers(every_turns=None, topic_shift=None, idle=parse_duration("30m"))
    late = T0 + timedelta(hours=1)
    decision = check_triggers(turns, None, triggers, last_active=T0, now=late)
    assert decision is not None and decision.trigger == IDLE and "idle for 1h" in decision.reason
    soon = T0 + timedelta(minutes=10)
    assert check_triggers(turns, None, triggers, last_active=T0, now=soon) is None


def test_covers_label() -> None:
    assert covers_label(["a"]) == "a"
    assert covers_label([f"i{n}" for n in range(10)]) == "10 interactions, i0..i9"


# --- loss guard ---------------------------------------------------------------------------------

PREVIOUS = Summary(
    text="- Caroline adopted a dog named Rex in May 2023\n- She works as a counselor in Boston"
    "\n- Her sister Amy lives in Denver\n- She plans a trip to Sweden in June",
    generated=T0,
    covers=["i001", "i002"],
)


def test_loss_guard_passes_a_faithful_summary() -> None:
    new = StructuredSummary(
        summary="- Caroline has a dog, Rex, adopted May 2023; counselor in Boston",
        key_facts=[
            "Caroline's sister Amy lives in Denver",
            "Trip to Sweden planned in June",
            "Caroline started painting classes",
        ],
    )
    report = check_loss(PREVIOUS, new, BOOK_TURNS)
    assert report.dropped == () and not report.fires


def test_loss_guard_fires_when_facts_are_dropped(llm_server: FakeServer) -> None:
    llm_server.default = lambda request: completion(
        structured("- Caroline talked about painting", ["Caroline paints landscapes"], ["Caroline"])
    )
    result = LLMSummarizer(config(llm_server)).summarize(BOOK_TURNS, previous=PREVIOUS)
    report = check_loss(PREVIOUS, result.content, BOOK_TURNS, threshold=0.25)
    assert report.fires
    assert len(report.dropped) == 4 and report.share == 1.0
    assert "Caroline paints landscapes" in report.unsupported
    text = report.render()
    assert "drops 4 of 4 facts" in text and "Her sister Amy lives in Denver" in text
    assert report.to_dict()["fires"] is True


def test_loss_guard_threshold_is_strict() -> None:
    new = StructuredSummary(
        summary="- Caroline adopted Rex in May 2023; counselor in Boston; sister Amy in Denver"
    )
    report = check_loss(PREVIOUS, new, [], threshold=0.25)
    assert report.dropped == ("She plans a trip to Sweden in June",)
    assert report.share == 0.25 and not report.fires
    assert check_loss(PREVIOUS, new, [], threshold=0.2).fires


def test_structured_summary_is_lenient_but_needs_text() -> None:
    parsed = StructuredSummary.model_validate(
        {
            "summary": ["a", "b"],
            "key_facts": "one\n\n- two\none",
            "tags": ["#Py Thon", "a,b", 3],
            "extra": 1,
        }
    )
    assert parsed.summary == "- a\n- b"
    assert parsed.key_facts == ["one", "two"]
    assert parsed.tags == ["py-thon", "ab", "3"]
    with pytest.raises(ValueError):
        StructuredSummary.model_validate({"summary": "  "})


def test_openai_is_imported_only_when_an_llm_is_used() -> None:
    import subprocess
    import sys

    code = (
        "import sys, gitmem.cli, gitmem.manager, gitmem.summary.engines; "
        "print('openai' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert out.stdout.strip() == "False"


def test_an_answer_written_as_a_transcript_falls_back(llm_server: FakeServer) -> None:
    transcript = structured(
        "- User: Recommend some books on Python asyncio.\n- Assistant: Try Fluent Python.",
        ["The user reads on a Kindle"],
        [],
        [],
    )
    questions = structured("The user asked for books.", ["What is asyncio?"], [], [])
    for answer, why in (
        (transcript, "summary line 1 starts with the speaker label 'User'"),
        (questions, "key fact 1 is a question"),
    ):
        llm_server.default = lambda request, answer=answer: completion(answer)
        result = LLMSummarizer(config(llm_server)).summarize(BOOK_TURNS)
        assert result.model == "gitmem-extractive"  # the offline summary, recorded
        assert result.fallback is not None and why in result.fallback
        assert "User:" not in result.content.summary
