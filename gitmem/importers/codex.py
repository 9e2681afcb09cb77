"""OpenAI Codex CLI's rollout files into gitmem.

Read from Codex's own code (``@openai/codex`` 0.171.0 ships its Rust program as a binary; the
format read from its source, ``codex-rs`` protocol and rollout recorder): one JSONL file per
session, ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`` (``CODEX_HOME``
defaults to ``~/.codex``). Each line is ``{timestamp, type, payload}``: ``session_meta``
(``id, cwd, cli_version, git {branch, repository_url}``), ``turn_context`` (``model, cwd``),
``response_item`` (``message {role, content: [input_text | output_text | input_image]}``,
``function_call {name, arguments, call_id}``, ``custom_tool_call {name, input}``,
``local_shell_call {action}``, ``*_output {call_id, output}``, ``reasoning``) and ``event_msg``
(UI events; ``thread_name_updated {thread_name}`` names the thread). Early files hold the
response items without the wrapper.

Mapping: the session id is ``codex:<thread id>``; user messages open turns except the context
Codex injects as user messages (``<environment_context>``, ``# AGENTS.md instructions``,
``<user_instructions>``, ``<user_shell_command>``, ``<turn_aborted>``, ...); developer and
system messages and reasoning are left out; tool calls and (``tools="full"``) outputs as the
nanobot importer writes them; cwd, branch and repository as metadata, the model(s) in
``extra["model"]``, the thread name in ``extra["title"]``. Checked against a thread Codex
0.171.0 wrote itself (``tests/fixtures/codex-real``); records this reader does not know
(``world_state``, ``token_usage_record``, other events) are skipped.
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

from gitmem.importers.hookinput import codex_home
from gitmem.importers.transcripts import (
    Tools,
    TurnBuilder,
    items,
    joined,
    mapping,
    mtime,
    text_of,
    tool_line,
)

PATTERNS = ("**/rollout-*.jsonl",)
_CONTEXT = re.compile(
    r"^\s*(<environment_context>|# AGENTS\.md instructions|<user_instructions>|<skill>|"
    r"<user_shell_command>|<turn_aborted>|<subagent_notification>)",
    re.IGNORECASE,
)
_THREAD = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")


def default_root() -> Path:
    """Where Codex keeps its rollout files."""
    return codex_home() / "sessions"


def read(path: Path, tools: Tools = "summary", start: int = 0) -> TurnBuilder | None:
    """One rollout file from byte ``start``; lines that are not JSON are skipped."""
    match = _THREAD.search(path.stem)
    thread = match.group(1) if match else path.stem
    built = TurnBuilder(key=f"codex:{thread}", prefix="cx", tag="codex", tools=tools)
    built.fallback = mtime(path)
    state: dict[str, Any] = {"names": {}, "model": None}
    with open(path, "rb") as handle:
        handle.seek(start)
        offset = start
        for raw in handle:
            at, offset = offset, offset + len(raw)
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if isinstance(record, dict):
                _record(built, record, at, state)
    return built


def _record(built: TurnBuilder, record: dict[str, Any], at: int, state: dict[str, Any]) -> None:
    kind = record.get("type")
    payload = record.get("payload")
    stamp = record.get("timestamp")
    if not isinstance(payload, dict):  # an early file: the items themselves
        payload, kind = record, "response_item"
    if kind == "session_meta":
        _meta(built, payload)
    elif kind == "turn_context":
        built.where(payload.get("cwd"))
        if isinstance(payload.get("model"), str):
            state["model"] = payload["model"]
    elif kind == "event_msg":
        if payload.get("type") == "thread_name_updated" and payload.get("thread_name"):
            built.extra["title"] = str(payload["thread_name"])
    elif kind == "response_item":
        _item(built, payload, stamp, at, state)


def _meta(built: TurnBuilder, payload: dict[str, Any]) -> None:
    if isinstance(payload.get("id"), str) and payload["id"]:
        built.key = f"codex:{payload['id']}"
    built.where(payload.get("cwd"))
    git = mapping(payload.get("git"))
    for name, key in (("branch", "git-branch"), ("repository_url", "repository")):
        if isinstance(git.get(name), str) and git[name]:
            built.extra[key] = git[name]


def _item(
    built: TurnBuilder, item: dict[str, Any], stamp: object, at: int, state: dict[str, Any]
) -> None:
    kind = item.get("type")
    names: dict[str, str] = state["names"]
    if kind == "message":
        role = item.get("role")
        blocks = items(item.get("content"))
        texts = [
            "[image]" if b.get("type") == "input_image" else text_of(b)
            for b in blocks
            if isinstance(b, dict)
        ]
        if role == "user":
            kept = [t for t in texts if not _CONTEXT.match(t)]
            built.user(stamp, joined(*kept), at)
        elif role == "assistant":
            built.reply(stamp, joined(*texts), state["model"])
    elif kind in ("function_call", "custom_tool_call"):
        name = str(item.get("name") or "tool")
        names[str(item.get("call_id"))] = name
        args = item.get("arguments") if kind == "function_call" else item.get("input")
        built.reply(stamp, tool_line(name, args), state["model"])
    elif kind == "local_shell_call":
        names[str(item.get("call_id"))] = "shell"
        built.reply(stamp, tool_line("shell", item.get("action")), state["model"])
    elif kind in ("function_call_output", "custom_tool_call_output"):
        output = item.get("output")
        if isinstance(output, str):
            # older files keep {"output": ..., "metadata": ...} as a JSON string
            with contextlib.suppress(ValueError):
                output = json.loads(output)
        built.result(
            stamp,
            names.get(str(item.get("call_id")), ""),
            text_of(output) or (output if isinstance(output, str) else ""),
        )
