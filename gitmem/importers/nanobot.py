"""nanobot's memory into gitmem: sessions, summaries, MEMORY.md versions, history.

nanobot (the ``nanobot-ai`` package) keeps, read from its own code (0.1.4.post6, 0.3.5):

- **sessions** as JSONL, one file per session key: a ``{"_type": "metadata", "key",
  "created_at", "updated_at", "metadata": {"_last_summary": {text, last_active}, ...},
  "last_archived"}`` line, then messages ``{role, content, timestamp, tool_calls |
  tool_call_id + name, media?, _hidden_history?, _command?, ...}``; a ``provider_state``
  record is private. Where: ≤ 0.2.x ``<workspace>/sessions/<channel>_<chat>.jsonl``; 0.3.0
  names the file base64url(key) there; 0.3.5 keeps them outside the workspace in
  ``<nanobot home>/sessions/<workspace id>/`` (the id in ``<workspace>/.nanobot/workspace-id``,
  the workspace's path in ``.workspace`` beside the files). Timestamps are naive local time.
- **curated memory** ``memory/MEMORY.md``, ``USER.md``, ``SOUL.md``, rewritten by its
  consolidator and "Dream"; 0.3.x commits them to a git repository in the workspace
  (dulwich: ``init: ...``, ``dream: ...``).
- **history** ``memory/history.jsonl`` (``{cursor, timestamp: "YYYY-MM-DD HH:MM", content,
  session_key}``), ≤ 0.2.x ``memory/HISTORY.md`` (entries that start ``[YYYY-MM-DD ...]``).

Mapping: a session key becomes the session id (verbatim when storable), its channel a tag; a
turn is a visible user message plus the assistant (and tool) messages up to the next user
message (hidden-history, automation and command messages are skipped; assistant messages
before the first user message are a turn of their own); ``_last_summary`` becomes the
session's summary (model ``nanobot-consolidator``, its ``- [mark] fact`` lines the key facts).
The memory files become the session ``nanobot:memory``, one interaction per git commit that
touched them (author and time kept) or, without git, one per distinct version seen; history
entries become ``nanobot:history``. Interaction ids hash the key, the first timestamp and the
content, never a position (nanobot compacts its files), so importing again adds only what is
new and keeps what nanobot has since dropped (``/new`` empties a session; Dream rewrites
MEMORY.md).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any, Literal

from gitmem.errors import ValidationError
from gitmem.importers.digests import SourceDigests
from gitmem.importers.engine import (
    PART_SIZE,
    ImportFormatError,
    ImportResult,
    Meter,
    json_object,
    run_import,
    safe_session_id,
    source_file_problem,
    stable_id,
    time_zone,
)
from gitmem.importers.nanobot_memory import (
    HISTORY_FILES,
    HISTORY_SESSION,
    MEMORY_FILES,
    MEMORY_SESSION,
    Clock,
    history_session,
    memory_session,
)
from gitmem.manager import MemoryManager
from gitmem.models import Interaction, Message, Session, Summary, as_aware, built

Tools = Literal["summary", "full"]


SUMMARY_MODEL = "nanobot-consolidator"

# markers nanobot puts on messages that are not chat turns (history_visibility.py,
# automation_turns.py, cron/session_turns.py, agent/loop.py)
_HIDDEN_MARKS = ("_hidden_history", "_automation_turn", "_cron_turn")

# a key fact line of nanobot's consolidator: "- [permanent] User is Alice"
_FACT_LINE = re.compile(r"^\s*[-*]\s*(?:\[[^\]\n]{1,40}\]\s*)?(.+?)\s*$")


@dataclass
class Layout:
    """What a path holds: workspaces (memory files) and session files, and which nanobot
    layout they are (for ``Gitmem-Source``)."""

    workspaces: list[Path] = field(default_factory=list)
    session_files: list[Path] = field(default_factory=list)
    layouts: set[str] = field(default_factory=set)
    skipped: list[str] = field(default_factory=list)  # files left out, and why

    @property
    def source(self) -> str:
        return "nanobot " + (", ".join(sorted(self.layouts)) or "(empty)")


def find_layout(path: str | os.PathLike[str]) -> Layout:
    """Every workspace and session file under ``path``: a workspace (any layout) or a
    nanobot home (``~/.nanobot``, holding ``sessions/<workspace id>/`` and ``workspace/``)."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise ValidationError(f"{root}: not a folder (give a nanobot workspace or home)")
    found = Layout()
    if (root / "sessions").is_dir() and not _is_workspace(root):
        _add_home(root, found)
    else:
        _add_workspace(root, found)
    if not found.workspaces and not found.session_files:
        raise ValidationError(
            f"{root}: no nanobot workspace or sessions found (expected "
            "memory/MEMORY.md, sessions/*.jsonl or sessions/<id>/*.jsonl)"
        )
    for workspace in found.workspaces:
        for name in (*MEMORY_FILES, *HISTORY_FILES):
            path = workspace / name
            if path.is_symlink() or path.exists():
                problem = source_file_problem(path, workspace)
                found.skipped += [problem] if problem else []
    kept: list[Path] = []
    for file in sorted(dict.fromkeys(found.session_files)):
        problem = source_file_problem(file, root)
        if problem is None:
            kept.append(file)
        else:
            found.skipped.append(problem)
    found.session_files = kept
    return found


def _is_workspace(folder: Path) -> bool:
    return (folder / ".nanobot" / "workspace-id").is_file() or (folder / "memory").is_dir()


def _add_workspace(workspace: Path, found: Layout) -> None:
    if _is_workspace(workspace) or any((workspace / n).is_file() for n in MEMORY_FILES):
        found.workspaces.append(workspace)
    legacy = sorted((workspace / "sessions").glob("*.jsonl"))
    if legacy:
        found.session_files += legacy
        found.layouts.add("0.3.0" if all(_base64_key(p.stem) for p in legacy) else "<=0.2")
    ws_id = _workspace_id(workspace)
    if ws_id is None:
        return
    # 0.3.5: <home>/sessions/<id>/, home being where config.json is (~/.nanobot by default)
    homes = [workspace.parent, Path(os.environ.get("NANOBOT_HOME", "~/.nanobot")).expanduser()]
    for home in homes:
        folder = home / "sessions" / ws_id
        if folder.is_dir():
            found.session_files += sorted(folder.glob("*.jsonl"))
            found.layouts.add(">=0.3.5")
            return


def _add_home(home: Path, found: Layout) -> None:
    for folder in sorted(p for p in (home / "sessions").iterdir() if p.is_dir()):
        files = sorted(folder.glob("*.jsonl"))
        if files:
            found.session_files += files
            found.layouts.add(">=0.3.5")
        for workspace in (_recorded_workspace(folder), home / "workspace"):
            if workspace is not None and _workspace_id(workspace) == folder.name:
                if workspace not in found.workspaces:
                    found.workspaces.append(workspace)
                break
    legacy = sorted((home / "sessions").glob("*.jsonl"))  # a workspace named like a home
    found.session_files += legacy
    if (home / "workspace").is_dir() and not found.workspaces:
        _add_workspace(home / "workspace", found)


def _recorded_workspace(folder: Path) -> Path | None:
    try:
        text = (folder / ".workspace").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return Path(text) if text else None


def _workspace_id(workspace: Path) -> str | None:
    try:
        text = (workspace / ".nanobot" / "workspace-id").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text if text and "/" not in text and text not in (".", "..") else None


def _base64_key(stem: str) -> str | None:
    try:
        key = base64.urlsafe_b64decode(stem + "=" * (-len(stem) % 4)).decode("utf-8")
    except ValueError:
        return None
    return key if base64.urlsafe_b64encode(key.encode()).decode().rstrip("=") == stem else None


def watched_paths(path: str | os.PathLike[str]) -> list[Path]:
    """The folders and files an import of ``path`` reads (for ``--watch``)."""
    layout = find_layout(path)
    out = {p.parent for p in layout.session_files}
    for workspace in layout.workspaces:
        out.update(
            workspace / name
            for name in (*MEMORY_FILES, "memory/history.jsonl", "memory/HISTORY.md")
        )
        out.add(workspace / "sessions")
    return sorted(out)


# --- sessions --------------------------------------------------------------------------


@dataclass
class _Turn:
    first_time: str
    when: datetime
    messages: list[Message]
    end: int = 0  # how many of the file's messages (hidden ones too) precede its end


def read_session(
    path: Path, *, tz: tzinfo | None = None, tools: Tools = "summary", meter: Meter | None = None
) -> Session | None:
    """One nanobot session file as a gitmem session (None when it holds no turn and no
    summary). Read line by line; a malformed line raises ImportFormatError naming it."""
    clock = Clock(tz)
    head: dict[str, Any] = {}
    turns: list[_Turn] = []
    speakers: dict[str, None] = {}
    meter_at = 0
    position = 0  # messages seen, as nanobot counts them for its archive boundary
    name = str(path)
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if meter is not None and not number % 4096:
                meter.done += handle.tell() - meter_at
                meter_at = handle.tell()
            if not raw.strip():
                continue
            record = json_object(raw, f"{name}:{number}")
            kind = record.get("_type")
            if kind == "metadata":
                head = record
                continue
            if kind is not None:
                continue  # provider_state and other private records
            position += 1
            if not _MARK_KEYS.isdisjoint(record) and _hidden(record):
                continue
            messages = _messages(record, tools, f"{name}:{number}")
            if not messages:
                continue
            if not turns or record.get("role") == "user":
                stamp = record.get("timestamp") or head.get("updated_at") or ""
                turns.append(_Turn(str(stamp), clock(stamp, f"{name}:{number}"), []))
            turn = turns[-1]
            turn.messages += messages
            turn.end = position
            for message in messages:
                speakers.setdefault(message.speaker)
        if meter is not None:
            meter.done += handle.tell() - meter_at
    key = head.get("key") if isinstance(head.get("key"), str) else None
    key = key or _key_from_name(path.stem)
    return _session(key, head, turns, list(speakers), clock, f"{path}:1")


_MARK_KEYS = frozenset(("_command", *_HIDDEN_MARKS))


def _hidden(record: dict[str, Any]) -> bool:
    marks = [record.get(mark) for mark in _HIDDEN_MARKS]
    return bool(record.get("_command")) or any(m is True or isinstance(m, dict) for m in marks)


def _key_from_name(stem: str) -> str:
    decoded = _base64_key(stem)
    if decoded is not None:
        return decoded
    channel, sep, chat = stem.partition("_")  # ≤ 0.2.x: <channel>_<chat>
    return f"{channel}:{chat}" if sep else stem


def _messages(record: dict[str, Any], tools: Tools, where: str) -> list[Message]:
    role = record.get("role")
    if not isinstance(role, str) or not role:
        raise ImportFormatError(where, "message has no 'role'")
    text = _content(record.get("content"), where)
    media = record.get("media")
    if role == "user" and isinstance(media, list):
        crumbs = [f"[image: {p}]" for p in media if isinstance(p, str) and p]
        text = "\n".join([t for t in (text, *crumbs) if t])
    if role == "tool":
        if tools != "full" or not text:
            return []
        name = record.get("name")
        label = f"[result: {name}]\n" if isinstance(name, str) and name else ""
        return [_message("tool", label + text)]
    if role == "assistant":
        calls = [_tool_line(call, where) for call in record.get("tool_calls") or []]
        text = "\n".join([t for t in (text, *calls) if t])
    if not text.strip():
        return []
    return [_message(role if role in ("user", "assistant", "system") else "user", text)]


def _message(speaker: str, content: str) -> Message:
    # trusted: the speaker is one of four fixed names and any text is a valid content
    return built(Message, {"speaker": speaker, "content": content})


def _content(value: object, where: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise ImportFormatError(where, f"'content' is {type(value).__name__}, not text")
    parts: list[str] = []
    for block in value:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            parts.append(_block_text(block))
    return "\n".join(p for p in parts if p)


def _block_text(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if kind in ("text", "input_text", "output_text"):
        return str(block.get("text") or "")
    if kind in ("image_url", "image", "input_image"):
        meta: dict[str, Any] = block["_meta"] if isinstance(block.get("_meta"), dict) else {}
        url = block.get("image_url")
        url = url.get("url") if isinstance(url, dict) else url
        path = meta.get("path") or (
            url if isinstance(url, str) and not url.startswith("data:") else ""
        )
        return f"[image: {path}]" if path else "[image]"
    return f"[{kind}]" if isinstance(kind, str) and kind else ""


def _tool_line(call: object, where: str) -> str:
    if not isinstance(call, dict):
        raise ImportFormatError(where, "a 'tool_calls' entry is not an object")
    function: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else call
    name = str(function.get("name") or "tool")
    args = function.get("arguments")
    if isinstance(args, str):
        # not JSON: kept as nanobot stored it, on one line below
        with contextlib.suppress(json.JSONDecodeError):
            args = json.loads(args) if args.strip() else {}
    shown = json.dumps(args, ensure_ascii=False, separators=(", ", ": ")) if args else "{}"
    return f"[tool: {name} {shown}]"


def _session(
    key: str,
    head: dict[str, Any],
    turns: list[_Turn],
    speakers: list[str],
    clock: Clock,
    where: str,
) -> Session | None:
    meta: dict[str, Any] = head["metadata"] if isinstance(head.get("metadata"), dict) else {}
    summary = _summary(meta.get("_last_summary"), clock, where)
    if not turns and summary is None:
        return None
    interactions: list[Interaction] = []
    seen: set[str] = set()
    for turn in turns:
        parts = [key, turn.first_time, turn.messages[0].content]
        iid = stable_id("nb", *parts)
        while iid in seen:  # the same words at the same time: count them
            parts.append("again")
            iid = stable_id("nb", *parts)
        seen.add(iid)
        # trusted: the id is a hash (a valid id), the messages were built valid
        turn_fields = {"id": iid, "timestamp": as_aware(turn.when), "messages": turn.messages}
        interactions.append(built(Interaction, turn_fields))
    times = [t.when for t in turns]
    created = (
        clock(head["created_at"], where) if head.get("created_at") else min(times, default=None)
    )
    updated = (
        clock(head["updated_at"], where) if head.get("updated_at") else max(times, default=None)
    )
    if created is None or updated is None:
        created = updated = summary.generated if summary else datetime.now().astimezone()
    channel = key.split(":", 1)[0] if ":" in key else ""
    tags = ["nanobot"] + ([channel] if channel and _tag_ok(channel) else [])
    archived = head.get("last_archived", head.get("last_consolidated"))
    if summary is not None and isinstance(archived, int) and archived > 0:
        covered = [i.id for t, i in zip(turns, interactions, strict=True) if t.end <= archived]
        summary = summary.model_copy(update={"covers": covered})
    session_id = safe_session_id(key)
    extra = {"nanobot-key": key} if session_id != key and key.isprintable() else {}
    return Session(
        id=session_id,
        created=min(created, updated),
        last_active=max(created, updated),
        participants=speakers,
        tags=tags,
        extra=extra,
        interactions=interactions,
        summary=summary,
    )


def _tag_ok(tag: str) -> bool:
    return tag.isprintable() and len(tag) <= 40 and not any(c in tag for c in "*`\\[]<>|, ")


def _summary(value: object, clock: Clock, where: str) -> Summary | None:
    if not isinstance(value, dict) or not str(value.get("text") or "").strip():
        return None
    text = str(value["text"]).strip()
    generated = clock(value.get("last_active"), where) if value.get("last_active") else None
    facts = [m[1] for line in text.splitlines() if (m := _FACT_LINE.match(line))]
    return Summary(
        text=text,
        generated=generated or datetime.now().astimezone(),
        model=SUMMARY_MODEL,
        facts=facts,
    )


# --- the import -------------------------------------------------------------------------


def read_all(
    layout: Layout,
    *,
    tz: tzinfo | None = None,
    tools: Tools = "summary",
    keys: Collection[str] | None = None,
    meter: Meter | None = None,
    digests: SourceDigests | None = None,
) -> Iterator[Session]:
    """Every session ``layout`` holds, read lazily (one file at a time); with ``digests``,
    a session file merged before and unchanged since is not read."""
    for path in layout.session_files:
        if keys is not None and _file_key(path) not in keys:
            continue
        if digests is not None and digests.unchanged(path):
            if meter is not None:
                meter.done += path.stat().st_size
            continue
        session = read_session(path, tz=tz, tools=tools, meter=meter)
        if session is not None:
            yield session
    if keys is not None:
        return
    for at, workspace in enumerate(layout.workspaces):
        suffix = f":{workspace.name}" if at else ""
        for found in (
            memory_session(workspace, MEMORY_SESSION + suffix, tz),
            history_session(workspace, HISTORY_SESSION + suffix, tz, meter),
        ):
            if found is not None:
                yield found


def _file_key(path: Path) -> str:
    with open(path, "rb") as handle:
        first = handle.readline(1 << 20)
    try:
        record = json.loads(first)
    except ValueError:
        record = None
    if isinstance(record, dict) and isinstance(record.get("key"), str):
        return str(record["key"])
    return _key_from_name(path.stem)


def import_nanobot(
    mm: MemoryManager,
    path: str | os.PathLike[str],
    *,
    tz: str | None = None,
    tools: Tools = "summary",
    keys: Collection[str] | None = None,
    dry_run: bool = False,
    meter: Meter | None = None,
    progress: Callable[[ImportResult], None] | None = None,
    part_size: int = PART_SIZE,
) -> ImportResult:
    """Import a nanobot workspace or home into ``mm`` as one commit (see the module text;
    a huge one goes in parts, see :func:`~gitmem.importers.engine.run_import`).

    ``keys`` limits it to those session keys (live capture imports one session at a time);
    ``tz`` names the zone of nanobot's naive timestamps (default: this machine's).
    """
    if tools not in ("summary", "full"):
        raise ValidationError(f"--tools {tools!r}: use 'summary' or 'full'")
    layout = find_layout(path)
    size = sum(p.stat().st_size for p in layout.session_files)
    if meter is not None:
        meter.total = size
    where = time_zone(tz)
    digests = SourceDigests(mm, f"nanobot-{tools}")

    def sessions() -> Iterator[Session]:
        if meter is not None:
            meter.done = 0  # a huge import reads the files again
        return read_all(layout, tz=where, tools=tools, keys=keys, meter=meter, digests=digests)

    result = run_import(
        mm,
        sessions(),
        source=layout.source,
        dry_run=dry_run,
        progress=progress,
        reread=sessions,
        size=size,
        part_size=part_size,
        warnings=layout.skipped,
        subject=f"Import nanobot memory from {Path(path).expanduser().name}",
    )
    if not dry_run and not result.differing:  # a conflict is reported again next time
        digests.record(result.commit or mm.repository.head())
    result.unchanged_files = digests.skipped
    return result
