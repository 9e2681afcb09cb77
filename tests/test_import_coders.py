"""Coding agents in: ``gitmem import claude-code | codex | gemini-cli`` and ``gitmem capture``.

tests/fixtures/{claude-code,codex,gemini-cli}-real were written by Claude Code 2.0.77's, Codex
0.171.0's and Gemini CLI 0.61.0's own code, run offline against a loopback stand-in for their
APIs (make_fixture.py in tests/fixtures/claude-code, codex and gemini-cli), with the payloads
their hooks and notify gave. The fixtures under tests/fixtures/{claude-code,codex,gemini-cli}
are hand-written to the formats read from each tool's published package (named in the
importers' docstrings), to cover what a short real run does not (titles, thinking,
sidechains, injected context, rewinds).
Capture runs the real ``gitmem`` command in a subprocess, fed a hook payload as the agent
would give it, against a real git store.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem.cli import cli
from gitmem.manager import MemoryManager
from tests.conftest import git

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parent.parent
CLAUDE = "claude-code:5b0c1e7a-2f4d-4c1b-9a53-0d6f2b8e9c11"
CODEX_THREAD = "019a2f3e-7c1d-7b20-8e4f-3a9b5c6d7e8f"
GEMINI = "gemini-cli:8f14e45f-ceea-467f-a0e6-1f2d3c4b5a69"


def run(store: Path, *args: str) -> dict[str, object]:
    done = CliRunner().invoke(cli, ["--repo", str(store), "--json", *args])
    assert done.exit_code == 0, done.output
    found: dict[str, object] = json.loads(done.output)
    return found


@pytest.fixture
def mm(store: Path) -> MemoryManager:
    return MemoryManager(store, init=True)


def commits(store: Path) -> int:
    return int(git(store, "rev-list", "--count", "HEAD"))


@pytest.mark.parametrize(
    ("agent", "folder", "session_id", "first", "reply"),
    [
        ("claude-code", "claude-code", CLAUDE, "Why does the checkout", "rounds half to even"),
        ("codex", "codex", f"codex:{CODEX_THREAD}", "List the failing tests.", "One test fails"),
        ("gemini-cli", "gemini-cli", GEMINI, "Which files import cart?", "Only src/app.py"),
    ],
)
def test_import_reads_turns_tools_and_metadata(
    mm: MemoryManager, store: Path, agent: str, folder: str, session_id: str, first: str, reply: str
) -> None:
    result = run(store, "import", agent, str(FIXTURES / folder), "--tools", "full")
    assert result["turns_added"] == 2 + (agent == "gemini-cli")  # and its checkpoint
    session = mm.load_memory(session_id)
    assert session is not None
    [one, _second] = session.interactions
    assert one.messages[0].speaker == "user" and one.messages[0].content.startswith(first)
    assert [m.speaker for m in one.messages] == ["user", "assistant", "tool", "assistant"]
    assert one.messages[1].content.startswith("[tool: ")
    assert reply in one.messages[3].content
    assert session.project == "shop" and session.extra["cwd"] == "/home/ann/shop"
    assert session.extra["title"] and session.extra["model"]
    assert agent in session.tags
    text = "\n".join(i.text for i in session.interactions)
    for left_out in ("Probably float rounding", "Run pytest", "grep for cart", "sub-agent"):
        assert left_out not in text  # thinking, reasoning, thoughts, sidechains
    for injected in ("AGENTS.md", "environment_context", "Caveat:", "A wrong question"):
        assert injected not in text  # injected context, meta lines, rewound messages


def test_titles_and_models_are_the_tools_own(mm: MemoryManager, store: Path) -> None:
    for agent in ("claude-code", "codex", "gemini-cli"):
        run(store, "import", agent, str(FIXTURES / agent))
    claude = mm.load_memory(CLAUDE)
    codex = mm.load_memory(f"codex:{CODEX_THREAD}")
    gemini = mm.load_memory(GEMINI)
    assert claude is not None and codex is not None and gemini is not None
    assert claude.extra["title"] == "Fix the checkout rounding bug"
    assert claude.extra["model"] == "claude-sonnet-4-5-20250929"
    assert codex.extra["title"] == "Failing cart test"
    assert codex.extra["model"] == "gpt-5.1-codex"
    assert codex.extra["repository"] == "git@example.org:ann/shop.git"
    assert gemini.extra["title"] == "Who imports cart"
    assert "tool" not in claude.participants  # results only with --tools full


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini-cli"])
def test_second_import_makes_no_commit_and_keeps_a_hand_added_turn(
    mm: MemoryManager, store: Path, agent: str
) -> None:
    run(store, "import", agent, str(FIXTURES / agent))
    [session_id] = [s for s in mm.session_ids() if "checkpoint" not in s]
    mm.save_interaction(session_id, "A note I added", "Kept.", timestamp="2026-03-15T08:00:00Z")
    before = commits(store)
    again = run(store, "import", agent, str(FIXTURES / agent))
    assert again["commit"] is None and again["turns_added"] == 0 and not again["conflicts"]
    assert commits(store) == before
    session = mm.load_memory(session_id)
    assert session is not None
    assert session.interactions[-1].messages[0].content == "A note I added"


def test_dry_run_writes_nothing(mm: MemoryManager, store: Path) -> None:
    before = commits(store)
    found = run(store, "import", "codex", str(FIXTURES / "codex"), "--dry-run")
    assert found["turns_added"] == 2 and found["commit"] is None
    assert commits(store) == before


# --- live capture through the hooks -------------------------------------------------------


def gitmem(store: Path, *args: str, stdin: str = "", env: dict[str, str] | None = None) -> int:
    done = subprocess.run(
        [sys.executable, "-m", "gitmem", "--repo", str(store), *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=120,
    )
    assert done.stdout == "" and done.stderr == "", done.stderr
    return done.returncode


def claude_lines() -> list[str]:
    [path] = (FIXTURES / "claude-code").glob("*/*.jsonl")
    return path.read_text().splitlines(keepends=True)


def test_capture_claude_code_commits_each_new_turn(
    mm: MemoryManager, store: Path, tmp_path: Path
) -> None:
    lines = claude_lines()
    transcript = tmp_path / "projects" / "-home-ann-shop" / f"{CLAUDE.split(':')[1]}.jsonl"
    transcript.parent.mkdir(parents=True)
    payload = json.dumps(
        {
            "session_id": CLAUDE.split(":")[1],
            "transcript_path": str(transcript),
            "cwd": "/home/ann/shop",
            "permission_mode": "default",
            "hook_event_name": "Stop",
            "stop_hook_active": False,
        }
    )
    second = next(n for n, line in enumerate(lines) if "Do it, and add a test." in line)
    transcript.write_text("".join(lines[:second]))
    start = commits(store)
    assert gitmem(store, "capture", "claude-code", stdin=payload) == 0
    assert commits(store) == start + 1
    assert gitmem(store, "capture", "claude-code", stdin=payload) == 0  # unchanged
    assert commits(store) == start + 1
    with open(transcript, "a") as handle:
        handle.write("".join(lines[second:]))
    assert gitmem(store, "capture", "claude-code", stdin=payload) == 0
    assert commits(store) == start + 2
    assert "Capture claude-code" in git(store, "log", "-1", "--format=%s")
    [state] = (store / ".git" / "gitmem" / "capture").glob("*.json")
    resume = json.loads(state.read_text())["resume"]
    assert resume == len("".join(lines[:second]).encode())  # the next capture reads on here
    session = mm.load_memory(CLAUDE)
    assert session is not None and len(session.interactions) == 2
    # what the capture wrote is what an import would: nothing new, no commit
    assert run(store, "import", "claude-code", str(transcript))["commit"] is None
    assert not (store / ".git" / "gitmem" / "capture.log").exists()


def test_capture_of_a_growing_reply_extends_its_turn(
    mm: MemoryManager, store: Path, tmp_path: Path
) -> None:
    lines = claude_lines()
    transcript = tmp_path / "t.jsonl"
    payload = json.dumps(
        {"session_id": "x", "transcript_path": str(transcript), "hook_event_name": "Stop"}
    )
    reply = next(n for n, line in enumerate(lines) if "rounds half to even" in line)
    transcript.write_text("".join(lines[:reply]))
    gitmem(store, "capture", "claude-code", stdin=payload)
    with open(transcript, "a") as handle:
        handle.write(lines[reply])
    gitmem(store, "capture", "claude-code", stdin=payload)
    session = mm.load_memory(CLAUDE)
    assert session is not None and len(session.interactions) == 1
    assert "rounds half to even" in session.interactions[0].messages[-1].content


@pytest.mark.parametrize(
    "payload",
    [
        "{not json",
        json.dumps({"session_id": "s", "hook_event_name": "Stop"}),
        json.dumps({"session_id": "s", "transcript_path": "/nowhere/s.jsonl"}),
    ],
)
def test_a_broken_hook_payload_exits_0_and_is_logged(
    mm: MemoryManager, store: Path, payload: str
) -> None:
    before = commits(store)
    assert gitmem(store, "capture", "claude-code", stdin=payload) == 0
    assert commits(store) == before
    log = (store / ".git" / "gitmem" / "capture.log").read_text()
    assert "capture claude-code" in log


def test_capture_without_a_store_logs_in_the_home(tmp_path: Path, isolated_env: Path) -> None:
    assert gitmem(tmp_path / "none", "capture", "claude-code", stdin="{}") == 0
    assert "capture claude-code" in (isolated_env / ".local/state/gitmem/capture.log").read_text()


def test_capture_codex_from_its_notify_payload(
    mm: MemoryManager, store: Path, tmp_path: Path
) -> None:
    home = tmp_path / "codex-home"
    shutil.copytree(FIXTURES / "codex", home / "sessions")
    payload = json.dumps(
        {
            "type": "agent-turn-complete",
            "thread-id": CODEX_THREAD,
            "turn-id": "t1",
            "cwd": "/home/ann/shop",
            "input-messages": ["Fix it."],
            "last-assistant-message": "Fixed: src/cart.py rounds half up now.",
        }
    )
    before = commits(store)
    assert gitmem(store, "capture", "codex", payload, env={"CODEX_HOME": str(home)}) == 0
    assert commits(store) == before + 1
    session = mm.load_memory(f"codex:{CODEX_THREAD}")
    assert session is not None and len(session.interactions) == 2
    bad = json.dumps({"type": "agent-turn-complete", "thread-id": "no-such-thread"})
    assert gitmem(store, "capture", "codex", bad, env={"CODEX_HOME": str(home)}) == 0
    assert "no rollout file" in (store / ".git" / "gitmem" / "capture.log").read_text()


def test_capture_gemini_cli_rereads_its_rewritten_file(mm: MemoryManager, store: Path) -> None:
    [path] = (FIXTURES / "gemini-cli").glob("*/chats/*.jsonl")
    payload = json.dumps(
        {"session_id": "s", "transcript_path": str(path), "hook_event_name": "AfterAgent"}
    )
    assert gitmem(store, "capture", "gemini-cli", stdin=payload) == 0
    session = mm.load_memory(GEMINI)
    assert session is not None and len(session.interactions) == 2


@pytest.mark.parametrize(
    ("agent", "events"),
    [("claude-code", {"Stop", "SessionEnd"}), ("gemini-cli", {"AfterAgent", "SessionEnd"})],
)
def test_hooks_print_gives_settings_that_run_capture(
    agent: str, events: set[str], tmp_path: Path
) -> None:
    store = tmp_path / "my memory"
    done = CliRunner().invoke(cli, ["--repo", str(store), "hooks", "print", agent])
    assert done.exit_code == 0
    settings = json.loads(done.stdout)
    assert set(settings["hooks"]) == events
    [entry] = settings["hooks"]["Stop" if agent == "claude-code" else "AfterAgent"]
    command = entry["hooks"][0]["command"]
    assert shlex.split(command) == ["gitmem", "--repo", str(store), "capture", agent]


def test_hooks_print_codex_is_a_notify_line(tmp_path: Path) -> None:
    done = CliRunner().invoke(
        cli, ["--repo", str(tmp_path), "hooks", "print", "codex", "--command", "uvx gitmem"]
    )
    assert done.stdout == (
        f'notify = ["uvx", "gitmem", "--repo", "{tmp_path}", "capture", "codex"]\n'
    )


# --- a session Claude Code's own code wrote (tests/fixtures/claude-code/make_fixture.py) ----

REAL = FIXTURES / "claude-code-real"


def test_import_of_a_transcript_claude_code_wrote(mm: MemoryManager, store: Path) -> None:
    found = run(store, "import", "claude-code", str(REAL), "--tools", "full")
    sessions = found["sessions"]
    assert isinstance(sessions, list) and len(sessions) == 1  # the sub-agent's file: no turn
    session = mm.load_memory(sessions[0])
    assert session is not None
    assert [t.messages[0].content for t in session.interactions] == [
        "Which text files are here?",
        "And which are not?",
        "Thanks, that is all.",
    ]
    first = session.interactions[0].messages
    assert [m.speaker for m in first] == ["user", "assistant", "tool", "assistant"]
    assert first[1].content == '[tool: Glob {"pattern": "*.txt"}]'
    assert first[2].content.startswith("[result: Glob]\n") and "notes.txt" in first[2].content
    assert session.project == "shop" and session.extra["model"].startswith("claude-")


def test_capture_with_claude_codes_own_hook_payload_turn_by_turn(
    mm: MemoryManager, store: Path, tmp_path: Path
) -> None:
    [source] = REAL.glob("*/*-*-*-*-*.jsonl")
    lines = source.read_text().splitlines(keepends=True)
    starts = [
        n
        for n, line in enumerate(lines)
        if json.loads(line).get("type") == "user"
        and isinstance(json.loads(line)["message"]["content"], str)
    ]
    transcript = tmp_path / source.name
    hook = json.loads((REAL / "hook-payloads.jsonl").read_text().splitlines()[0])
    payload = json.dumps({**hook, "transcript_path": str(transcript)})
    before = commits(store)
    for count, end in enumerate([*starts[1:], len(lines)], 1):
        transcript.write_text("".join(lines[:end]))
        assert gitmem(store, "capture", "claude-code", stdin=payload) == 0
        assert commits(store) == before + count
        session = mm.load_memory(f"claude-code:{hook['session_id']}")
        assert session is not None and len(session.interactions) == count


# --- a chat Gemini CLI's own code wrote (tests/fixtures/gemini-cli/make_fixture.py) ---------

GEMINI_REAL = FIXTURES / "gemini-cli-real"


def gemini_real_chat() -> Path:
    return max(GEMINI_REAL.glob("tmp/*/chats/session-*.jsonl"), key=lambda p: p.stat().st_size)


def test_import_of_a_chat_gemini_cli_wrote_and_resumed(mm: MemoryManager, store: Path) -> None:
    found = run(store, "import", "gemini-cli", str(GEMINI_REAL), "--tools", "full")
    assert found["turns_added"] == 2
    [session_id] = mm.session_ids()
    session = mm.load_memory(session_id)
    assert session is not None
    for turn in session.interactions:  # the resume wrote the first turn again: still once
        assert [m.speaker for m in turn.messages] == ["user", "assistant", "tool", "assistant"]
        assert turn.messages[1].content == '[tool: glob {"pattern": "*.txt"}]'
    text = "\n".join(t.text for t in session.interactions)
    assert "<session_context>" not in text and session.project == "shop"


def test_capture_with_gemini_clis_own_hook_payload_across_a_resume(
    mm: MemoryManager, store: Path, tmp_path: Path
) -> None:
    lines = gemini_real_chat().read_text().splitlines(keepends=True)
    # where the resumed run began: it names the session again, then writes every message again
    resumed = next(
        n for n, line in enumerate(lines) if "sessionId" in json.loads(line).get("$set", {})
    )
    transcript = tmp_path / gemini_real_chat().name
    hook = json.loads((GEMINI_REAL / "hook-payloads.jsonl").read_text().splitlines()[0])
    payload = json.dumps({**hook, "transcript_path": str(transcript)})
    before = commits(store)
    transcript.write_text("".join(lines[:resumed]))
    assert gitmem(store, "capture", "gemini-cli", stdin=payload) == 0
    transcript.write_text("".join(lines))
    assert gitmem(store, "capture", "gemini-cli", stdin=payload) == 0
    assert commits(store) == before + 2
    session = mm.load_memory(f"gemini-cli:{hook['session_id']}")
    assert session is not None and len(session.interactions) == 2
    again = run(store, "import", "gemini-cli", str(transcript))
    assert again["commit"] is None and not again["conflicts"]


def test_a_gemini_chat_written_again_with_new_times_keeps_its_turns(
    mm: MemoryManager, store: Path, tmp_path: Path
) -> None:
    # what a resume wrote in one run here: every message again, same id, the resume's time
    head = {"sessionId": "s-1", "projectHash": "h", "startTime": "2026-03-14T11:00:00Z"}
    asked = {"id": "m1", "timestamp": "2026-03-14T11:00:01Z", "type": "user", "content": "Hi?"}
    said = {"id": "m2", "timestamp": "2026-03-14T11:00:02Z", "type": "gemini", "content": "Hello."}
    chat = tmp_path / "chats" / "session-2026-03-14T11-00-s-1.jsonl"
    chat.parent.mkdir()
    chat.write_text("".join(json.dumps(r) + "\n" for r in (head, asked, said)))
    run(store, "import", "gemini-cli", str(chat))
    later = [{**m, "timestamp": "2026-03-14T12:00:00Z"} for m in (asked, said)]
    with open(chat, "a") as handle:
        handle.write(json.dumps({"$set": {"messages": later}}) + "\n")
    again = run(store, "import", "gemini-cli", str(chat))
    assert again["commit"] is None and not again["conflicts"]


# --- a thread Codex's own program wrote (tests/fixtures/codex/make_fixture.py) --------------

CODEX_REAL = FIXTURES / "codex-real"


def test_import_of_a_rollout_codex_wrote(mm: MemoryManager, store: Path) -> None:
    found = run(store, "import", "codex", str(CODEX_REAL), "--tools", "full")
    assert found["turns_added"] == 2
    [session_id] = mm.session_ids()
    session = mm.load_memory(session_id)
    assert session is not None
    first, second = session.interactions
    assert [m.speaker for m in first.messages] == ["user", "assistant", "tool", "assistant"]
    assert first.messages[0].content == "Which text files are here?"
    assert first.messages[1].content == '[tool: exec_command {"cmd": "ls *.txt"}]'
    assert "notes.txt" in first.messages[2].content
    assert second.messages[0].content == "And which are not?"
    text = "\n".join(t.text for t in session.interactions)
    assert "environment_context" not in text and "skills_instructions" not in text
    assert session.project == "shop" and session.extra["model"] == "gpt-5.1-codex"


def test_capture_with_codexs_own_notify_payloads_turn_by_turn(
    mm: MemoryManager, store: Path, tmp_path: Path
) -> None:
    [source] = CODEX_REAL.glob("sessions/*/*/*/rollout-*.jsonl")
    lines = source.read_text().splitlines(keepends=True)
    started = [n for n, line in enumerate(lines) if '"type":"task_started"' in line]
    rollout = tmp_path / "home" / source.relative_to(CODEX_REAL)
    rollout.parent.mkdir(parents=True)
    env = {"CODEX_HOME": str(tmp_path / "home")}
    payloads = (CODEX_REAL / "notify-payloads.jsonl").read_text().splitlines()
    before = commits(store)
    for count, (end, payload) in enumerate(zip([started[1], len(lines)], payloads, strict=True), 1):
        rollout.write_text("".join(lines[:end]))
        assert gitmem(store, "capture", "codex", payload, env=env) == 0
        assert commits(store) == before + count
    session = mm.load_memory(f"codex:{json.loads(payloads[0])['thread-id']}")
    assert session is not None and len(session.interactions) == 2
