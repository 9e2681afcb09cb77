"""What the coding-agent importers share (Claude Code, Codex CLI, Gemini CLI).

Each of those agents keeps one transcript file per session. A reader walks a file and hands
its messages to a :class:`TurnBuilder`: a user's words open a turn, the agent's replies, tool
calls and (with ``tools="full"``) tool results join it, as the nanobot importer does. The
builder gives the gitmem :class:`~gitmem.models.Session`: ids hash the session key, the turn's
first time and its first words, never a position, so a re-import or a capture that reads only
the end of a file names every turn as a full import does. The builder also remembers where in
the file the last turn began (``resume``): a live capture reads on from there next time.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from gitmem.errors import ValidationError
from gitmem.importers.engine import (
    ImportResult,
    Meter,
    run_import,
    safe_session_id,
    source_file_problem,
    stable_id,
)
from gitmem.manager import MemoryManager
from gitmem.models import Interaction, Message, Session

Tools = Literal["summary", "full"]


@dataclass
class _Turn:
    first_time: str  # as the file gives it, or the tool's own id for the message
    when: datetime
    messages: list[Message]


@dataclass
class TurnBuilder:
    """Collects one transcript's messages into turns and session metadata."""

    key: str  # the session id before it is made storable, e.g. claude-code:<uuid>
    prefix: str  # interaction id prefix
    tag: str  # the agent, as a tag
    tools: Tools = "summary"
    turns: list[_Turn] = field(default_factory=list)
    extra: dict[str, str] = field(default_factory=dict)
    models: dict[str, None] = field(default_factory=dict)
    project: str | None = None
    resume: int = 0  # byte offset of the line that opened the last turn
    fallback: datetime | None = None  # for records without a time (file's mtime)

    def when(self, stamp: object) -> tuple[str, datetime]:
        """``stamp`` (ISO 8601, ``Z`` allowed) as its text and a zoned datetime."""
        text = stamp if isinstance(stamp, str) else ""
        try:
            moment = datetime.fromisoformat(text) if text else None
        except ValueError:
            moment = None
        if moment is None:
            moment = self.fallback or (
                self.turns[-1].when if self.turns else datetime.now(timezone.utc)
            )
        elif moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return text, moment

    def user(self, stamp: object, text: str, offset: int = 0, ident: str = "") -> None:
        """A user's words: a new turn. Its id hashes ``ident`` (the tool's own id for the
        message, when it keeps one across rewrites) or else ``stamp`` as given, so a record
        without a time is named by its words alone, not by the file's mtime."""
        if not text.strip():
            return
        first, moment = self.when(stamp)
        said = [Message(speaker="user", content=text)]
        self.turns.append(_Turn(ident or first, moment, said))
        self.resume = offset

    def reply(self, stamp: object, text: str, model: object = None) -> None:
        """The agent's words (and its tool calls, one ``[tool: ...]`` line each)."""
        if isinstance(model, str) and model and not model.startswith("<"):
            self.models.setdefault(model)
        if text.strip():
            self._add(stamp, Message(speaker="assistant", content=text))

    def result(self, stamp: object, name: str, text: str) -> None:
        """A tool's result: kept only with ``tools="full"``, as the ``tool`` speaker."""
        if self.tools == "full" and text.strip():
            label = f"[result: {name}]\n" if name else ""
            self._add(stamp, Message(speaker="tool", content=label + text))

    def where(self, cwd: object) -> None:
        """The working folder: the session's project (its last part) and ``cwd``."""
        if isinstance(cwd, str) and cwd and "cwd" not in self.extra:
            self.extra["cwd"] = cwd
            name = Path(cwd).name
            if name and name.isprintable() and len(name) <= 80:
                self.project = name

    def _add(self, stamp: object, message: Message) -> None:
        if not self.turns:  # the agent spoke first
            first, moment = self.when(stamp)
            self.turns.append(_Turn(first, moment, []))
        self.turns[-1].messages.append(message)

    def session(self) -> Session | None:
        """The session read so far, or None when it holds no turn."""
        if not self.turns:
            return None
        interactions: list[Interaction] = []
        seen: set[str] = set()
        for turn in self.turns:
            parts = [self.key, turn.first_time, turn.messages[0].content]
            iid = stable_id(self.prefix, *parts)
            while iid in seen:
                parts.append("again")
                iid = stable_id(self.prefix, *parts)
            seen.add(iid)
            interactions.append(Interaction(id=iid, timestamp=turn.when, messages=turn.messages))
        extra = dict(self.extra)
        if self.models:
            extra["model"] = ", ".join(self.models)
        speakers = list(dict.fromkeys(m.speaker for t in self.turns for m in t.messages))
        times = [t.when for t in self.turns]
        return Session(
            id=safe_session_id(self.key),
            created=min(times),
            last_active=max(times),
            participants=speakers,
            tags=[self.tag],
            project=self.project,
            extra={k: v for k, v in extra.items() if v.isprintable()},
            interactions=interactions,
        )


def tool_line(name: str, args: object) -> str:
    """A tool call as one line in the agent's message: ``[tool: name {json}]``."""
    if isinstance(args, str):
        with contextlib.suppress(json.JSONDecodeError):
            args = json.loads(args) if args.strip() else {}
    shown = json.dumps(args, ensure_ascii=False, separators=(", ", ": ")) if args else "{}"
    return f"[tool: {name or 'tool'} {shown}]"


def items(value: object) -> list[Any]:
    """``value`` if it is a list, else an empty one (a field a record may lack)."""
    return value if isinstance(value, list) else []


def mapping(value: object) -> dict[str, Any]:
    """``value`` if it is an object, else an empty one."""
    return value if isinstance(value, dict) else {}


def joined(*parts: str) -> str:
    return "\n".join(p for p in parts if p)


def mtime(path: Path) -> datetime:
    return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)


def find_files(
    path: str | os.PathLike[str], patterns: Iterable[str], what: str
) -> tuple[list[Path], list[str]]:
    """The transcript files ``path`` names (a file, or a folder searched for ``patterns``)
    and the ones left out (links out of it, FIFOs), with why."""
    root = Path(path).expanduser()
    if root.is_file():
        return [root], []
    if not root.is_dir():
        raise ValidationError(f"{root}: no such file or folder (give {what})")
    found = sorted({p for pattern in patterns for p in root.glob(pattern)})
    kept, skipped = [], []
    for file in found:
        problem = source_file_problem(file, root)
        if problem is None:
            kept.append(file)
        else:
            skipped.append(problem)
    return kept, skipped


Reader = Callable[[Path, Tools, int], TurnBuilder | None]


def import_transcripts(
    mm: MemoryManager,
    files: list[Path],
    reader: Reader,
    *,
    source: str,
    subject: str,
    tools: Tools = "summary",
    dry_run: bool = False,
    meter: Meter | None = None,
    progress: Callable[[ImportResult], None] | None = None,
    warnings: Iterable[str] = (),
) -> ImportResult:
    """Import every file with ``reader`` as one commit (see the engine)."""
    if tools not in ("summary", "full"):
        raise ValidationError(f"--tools {tools!r}: use 'summary' or 'full'")
    if meter is not None:
        meter.total = sum(p.stat().st_size for p in files)

    def sessions() -> Iterator[Session]:
        for path in files:
            built = reader(path, tools, 0)
            if meter is not None:
                meter.done += path.stat().st_size
            found = built.session() if built is not None else None
            if found is not None:
                yield found

    return run_import(
        mm,
        sessions(),
        source=source,
        subject=subject,
        dry_run=dry_run,
        progress=progress,
        warnings=warnings,
    )


def text_of(value: Any) -> str:
    """Text in a content value: a string, or a list of blocks with ``text``."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return joined(*(text_of(v) for v in value))
    if isinstance(value, dict):
        if isinstance(value.get("text"), str):
            return str(value["text"])
        if "content" in value:
            return text_of(value["content"])
        if "output" in value:
            return text_of(value["output"])
    return ""
