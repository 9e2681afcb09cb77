"""Gemini CLI's chat recordings and checkpoints into gitmem.

Read from Gemini CLI's own code (``@google/gemini-cli`` 0.61.0, its bundled
``chatRecordingService`` and ``sessionOperations``): each project has a folder
``~/.gemini/tmp/<project id>/`` (``.project_root`` in it names the project's folder) with
``chats/session-<time>-<short id>.jsonl``: a metadata line ``{sessionId, projectHash,
startTime, lastUpdated, kind, directories?}``, message records ``{id, timestamp, type: user |
gemini | info | error | warning, content: string | Part[], thoughts?, model?, toolCalls?:
[{id, name, args, result: Part[], status}]}`` (a record written again with the same id
replaces the first), ``{"$set": {...}}`` metadata updates (``summary`` names the session) and
``{"$rewindTo": id}`` (drops that message and all after it). Older versions wrote the same
conversation as one JSON object (``session-*.json``). ``/chat save <tag>`` writes
``checkpoint-<tag>.json``: the model's history, a list of ``{role: user | model, parts}``.

Mapping: ``gemini-cli:<sessionId>`` (a checkpoint: ``gemini-cli:checkpoint-<tag>``); user
messages open turns, ``gemini`` messages and ``[tool: name {args}]`` lines join them, tool
results with ``tools="full"``; thoughts, info/error/warning lines, the
``<session_context>`` it sends first and slash commands are left out (as Gemini CLI leaves them
out when it resumes a chat). A resumed chat is written again (its messages as ``Part[]``
with ``functionCall``/``functionResponse`` parts, sometimes stamped with the resume's time):
a turn's id hashes Gemini's message id and keeps the time first written, and a tool call or
result written twice counts once. Checked against chats Gemini CLI 0.61.0 wrote itself
(``tests/fixtures/gemini-cli-real``). The project
folder becomes metadata, the model(s) ``extra["model"]``, ``summary`` ``extra["title"]``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

# user messages Gemini CLI itself leaves out when it resumes a chat (isIgnoredUserContent):
# the context it sends first, hook context, slash and ? commands
_NOT_SAID = ("<session_context>", "<hook_context>", "/", "?")
PATTERNS = ("**/chats/session-*.json", "**/chats/session-*.jsonl", "**/checkpoint-*.json")


def default_root() -> Path:
    """Where Gemini CLI keeps its projects' chats."""
    home = os.environ.get("GEMINI_CLI_HOME") or "~"
    return Path(home).expanduser() / ".gemini" / "tmp"


def read(path: Path, tools: Tools = "summary", start: int = 0) -> TurnBuilder | None:
    """One chat recording or checkpoint (always read whole: records are rewritten in place
    by id); None when the file holds neither."""
    built = TurnBuilder(key=f"gemini-cli:{path.stem}", prefix="gm", tag="gemini-cli", tools=tools)
    built.fallback = mtime(path)
    for folder in (path.parent, path.parent.parent):
        root = folder / ".project_root"
        if root.is_file():
            built.where(root.read_text(encoding="utf-8", errors="replace").strip())
            break
    meta, messages = _load(path)
    if meta is None and messages is None:
        return None
    if messages is None:
        return built
    if isinstance(meta, dict) and meta.get("sessionId"):
        built.key = f"gemini-cli:{meta['sessionId']}"
        if isinstance(meta.get("summary"), str) and meta["summary"]:
            built.extra["title"] = meta["summary"]
    elif path.stem.startswith("checkpoint-"):
        built.key = f"gemini-cli:{path.stem}"
    seen = _Seen()
    for message in messages:
        _message(built, message, seen)
    return built


def _load(path: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
    """The metadata and the messages, in order, as Gemini CLI would load them."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".json":
        try:
            whole = json.loads(text)
        except ValueError:
            return None, None
        if isinstance(whole, list):  # a checkpoint: Content[]
            return {}, [_from_content(c) for c in whole if isinstance(c, dict)]
        if isinstance(whole, dict) and isinstance(whole.get("messages"), list):
            return whole, [m for m in whole["messages"] if isinstance(m, dict)]
        return None, None
    return _replay(text.splitlines())


def _replay(lines: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A JSONL recording's records applied in order: the last write of an id wins."""
    meta: dict[str, Any] = {}
    records: dict[str, dict[str, Any]] = {}
    first: dict[str, object] = {}  # id -> when it was first written
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if isinstance(record.get("$rewindTo"), str):
            ids = list(records)
            cut = ids.index(record["$rewindTo"]) if record["$rewindTo"] in ids else 0
            for gone in ids[cut:]:
                del records[gone]
        elif isinstance(record.get("id"), str):
            records[record["id"]] = _first_time(record, first)
        elif isinstance(record.get("$set"), dict):
            meta.update(record["$set"])
            if isinstance(record["$set"].get("messages"), list):
                given = [m for m in record["$set"]["messages"] if _has_id(m)]
                records = {m["id"]: _first_time(m, first) for m in given}
        elif isinstance(record.get("sessionId"), str):
            meta.update(record)
    return meta, list(records.values())


def _first_time(record: dict[str, Any], first: dict[str, object]) -> dict[str, Any]:
    """``record`` with the time its id was first written: resuming a chat writes every
    message again, stamped with the time of the resume."""
    when = first.setdefault(record["id"], record.get("timestamp"))
    return record if when == record.get("timestamp") else {**record, "timestamp": when}


def _has_id(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("id"), str)


def _from_content(content: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's ``{role, parts}`` as a recorded message."""
    kind = "gemini" if content.get("role") == "model" else "user"
    return {"type": kind, "content": items(content.get("parts"))}


@dataclass
class _Seen:
    """Tool calls and results already written: a resumed chat records them twice (as
    ``toolCalls`` and again as ``functionCall``/``functionResponse`` parts)."""

    calls: set[str] = field(default_factory=set)
    results: set[str] = field(default_factory=set)


def _message(built: TurnBuilder, message: dict[str, Any], seen: _Seen) -> None:
    kind = message.get("type")
    stamp = message.get("timestamp")
    parts = [p for p in items(message.get("content")) if isinstance(p, dict)]
    if kind == "user":
        text = _text(message.get("content"))
        if not text.lstrip().startswith(_NOT_SAID):
            built.user(stamp, text, ident=str(message.get("id") or ""))
    elif kind == "gemini":
        calls = [c for c in items(message.get("toolCalls")) if isinstance(c, dict)]
        calls += [mapping(p.get("functionCall")) for p in parts if "functionCall" in p]
        lines = []
        for call in calls:
            ident = str(call.get("id") or len(seen.calls))
            if ident not in seen.calls:
                seen.calls.add(ident)
                lines.append(tool_line(str(call.get("name") or "tool"), call.get("args")))
        built.reply(stamp, joined(_text(message.get("content")), *lines), message.get("model"))
        for call in calls:
            _results(built, stamp, items(call.get("result")), seen)
    _results(built, stamp, [p for p in parts if "functionResponse" in p], seen)


def _results(built: TurnBuilder, stamp: object, parts: list[Any], seen: _Seen) -> None:
    for part in parts:
        response = mapping(part.get("functionResponse")) if isinstance(part, dict) else {}
        ident = str(response.get("id") or "")
        if response and (not ident or ident not in seen.results):
            seen.results.add(ident)
            built.result(stamp, str(response.get("name") or ""), _result([part]))


def _text(content: object) -> str:
    if isinstance(content, list):
        return "".join(
            str(p.get("text") or "")
            if isinstance(p, dict) and not p.get("thought")
            else (p if isinstance(p, str) else "")
            for p in content
        )
    return text_of(content)


def _result(parts: object) -> str:
    out: list[str] = []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        response = part.get("functionResponse")
        if isinstance(response, dict):
            body = response.get("response")
            if isinstance(body, dict) and set(body) <= {"output", "error"}:
                out.append(text_of(body.get("output") or body.get("error") or ""))
            else:
                out.append(json.dumps(body, ensure_ascii=False))
        elif isinstance(part.get("text"), str):
            out.append(part["text"])
    return joined(*out)
