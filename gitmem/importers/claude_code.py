"""Claude Code's session transcripts into gitmem.

Read from Claude Code's own code (``@anthropic-ai/claude-code`` 2.0.77, its ``cli.js``; 2.1.x
ships the same program as a native binary): one JSONL file per session in
``~/.claude/projects/<project folder>/<session id>.jsonl`` (``$CLAUDE_CONFIG_DIR/projects``
when set). Each line is a record ``{type, uuid, parentUuid, isSidechain, isMeta?, cwd,
gitBranch, sessionId, version, timestamp, message}``: ``type`` ``user`` (``message.content`` a
string, or blocks ``text``/``image``/``tool_result {tool_use_id, content, is_error}``) or
``assistant`` (``message {model, content: [text | thinking | redacted_thinking | tool_use
{id, name, input}]}``, one line per block of a streamed reply). ``summary {summary,
leafUuid}`` and ``custom-title {customTitle}`` lines name the session; ``system``,
``file-history-snapshot`` and ``queue-operation`` lines are Claude Code's own.

Mapping: the session id is ``claude-code:<sessionId>``; a user's text opens a turn, the
replies and ``[tool: name {input}]`` lines join it; tool results come with ``tools="full"``;
thinking, sub-agent (sidechain) lines, meta lines (caveats, command output) and compaction
summaries are left out. ``cwd`` and ``gitBranch`` become metadata (the folder's name the
project), the model(s) ``extra["model"]``, the title ``extra["title"]``. Checked against a
session Claude Code 2.0.77 wrote itself (``tests/fixtures/claude-code-real``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gitmem.importers.transcripts import (
    Tools,
    TurnBuilder,
    joined,
    mtime,
    text_of,
    tool_line,
)

PATTERNS = ("*/*.jsonl", "*.jsonl")


def default_root() -> Path:
    """Where Claude Code keeps its projects' transcripts."""
    home = os.environ.get("CLAUDE_CONFIG_DIR") or "~/.claude"
    return Path(home).expanduser() / "projects"


def read(path: Path, tools: Tools = "summary", start: int = 0) -> TurnBuilder | None:
    """One transcript from byte ``start`` (a line start); None when it is no transcript.
    A line that is not JSON (a write cut short) is skipped: Claude Code is still writing."""
    built = TurnBuilder(key=f"claude-code:{path.stem}", prefix="cc", tag="claude-code", tools=tools)
    built.fallback = mtime(path)
    names: dict[str, str] = {}  # tool_use id -> tool name
    titles: dict[str, str] = {}
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
                _record(built, record, at, names, titles)
    title = titles.get("custom-title") or titles.get("summary")
    if title:
        built.extra["title"] = title
    return built


def _record(
    built: TurnBuilder,
    record: dict[str, Any],
    at: int,
    names: dict[str, str],
    titles: dict[str, str],
) -> None:
    kind = record.get("type")
    if kind == "summary" and isinstance(record.get("summary"), str):
        titles["summary"] = record["summary"]
        return
    if kind == "custom-title" and isinstance(record.get("customTitle"), str):
        titles["custom-title"] = record["customTitle"]
        return
    skip = record.get("isSidechain") or record.get("isMeta") or record.get("isCompactSummary")
    message = record.get("message")
    if kind not in ("user", "assistant") or skip or not isinstance(message, dict):
        return
    if isinstance(record.get("sessionId"), str) and record["sessionId"]:
        built.key = f"claude-code:{record['sessionId']}"
    built.where(record.get("cwd"))
    if isinstance(record.get("gitBranch"), str) and record["gitBranch"]:
        built.extra.setdefault("git-branch", record["gitBranch"])
    stamp = record.get("timestamp")
    if kind == "assistant":
        built.reply(stamp, _assistant_text(message.get("content"), names), message.get("model"))
    else:
        _user(built, message.get("content"), stamp, at, names)


def _user(
    built: TurnBuilder, content: object, stamp: object, at: int, names: dict[str, str]
) -> None:
    if isinstance(content, str):
        if not content.lstrip().startswith("<local-command-"):
            built.user(stamp, content, at)
        return
    words: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result":
            name = names.get(str(block.get("tool_use_id")), "")
            built.result(stamp, name, text_of(block.get("content")))
        elif block.get("type") == "text":
            words.append(str(block.get("text") or ""))
        elif block.get("type") == "image":
            words.append("[image]")
    built.user(stamp, joined(*words), at)


def _assistant_text(content: object, names: dict[str, str]) -> str:
    if isinstance(content, str):
        return content
    lines: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            lines.append(str(block.get("text") or ""))
        elif block.get("type") == "tool_use":
            name = str(block.get("name") or "tool")
            names[str(block.get("id"))] = name
            lines.append(tool_line(name, block.get("input")))
    return joined(*lines)
