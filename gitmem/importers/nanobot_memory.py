"""nanobot's curated memory and history files as gitmem sessions (see ``nanobot.py``).

``memory/MEMORY.md``, ``USER.md`` and ``SOUL.md`` become one session with an interaction per
commit of nanobot's own git repository that touched them (read through the store's
read-only :mod:`gitmem.store.foreign`), or per distinct version seen without git;
``memory/history.jsonl`` (≤ 0.2.x: ``HISTORY.md``, split as nanobot's migration splits it)
becomes another, an interaction per entry.
"""

from __future__ import annotations

import re
from datetime import datetime, tzinfo
from pathlib import Path

from gitmem.importers.engine import (
    ImportFormatError,
    Meter,
    json_object,
    numbered_lines,
    source_file_problem,
    stable_id,
)
from gitmem.models import Interaction, Message, Session
from gitmem.store.foreign import file_versions, is_repository

MEMORY_FILES = ("memory/MEMORY.md", "USER.md", "SOUL.md")
HISTORY_FILES = ("memory/history.jsonl", "memory/HISTORY.md")


def readable(workspace: Path, name: str) -> bool:
    """``workspace/name`` is a file an import may read (see ``source_file_problem``)."""
    path = workspace / name
    return path.is_file() and source_file_problem(path, workspace) is None


MEMORY_SESSION = "nanobot:memory"

HISTORY_SESSION = "nanobot:history"

# HISTORY.md (≤ 0.2.x): an entry starts "[2026-01-05 09:14] ..."; a "[RAW]" entry holds
# "[2026-01-05T09:20] USER: ..." lines that belong to it (nanobot's own split rules)
_ENTRY_START = re.compile(r"^\[(\d{4}-\d{2}-\d{2}[^\]]*)\]\s*")
_ENTRY_TIME = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2})\]\s*")
_RAW_MESSAGE = re.compile(
    r"^\[\d{4}-\d{2}-\d{2}[^\]]*\]\s+[A-Z][A-Z0-9_]*(?:\s+\[tools:\s*[^\]]+\])?:"
)


class Clock:
    """nanobot's naive timestamps as aware ones, in the chosen zone."""

    def __init__(self, tz: tzinfo | None) -> None:
        self.tz = tz

    def __call__(self, value: object, where: str) -> datetime:
        if not isinstance(value, str) or not value:
            raise ImportFormatError(where, f"timestamp {value!r} is not an ISO date-time")
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            raise ImportFormatError(where, f"timestamp {value!r} is not an ISO date-time") from None
        if when.tzinfo is not None:
            return when
        return when.replace(tzinfo=self.tz) if self.tz is not None else when.astimezone()


def memory_session(
    workspace: Path, session_id: str = MEMORY_SESSION, tz: tzinfo | None = None
) -> Session | None:
    """The curated memory files as one session: one interaction per commit of nanobot's
    git repository that touched them (its author as speaker), else one per file version."""
    turns: list[Interaction] = []
    if is_repository(workspace):
        for version in file_versions(workspace, MEMORY_FILES):
            if version.text is None:
                continue
            turns.append(
                Interaction(
                    id=stable_id("nbm", version.commit, version.path),
                    timestamp=version.when,
                    messages=[
                        Message(
                            speaker=_speaker(version.author),
                            content=f"[file: {version.path} · {version.subject} · "
                            f"{version.commit[:12]}]\n{version.text}",
                        )
                    ],
                )
            )
    if not turns:
        for name in MEMORY_FILES:
            path = workspace / name
            if not readable(workspace, name):
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            when = datetime.fromtimestamp(path.stat().st_mtime).astimezone(tz)
            turns.append(
                Interaction(
                    id=stable_id("nbm", name, text),
                    timestamp=when,
                    messages=[Message(speaker="nanobot", content=f"[file: {name}]\n{text}")],
                )
            )
    turns = [t for t in turns if t.messages[0].content.strip()]
    if not turns:
        return None
    return Session(
        id=session_id,
        created=min(t.timestamp for t in turns),
        last_active=max(t.timestamp for t in turns),
        tags=["nanobot", "memory"],
        participants=list(dict.fromkeys(t.messages[0].speaker for t in turns)),
        interactions=_unique(turns),
    )


def _speaker(name: str) -> str:
    cleaned = re.sub(r"[*`\\\[\]<>|\x00-\x1f\x7f]", "", name).strip()
    return cleaned or "nanobot"


def _unique(turns: list[Interaction]) -> list[Interaction]:
    return list({t.id: t for t in turns}.values())


def history_session(
    workspace: Path,
    session_id: str = HISTORY_SESSION,
    tz: tzinfo | None = None,
    meter: Meter | None = None,
) -> Session | None:
    """``memory/history.jsonl`` (or legacy ``HISTORY.md``) as one session, an interaction
    per entry; ids hash the entry's time and text, as nanobot's own migration keeps them."""
    clock = Clock(tz)
    entries: list[tuple[str, str, str]] = []  # (timestamp, text, where)
    jsonl = workspace / "memory" / "history.jsonl"
    legacy = workspace / "memory" / "HISTORY.md"
    if readable(workspace, HISTORY_FILES[0]):
        with open(jsonl, "rb") as handle:
            for number, line in numbered_lines(str(jsonl), handle):
                if meter is not None:
                    meter.done += len(line)
                if line.strip():
                    entries.append(_history_entry(line, f"{jsonl}:{number}"))
    elif readable(workspace, HISTORY_FILES[1]):
        fallback = datetime.fromtimestamp(legacy.stat().st_mtime).strftime("%Y-%m-%d %H:%M")
        text = legacy.read_text(encoding="utf-8", errors="replace")
        entries = [(*_entry_time(chunk, fallback), f"{legacy}:1") for chunk in _chunks(text)]
    turns = [
        Interaction(
            id=stable_id("nbh", stamp, text),
            timestamp=clock(stamp.replace(" ", "T"), where),
            messages=[Message(speaker="nanobot", content=text)],
        )
        for stamp, text, where in entries
        if text.strip()
    ]
    if not turns:
        return None
    return Session(
        id=session_id,
        created=min(t.timestamp for t in turns),
        last_active=max(t.timestamp for t in turns),
        tags=["nanobot", "history"],
        participants=["nanobot"],
        interactions=_unique(turns),
    )


def _history_entry(line: str, where: str) -> tuple[str, str, str]:
    record = json_object(line, where)
    if not isinstance(record.get("content"), str):
        raise ImportFormatError(where, "expected an object with 'content' text")
    stamp = str(record.get("timestamp") or "")
    text = record["content"]
    key = record.get("session_key")
    if isinstance(key, str) and key:
        text = f"[session: {key}]\n{text}"
    return stamp, text, where


def _chunks(text: str) -> list[str]:
    """HISTORY.md split into entries the way nanobot's migration splits it."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").strip().split("\n")
    chunks: list[list[str]] = []
    current: list[str] = []
    blank_before = False
    for line in lines:
        starts = bool(current) and (
            (blank_before and line.strip())
            or (_ENTRY_START.match(line) and not (_is_raw(current) and _RAW_MESSAGE.match(line)))
        )
        if starts:
            chunks.append(current)
            current = []
        current.append(line)
        blank_before = not line.strip()
    chunks.append(current)
    return [joined for chunk in chunks if (joined := "\n".join(chunk).strip())]


def _is_raw(lines: list[str]) -> bool:
    first = next((line for line in lines if line.strip()), "")
    match = _ENTRY_TIME.match(first)
    return match is not None and first[match.end() :].lstrip().startswith("[RAW]")


def _entry_time(chunk: str, fallback: str) -> tuple[str, str]:
    match = _ENTRY_TIME.match(chunk)
    if match is None:
        return fallback, chunk
    rest = chunk[match.end() :].lstrip()
    return match.group(1), rest or chunk
