"""The live-capture plugin inside nanobot's real agent loop: nanobot loads it from the
``nanobot.tools`` entry point, runs turns against a scripted LLM (tests/fake_openai.py, a real
loopback server speaking the streamed Chat Completions format), and each turn it saves
becomes one gitmem commit; the store is then checked with the real git.

Slow (a virtual environment with ``nanobot-ai`` from the package index), so deselected by
default:

    GITMEM_FULL=1 python -m pytest -q -m slow tests/test_nanobot_live.py

``GITMEM_NANOBOT_PYTHON=/path/to/venv/bin/python`` reuses an environment that has this
gitmem with its ``nanobot`` extra installed (``pip install -e '.[nanobot]'``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitmem import MemoryManager
from tests.conftest import git
from tests.fake_openai import FakeServer, Reply, start
from tests.nanobot_env import ROOT, python_with

pytestmark = pytest.mark.slow


# Runs with nanobot's interpreter: its SDK facade over the real AgentLoop, which loads tools
# (and so the plugin) through its own ToolLoader. After each turn it waits until the capture
# has caught up, as a person typing the next message would.
DRIVER = r"""
import asyncio, json, sys
from pathlib import Path

from nanobot import Nanobot


def caught_up():
    from gitmem.importers import nanobot_live
    for capture in list(nanobot_live._captures.values()):
        capture.flush(60)
    return [{"store": str(c.store), "imports": c.imports, "failures": c.failures}
            for c in nanobot_live._captures.values()]


async def main(config_path, turns_path):
    bot = Nanobot.from_config(config_path)
    out = {"replies": [], "tools": sorted(bot._loop.tools.tool_names)}
    for key, text in json.loads(Path(turns_path).read_text()):
        channel, chat_id = key.split(":", 1)
        result = await bot.run(text, session_key=key, channel=channel, chat_id=chat_id)
        out["replies"].append(result.content)
        out["captures"] = await asyncio.to_thread(caught_up)
    print("RESULT " + json.dumps(out))


asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@pytest.fixture(scope="module")
def nanobot_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An interpreter with this gitmem and its nanobot extra: GITMEM_NANOBOT_PYTHON, else a
    new venv (which also checks that the extra's pin resolves)."""
    return python_with(tmp_path_factory, "nanobot-live-venv", "-e", f"{ROOT}[nanobot]")


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    body = {
        "id": "chatcmpl-live",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n"


def streamed(content: str | None = None, call: tuple[str, dict[str, Any]] | None = None) -> Reply:
    """A streamed answer: ``content``, or one tool call (name, arguments)."""
    if call is not None:
        name, args = call
        delta = {
            "role": "assistant",
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
            ],
        }
        events = _chunk(delta) + _chunk({}, "tool_calls")
    else:
        events = _chunk({"role": "assistant", "content": content}) + _chunk({}, "stop")
    usage = {
        "id": "chatcmpl-live",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    body = events + f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n"
    return 200, {"Content-Type": "text/event-stream"}, body.encode()


def scripted_llm(request: dict[str, Any]) -> Reply:
    """Answers by the conversation's last message, as a model would."""
    last = request["messages"][-1]
    said = json.dumps(last.get("content"))
    if last.get("role") == "tool":
        return streamed("USER.md keeps what I know about you.")
    if "read USER.md" in said:
        return streamed(call=("read_file", {"path": "USER.md"}))
    if "Porto" in said:
        return streamed("Noted: your sister Ana lives in Porto.")
    return streamed("Hello! How can I help?")


@pytest.fixture
def llm() -> Iterator[FakeServer]:
    fake = FakeServer(default=scripted_llm)
    server = start(fake)
    yield fake
    fake.stopping.set()
    server.shutdown()
    server.server_close()


TURNS = [
    ("telegram:8812345", "My sister Ana lives in Porto"),
    ("telegram:8812345", "Please read USER.md and tell me what it is for"),
    ("telegram:8812345", "/help"),  # a command: persisted, but no chat turn
    ("cli:direct", "hello"),
]


def run_nanobot(
    python: Path, tmp_path: Path, llm: FakeServer, *, env: dict[str, str] | None = None
) -> tuple[dict[str, Any], str]:
    data = tmp_path / "nanobot"  # nanobot's data folder: config.json, sessions/
    data.mkdir(parents=True, exist_ok=True)
    config = {
        "agents": {
            "defaults": {
                "workspace": str(data / "workspace"),
                "model": "fake-model",
                "provider": "custom",
            }
        },
        "providers": {"custom": {"apiKey": "sk-test", "apiBase": llm.base_url}},
    }
    (data / "config.json").write_text(json.dumps(config))
    (tmp_path / "turns.json").write_text(json.dumps(TURNS))
    (tmp_path / "driver.py").write_text(DRIVER)
    done = subprocess.run(
        [str(python), "driver.py", str(data / "config.json"), "turns.json"],
        cwd=tmp_path,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, f"the driver printed no result:\n{done.stderr[-4000:]}"
    return json.loads(line.removeprefix("RESULT ")), done.stderr


def commits(store: Path) -> list[str]:
    """'subject | trailers' of each commit after the store's first, oldest first."""
    out = git(store, "log", "--reverse", "--format=%an | %s | %(trailers:only,unfold,separator=;)")
    return [line for line in out.splitlines()[1:] if line]


def added(store: Path, rev: str) -> str:
    """The lines commit ``rev`` added to session files."""
    diff = git(store, "show", "--format=", "--unified=0", rev, "--", "sessions")
    return "\n".join(
        x[1:] for x in diff.splitlines() if x.startswith("+") and not x.startswith("+++")
    )


def test_each_turn_nanobot_saves_is_one_commit(
    nanobot_python: Path, tmp_path: Path, llm: FakeServer
) -> None:
    workspace = tmp_path / "nanobot" / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "USER.md").write_text("# User\n\nName: Alice. Sister: Ana (Porto).\n")
    # opting in as the docs say: the store where the plugin looks
    MemoryManager.init(tmp_path / "nanobot" / "gitmem").close()
    out, stderr = run_nanobot(nanobot_python, tmp_path, llm)
    assert out["replies"][:2] == [
        "Noted: your sister Ana lives in Porto.",
        "USER.md keeps what I know about you.",
    ]
    assert "gitmem_capture" not in out["tools"]  # the model is offered no tool
    store = tmp_path / "nanobot" / "gitmem"  # the default: beside nanobot's config.json
    [capture] = out["captures"]
    assert capture == {"store": str(store), "imports": 4, "failures": 0}, stderr[-3000:]
    assert f"gitmem: capturing nanobot's turns into {store}" in stderr  # in nanobot's log
    # one commit per persisted turn, in order
    made = commits(store)
    assert [c.split(" | ")[:2] for c in made] == [
        ["nanobot", f"Capture nanobot session {key}"] for key, _ in TURNS
    ]
    for commit in made:
        assert "Gitmem-Op: import" in commit and "Gitmem-Via: nanobot-plugin" in commit
    first = added(store, "HEAD~3")
    assert "My sister Ana lives in Porto" in first and "Please read" not in first
    assert "Noted: your sister Ana lives in Porto." in first
    assert "Name: Alice" in first  # the first capture took the memory files too
    second = added(store, "HEAD~2")
    assert "Please read USER.md" in second and "[tool: read_file" in second
    assert "USER.md keeps what I know about you." in second and "Ana" not in second
    # the command turn: nanobot's session became more recent, no chat turn was added
    command = added(store, "HEAD~1")
    assert "/help" not in command and "Last active" in command and "> " not in command
    assert "> hello" in added(store, "HEAD")
    # a batch import of the same workspace afterwards: the same ids, nothing new
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gitmem",
            "--json",
            "--repo",
            str(store),
            "import",
            "nanobot",
            str(workspace),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["turns_added"] == 0 and report["commit"] is None, report
    assert git(store, "status", "--porcelain") == ""
    git(store, "fsck", "--no-progress")


def test_a_store_that_cannot_be_written_never_stops_nanobot(
    nanobot_python: Path, tmp_path: Path, llm: FakeServer
) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the store should be")
    out, stderr = run_nanobot(nanobot_python, tmp_path, llm, env={"GITMEM_REPO": str(blocked)})
    assert out["replies"][0] == "Noted: your sister Ana lives in Porto."
    [capture] = out["captures"]
    assert capture["store"] == str(blocked) and capture["failures"] == 4
    assert "importing session 'telegram:8812345'" in stderr and str(blocked) in stderr
    assert blocked.read_text() == "a file where the store should be"


def test_capture_is_opt_in_and_can_be_switched_off(
    nanobot_python: Path, tmp_path: Path, llm: FakeServer
) -> None:
    # installed but never asked for (no store, no setting): nothing is written
    out, _ = run_nanobot(nanobot_python, tmp_path / "plain", llm)
    assert out["replies"][0] == "Noted: your sister Ana lives in Porto."
    assert out["captures"] == [] and not (tmp_path / "plain" / "nanobot" / "gitmem").exists()
    # asked for with the switch: the store is made on the first turn
    out, _ = run_nanobot(nanobot_python, tmp_path / "on", llm, env={"GITMEM_NANOBOT_CAPTURE": "1"})
    assert out["captures"][0]["imports"] == 4
    assert (tmp_path / "on" / "nanobot" / "gitmem" / ".git").is_dir()
    # a store exists, and the switch says off
    MemoryManager.init(tmp_path / "off" / "nanobot" / "gitmem").close()
    out, _ = run_nanobot(nanobot_python, tmp_path / "off", llm, env={"GITMEM_NANOBOT_CAPTURE": "0"})
    assert out["captures"] == []
