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
results with ``tools="full"``; thoughts and info/error/warning lines are left out. The project
folder becomes metadata, the model(s) ``extra["model"]``, ``summary`` ``extra["title"]``.
"""

from __future__ import annotations

import json
import os
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
    for message in messages:
        _message(built, message)
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
            records[record["id"]] = record
        elif isinstance(record.get("$set"), dict):
            meta.update(record["$set"])
            if isinstance(record["$set"].get("messages"), list):
                records = {m["id"]: m for m in record["$set"]["messages"] if _has_id(m)}
        elif isinstance(record.get("sessionId"), str):
            meta.update(record)
    return meta, list(records.values())


def _has_id(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("id"), str)


def _from_content(content: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's ``{role, parts}`` as a recorded message."""
    parts = items(content.get("parts"))
    calls = [
        {"name": p["functionCall"].get("name"), "args": p["functionCall"].get("args")}
        for p in parts
        if isinstance(p, dict) and isinstance(p.get("functionCall"), dict)
    ]
    answers = [p for p in parts if isinstance(p, dict) and "functionResponse" in p]
    texts = [p for p in parts if isinstance(p, dict) and "text" in p and not p.get("thought")]
    if content.get("role") == "model":
        return {"type": "gemini", "content": texts, "toolCalls": calls}
    if answers and not texts:
        return {"type": "tool", "result": answers}
    return {"type": "user", "content": texts}


def _message(built: TurnBuilder, message: dict[str, Any]) -> None:
    kind = message.get("type")
    stamp = message.get("timestamp")
    if kind == "user":
        built.user(stamp, _text(message.get("content")))
    elif kind == "gemini":
        calls = items(message.get("toolCalls"))
        lines = [
            tool_line(str(c.get("name") or "tool"), c.get("args"))
            for c in calls
            if isinstance(c, dict)
        ]
        built.reply(stamp, joined(_text(message.get("content")), *lines), message.get("model"))
        for call in calls:
            if isinstance(call, dict):
                built.result(stamp, str(call.get("name") or ""), _result(call.get("result")))
    elif kind == "tool":
        for answer in items(message.get("result")):
            if isinstance(answer, dict):
                response = mapping(answer.get("functionResponse"))
                built.result(stamp, str(response.get("name") or ""), _result([answer]))


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
