"""``gitmem export chat`` gives messages the Chat Completions API takes: the real ``openai``
client sends them to a loopback server (tests/fake_openai.py) that checks the request's
schema as the API does: roles, content, names, the shape of tool_calls, and every tool
message answering a call of the assistant message before it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from click.testing import CliRunner

from gitmem.cli import cli
from tests.fake_openai import FakeServer, Reply, completion, error, start
from tests.test_import_chat import MESSAGES, chatgpt_conversation, write

_KEYS = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls", "refusal"},
    "tool": {"role", "content", "tool_call_id"},
}
_NAME = re.compile(r"[^\s<|\\/>]+")
_FUNCTION = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _check_call(call: Any, at: int) -> str | None:
    if not isinstance(call, dict) or set(call) != {"id", "type", "function"}:
        return f"messages[{at}].tool_calls: each is {{id, type, function}}"
    function = call["function"]
    if call["type"] != "function" or not isinstance(call["id"], str) or not call["id"]:
        return f"messages[{at}].tool_calls: type 'function' and a string id"
    if not isinstance(function, dict) or set(function) != {"name", "arguments"}:
        return f"messages[{at}].tool_calls.function: {{name, arguments}}"
    if not _FUNCTION.fullmatch(str(function["name"])) or not isinstance(function["arguments"], str):
        return f"messages[{at}].tool_calls.function: a valid name and string arguments"
    return None


def _check_message(message: Any, at: int, waiting: list[str]) -> str | None:
    if not isinstance(message, dict) or message.get("role") not in _KEYS:
        return f"messages[{at}]: an object with a known role"
    role = message["role"]
    if set(message) - _KEYS[role]:
        return f"messages[{at}]: unexpected {sorted(set(message) - _KEYS[role])}"
    if "name" in message and not _NAME.fullmatch(str(message["name"])):
        return f"messages[{at}].name: {message['name']!r} is not a valid name"
    calls = message.get("tool_calls")
    content = message.get("content")
    if not isinstance(content, str) and not (role == "assistant" and content is None and calls):
        return f"messages[{at}].content: a string (null only beside tool_calls)"
    if role == "tool":
        if message.get("tool_call_id") not in waiting:
            return f"messages[{at}]: a tool message must answer a preceding tool_calls id"
        waiting.remove(message["tool_call_id"])
        return None
    if waiting:
        return f"messages[{at}]: tool_calls {waiting} were not answered before it"
    for call in calls or []:
        problem = _check_call(call, at)
        if problem:
            return problem
        waiting.append(call["id"])
    return None


def check_request(request: dict[str, Any]) -> Reply:
    """The answer of a server that validates a Chat Completions request."""
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        return error(400, "messages: a non-empty array")
    waiting: list[str] = []
    for at, message in enumerate(messages):
        problem = _check_message(message, at, waiting)
        if problem:
            return error(400, problem)
    if waiting:
        return error(400, f"tool_calls {waiting} were not answered")
    return completion("accepted")


@pytest.fixture
def validating_server() -> Iterator[FakeServer]:
    fake = FakeServer(default=check_request)
    server = start(fake)
    yield fake
    fake.stopping.set()
    server.shutdown()
    server.server_close()


def _send(server: FakeServer, messages: list[dict[str, Any]]) -> str | None:
    client = openai.OpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
    answer = client.chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
    return answer.choices[0].message.content


def test_exported_messages_pass_the_chat_completions_schema(
    validating_server: FakeServer, store: Path, tmp_path: Path
) -> None:
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(cli, ["--repo", str(store), *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output

    run("init")
    run("import", "chat", str(write(tmp_path / "talk.json", MESSAGES)))
    run("import", "chat", str(write(tmp_path / "c.json", [chatgpt_conversation()])))
    run("save", "hand", "--user", "Run the tests", "--assistant", "[tool: pytest -q]")
    for session_id in ("chat:talk-58fbbf62", "chatgpt:6f1d-lisbon", "hand"):
        messages = json.loads(run("export", "chat", session_id))["messages"]
        assert _send(validating_server, messages) == "accepted", session_id
    sent = validating_server.requests[0]["messages"]
    assert any("tool_calls" in m for m in sent) and any("tool_call_id" in m for m in sent)


def test_the_server_refuses_what_the_api_refuses(validating_server: FakeServer) -> None:
    # a tool message without its call, as the export wrote it before
    bad = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": '[tool: weather {"city":"Paris"}]'},
        {"role": "tool", "content": "18C"},
    ]
    with pytest.raises(openai.BadRequestError, match="must answer a preceding tool_calls"):
        _send(validating_server, bad)
    unanswered = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "w", "arguments": "{}"}}
            ],
        },
        {"role": "user", "content": "never mind"},
    ]
    with pytest.raises(openai.BadRequestError, match="were not answered"):
        _send(validating_server, unanswered)
    with pytest.raises(openai.BadRequestError, match="unexpected"):
        _send(validating_server, [{"role": "user", "content": "hi", "timestamp": "2024"}])
