"""OpenClaw's memory and transcripts as gitmem sessions (``gitmem import openclaw``).

Formats, read from the ``openclaw`` npm package 2026.4.29 (the last line that keeps
transcripts as JSONL; 2026.9.6 moved them into a per-agent SQLite database and keeps
``sessions/*.jsonl`` and ``sessions.json`` as legacy input for ``openclaw doctor``) and the
transcript writer it pins, ``SessionManager`` of ``@mariozechner/pi-coding-agent`` 0.70.6:

* Workspace ``~/.openclaw/workspace``: ``MEMORY.md`` (curated long-term memory) and daily
  logs ``memory/YYYY-MM-DD.md``. OpenClaw writes neither itself: the agent edits them with
  its file tools (its pre-compaction flush tells it to *append* to today's file), so they
  are free Markdown. The bundled ``session-memory`` hook writes
  ``memory/YYYY-MM-DD-<slug>.md`` on ``/new``: ``# Session: <date> <time> <zone>``, a
  ``- **Session Key**/**Session ID**/**Source**`` list and ``## Conversation Summary`` with
  ``role: text`` lines.
* Transcripts ``~/.openclaw/agents/<agentId>/sessions/<sessionId>.jsonl`` (or
  ``<sessionId>-topic-<thread>.jsonl``; archived ones get ``.reset.<time>`` /
  ``.deleted.<time>`` after ``.jsonl``; ``.checkpoint.<uuid>.jsonl``, ``.trajectory.jsonl``
  and ``.bak.`` files are copies or traces, not read). One JSON object a line: a header
  ``{"type": "session", "version": 3, "id", "timestamp" (ISO, UTC "Z"), "cwd"}`` (it may
  repeat: OpenClaw writes it, then ``SessionManager`` flushes its buffer, header included,
  at the first assistant message), then entries ``{type, id, parentId, timestamp}``:
  ``message`` with ``message: {role, content, timestamp (epoch ms)}`` where role is
  ``user`` (content a string or ``text``/``image`` blocks; images are base64 ``data`` plus
  ``mimeType``), ``assistant`` (``text``, ``thinking`` and ``toolCall {id, name,
  arguments}`` blocks, ``stopReason`` ``stop``/``toolUse``/..., ``model``), ``toolResult``
  (``toolCallId``, ``toolName``, ``content``, ``isError``), ``bashExecution`` or ``custom``;
  ``compaction`` (``summary``, ``firstKeptEntryId``, ``tokensBefore``),
  ``branch_summary``, ``session_info`` (``name``), ``model_change``,
  ``thinking_level_change``, ``label``, ``custom``, ``custom_message``.
* ``sessions.json`` beside them: ``{sessionKey: {sessionId, sessionFile (an absolute path
  on the machine that wrote it), updatedAt, sessionStartedAt (epoch ms), chatType, label,
  displayName, subject, channel, lastChannel, deliveryContext, ...}}``.

Mapping (every id through :func:`~gitmem.importers.engine.safe_session_id`):

* ``MEMORY.md`` -> session ``openclaw:memory``, one interaction per distinct version of the
  file (id from its content hash): an unchanged file adds nothing, a changed one appends a
  version and the old wording stays.
* ``memory/YYYY-MM-DD.md`` and its ``-<slug>`` variants -> one session ``openclaw:YYYY-MM-DD``
  (a slug file joins its day; the speaker names the file), its entries split through the
  Markdown AST (:func:`gitmem.format.blocks.split_entries`), ids from day and entry text,
  timestamps the day's midnight in ``tz`` (or the ``HH:MM`` a heading starts with). An
  entry the agent later extends comes in again as a new entry; the old one is kept.
* each transcript file -> session ``openclaw:<agentId>:<file stem>`` (the stem is the
  OpenClaw session id, plus ``-topic-<thread>``; archived copies of a transcript join it),
  tags ``openclaw``, the agent id and the channel; ``sessions.json``'s key, label, title and
  chat type go into metadata (its ``sessionFile`` paths are matched by base name, never
  opened). A turn is a user message and the assistant messages up to the next user message;
  assistant messages before the first user message form their own turn. Tool calls become
  one line ``[tool: name {args}]``, images ``[image: mime type]``; thinking blocks, tool
  results (the call line says what was done), bash/custom messages and model changes are
  left out. A turn's id hashes session, first timestamp and its opening message, so a turn
  whose later messages change is reported, not overwritten. A last turn still running
  (ending in a tool call or result) waits for the next import. The latest ``compaction``
  becomes the session summary (model ``openclaw-compaction``).

SQLite era, read from the ``openclaw`` npm package 2026.9.6 (agent schema version 23):
each agent keeps ``~/.openclaw/agents/<agentId>/agent/openclaw-agent.sqlite``; table
``transcript_events (session_id, seq, event_json, created_at, event_zstd, ...)`` holds the
transcript, one row per JSONL line of old, ``event_json`` the line itself (NULL when the
event is stored zstd-compressed in ``event_zstd``: such events are left out and counted in
the result's warnings, the standard library cannot read zstd here); ``session_windows
(session_id, session_key, display_name, channel, chat_type, ...)`` and ``session_nodes
(session_key, label, display_name, ...)`` say what ``sessions.json`` said. A session there
is the same gitmem session as its JSONL file (``openclaw:<agentId>:<session_id>``), and the
same event read from both makes the same turn (its id hashes the event, not where it was
read). ``openclaw doctor`` moves each JSONL file it has imported into
``agents/<agentId>/session-sqlite-import-archive/<key>.<file name>.imported-<ms>``; those
copies are read as transcripts of the same session too. The database is opened read-only
(``mode=ro``) in one read transaction, so an import never writes, never checkpoints and
sees one consistent snapshot while OpenClaw goes on writing.

Transcripts are read line by line (rows one by one); a malformed line stops the import with
``file:line`` (``database#session:seq``).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta, tzinfo
from pathlib import Path
from typing import Any

from gitmem.errors import ValidationError
from gitmem.format.blocks import split_entries
from gitmem.importers.digests import SourceDigests
from gitmem.importers.engine import (
    PART_SIZE,
    ImportFormatError,
    ImportResult,
    Meter,
    json_object,
    numbered_lines,
    run_import,
    safe_session_id,
    stable_id,
    time_zone,
)
from gitmem.manager import MemoryManager
from gitmem.models import Interaction, Message, Session, Summary

SOURCE = "openclaw"
MEMORY_SESSION = "openclaw:memory"
SUMMARY_MODEL = "openclaw-compaction"
USER, ASSISTANT = "User", "Assistant"

_DAY_FILE = re.compile(r"(\d{4}-\d{2}-\d{2})(?:-(.+))?\.md")
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})\b")
_ARCHIVE = re.compile(r"\.jsonl\.(?:reset|deleted)\.\d{4}-\d{2}-\d{2}T[\d.-]+Z")
_CHECKPOINT = re.compile(r"\.checkpoint\.[0-9a-f-]{36}\.jsonl", re.I)
# a JSONL file `openclaw doctor` moved aside once it was in SQLite: <key slug>.<name>.imported-<ms>
_IMPORTED = re.compile(r"\.imported-\d+(?:\.\d+)?")
AGENT_DB = Path("agent") / "openclaw-agent.sqlite"
IMPORT_ARCHIVE = "session-sqlite-import-archive"
# one-line metadata values are cut to this many characters
MAX_VALUE = 200


def default_home() -> Path:
    """``~/.openclaw`` (``OPENCLAW_STATE_DIR`` when set, as OpenClaw resolves it)."""
    state = os.environ.get("OPENCLAW_STATE_DIR", "").strip()
    return Path(state).expanduser() if state else Path.home() / ".openclaw"


def resolve_tz(tz: str | tzinfo | None) -> tzinfo:
    """A zone name, a ``tzinfo``, or None for the local zone."""
    if isinstance(tz, tzinfo):
        return tz
    named = time_zone(tz)
    if named is not None:
        return named
    local = datetime.now().astimezone().tzinfo
    return local if local is not None else UTC


def locate(
    workspace: str | Path | None = None, agents_dir: str | Path | None = None
) -> tuple[Path, Path | None]:
    """The workspace and the agents folder an import reads (defaults as OpenClaw's).

    Raises:
        ValidationError: a folder given does not exist, or neither was found.
    """
    home = default_home()
    space = Path(workspace).expanduser() if workspace is not None else home / "workspace"
    agents: Path | None
    if agents_dir is not None:
        agents = Path(agents_dir).expanduser()
        if not agents.is_dir():
            raise ValidationError(f"--agents-dir {agents}: no such folder")
    else:
        found = [p for p in (space.parent / "agents", home / "agents") if p.is_dir()]
        agents = found[0] if found else None
    if workspace is not None and not space.is_dir():
        raise ValidationError(f"{space}: no such OpenClaw workspace folder")
    if not space.is_dir() and agents is None:
        raise ValidationError(
            f"{space}: no OpenClaw workspace or agents folder found; "
            "give the workspace path or --agents-dir"
        )
    return space, agents


def watched_paths(
    workspace: str | Path | None = None, agents_dir: str | Path | None = None
) -> list[Path]:
    """The folders an import reads (for ``--watch``)."""
    space, agents = locate(workspace, agents_dir)
    return [p for p in (space, agents) if p is not None and p.is_dir()]


def import_openclaw(
    mm: MemoryManager,
    workspace: str | Path | None = None,
    *,
    agents_dir: str | Path | None = None,
    tz: str | tzinfo | None = None,
    dry_run: bool = False,
    meter: Meter | None = None,
    progress: Callable[[ImportResult], None] | None = None,
    part_size: int = PART_SIZE,
) -> ImportResult:
    """Import an OpenClaw workspace and its agents' transcripts into ``mm`` as one commit
    (a huge one in parts: see :func:`~gitmem.importers.engine.run_import`).

    Args:
        mm: the store.
        workspace: OpenClaw's workspace (default ``~/.openclaw/workspace``).
        agents_dir: where ``<agentId>/sessions/`` live (default ``<workspace>/../agents``
            when that exists, else ``~/.openclaw/agents``).
        tz: zone for naive times and daily-log dates (default the local zone).
        dry_run: say what would change, write nothing.
        meter: bytes read so far, for a progress line.
        progress: called with the result so far after each session.

    Raises:
        ImportFormatError: a file is not what OpenClaw writes (names ``file:line``).
        ValidationError: neither a workspace nor an agents folder was found.
    """
    space, agents = locate(workspace, agents_dir)
    has_space = space.is_dir()
    reader = _OpenClawReader(mm, resolve_tz(tz), meter or Meter(), SourceDigests(mm, SOURCE))
    files = reader.plan(space if has_space else None, agents)
    reader.meter.total = sum(_size(path) for _kind, path, _agent in files)

    def sessions() -> Iterator[Session]:
        reader.meter.done = 0  # a huge import reads the files again
        reader.warnings.clear()
        return reader.sessions(files)

    result = run_import(
        mm,
        sessions(),
        source=SOURCE,
        dry_run=dry_run,
        reread=sessions,
        size=reader.meter.total,
        part_size=part_size,
        progress=progress,
        subject=f"Import OpenClaw {space if has_space else agents}",
    )
    result.warnings.extend(reader.warnings)
    if not dry_run and not result.differing:  # a conflict is reported again next time
        reader.digests.record(result.commit or mm.repository.head())
    result.unchanged_files = reader.digests.skipped
    return result


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


@dataclass
class _OpenClawReader:
    mm: MemoryManager
    tz: tzinfo
    meter: Meter
    digests: SourceDigests  # transcripts merged before and unchanged since are not read
    stores: dict[str, dict[str, tuple[str, dict[str, Any]]]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # events left out, and why

    # --- which files ------------------------------------------------------------------------

    def plan(self, space: Path | None, agents: Path | None) -> list[tuple[str, Path, str]]:
        """(kind, path, agent id) of every file to read, in a stable order."""
        files: list[tuple[str, Path, str]] = []
        if space is not None:
            for name in ("MEMORY.md", "memory.md"):
                if _regular(space / name):
                    files.append(("memory", space / name, ""))
                    break
            days = space / "memory"
            if days.is_dir():
                for entry in sorted(os.scandir(days), key=lambda e: e.name):
                    if _DAY_FILE.fullmatch(entry.name) and _regular(Path(entry.path)):
                        files.append(("day", Path(entry.path), ""))
        if agents is not None:
            for agent in sorted(os.scandir(agents), key=lambda e: e.name):
                if not agent.is_symlink() and agent.is_dir():
                    files.extend(self.agent_files(Path(agent.path)))
        return files

    def agent_files(self, agent: Path) -> list[tuple[str, Path, str]]:
        """An agent's SQLite database, its JSONL transcripts and their migrated copies."""
        files: list[tuple[str, Path, str]] = []
        if _regular(agent / AGENT_DB):
            files.append(("database", agent / AGENT_DB, agent.name))
        for folder, kind in (("sessions", "transcript"), (IMPORT_ARCHIVE, "imported")):
            if not (agent / folder).is_dir():
                continue
            for entry in sorted(os.scandir(agent / folder), key=lambda e: e.name):
                name = _original_name(entry.name) if kind == "imported" else entry.name
                if _transcript_name(name) and _regular(Path(entry.path)):
                    files.append((kind, Path(entry.path), agent.name))
        return files

    def sessions(self, files: list[tuple[str, Path, str]]) -> Iterator[Session]:
        days: dict[str, list[Path]] = {}
        for kind, path, _agent in files:
            if kind == "day":
                found = _DAY_FILE.fullmatch(path.name)
                assert found is not None
                days.setdefault(found[1], []).append(path)
        for kind, path, agent in files:
            if kind == "memory":
                yield self.memory(path)
            elif kind == "day":
                day = str(_DAY_FILE.fullmatch(path.name)[1])  # type: ignore[index]
                if days.get(day, [None])[0] == path:
                    session = self.day(day, days[day])
                    if session is not None:
                        yield session
            elif kind == "database":
                yield from self.database(path, agent)
            elif self.digests.unchanged(path):
                self.meter.done += _size(path)
            else:
                session = self.transcript(path, agent)
                if session is not None:
                    yield session

    # --- workspace --------------------------------------------------------------------------

    def _text(self, path: Path) -> str:
        data = path.read_bytes()
        self.meter.done += len(data)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data[: exc.start].count(b"\n") + 1
            raise ImportFormatError(f"{path}:{line}", f"not UTF-8 ({exc.reason})") from None

    def memory(self, path: Path) -> Session:
        text = self._text(path).replace("\r\n", "\n").strip("\n")
        stored = self.mm.load_memory(MEMORY_SESSION)
        iid = stable_id("memory", text)
        kept = stored.interaction(iid) if stored is not None else None
        # a version already stored keeps its time: touching the file changes nothing
        when = (
            kept.timestamp
            if kept is not None
            else datetime.fromtimestamp(path.stat().st_mtime, UTC)
        )
        turns = (
            [
                Interaction(
                    id=iid, timestamp=when, messages=[Message(speaker=path.name, content=text)]
                )
            ]
            if text
            else []
        )
        return Session(
            id=MEMORY_SESSION,
            created=when,
            last_active=when,
            participants=[path.name],
            tags=[SOURCE, "memory"],
            interactions=turns,
        )

    def day(self, day: str, paths: list[Path]) -> Session | None:
        try:
            midnight = datetime.combine(datetime.strptime(day, "%Y-%m-%d").date(), time(), self.tz)
        except ValueError:
            return None  # not a date (2026-13-40.md): not a daily log
        turns: list[Interaction] = []
        seen: set[str] = set()
        for path in paths:
            for entry in split_entries(self._text(path)):
                iid = stable_id("day", day, entry.text)
                if iid in seen:  # the same note twice on one day is one memory
                    continue
                seen.add(iid)
                when = midnight
                clock = _CLOCK.match(entry.heading or "")
                if clock and int(clock[1]) < 24 and int(clock[2]) < 60:
                    when = midnight + timedelta(hours=int(clock[1]), minutes=int(clock[2]))
                turns.append(
                    Interaction(
                        id=iid,
                        timestamp=when,
                        messages=[Message(speaker=path.name, content=entry.text)],
                    )
                )
        if not turns:
            return None
        return Session(
            id=safe_session_id(f"openclaw:{day}"),
            created=midnight,
            last_active=max(t.timestamp for t in turns),
            participants=[p.name for p in paths],
            tags=[SOURCE, "daily"],
            interactions=turns,
        )

    # --- transcripts ------------------------------------------------------------------------

    def store_of(self, sessions_dir: Path) -> dict[str, tuple[str, dict[str, Any]]]:
        """``sessions.json`` of a folder as {file name or session id: (key, entry)}."""
        key = str(sessions_dir)
        if key in self.stores:
            return self.stores[key]
        found: dict[str, tuple[str, dict[str, Any]]] = {}
        path = sessions_dir / "sessions.json"
        if _regular(path):
            try:
                data = json.loads(self._text(path))
            except json.JSONDecodeError as exc:
                raise ImportFormatError(f"{path}:{exc.lineno}", f"not JSON ({exc.msg})") from None
            if not isinstance(data, dict):
                raise ImportFormatError(f"{path}:1", "expected an object of session keys")
            for skey, entry in data.items():
                if not isinstance(entry, dict):
                    continue
                file = entry.get("sessionFile")
                if isinstance(file, str) and file.strip():
                    # only its base name: the path is the writer's, never opened here
                    found.setdefault(file.replace("\\", "/").rsplit("/", 1)[-1], (skey, entry))
                sid = entry.get("sessionId")
                if isinstance(sid, str) and sid:
                    found.setdefault(f"{sid}.jsonl", (skey, entry))
        self.stores[key] = found
        return found

    def transcript(self, path: Path, agent: str) -> Session | None:
        name = _original_name(path.name)
        stem = name[: name.index(".jsonl")]
        builder = _Turns(safe_session_id(f"openclaw:{agent}:{stem}"), self.tz)
        with path.open("rb") as handle:
            for number, line in numbered_lines(str(path), handle):
                self.meter.done += len(line.encode("utf-8", "surrogatepass"))
                if line.strip():
                    builder.add_line(line, f"{path}:{number}")
        sessions_dir = path.parent.parent / "sessions"
        key, entry = self.store_of(sessions_dir).get(f"{stem}.jsonl", ("", {}))
        return self.session(builder, agent, stem, key, entry)

    def database(self, path: Path, agent: str) -> Iterator[Session]:
        """The sessions of an agent's ``openclaw-agent.sqlite``, read-only, one snapshot."""
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
        try:
            db.execute("BEGIN")  # every SELECT below sees the same snapshot
            about = {
                row[0]: row[1:]
                for row in db.execute(
                    "SELECT w.session_id, w.session_key, w.display_name, w.channel,"
                    " w.chat_type, n.label, n.display_name FROM session_windows w"
                    " LEFT JOIN session_nodes n ON n.session_key = w.session_key"
                )
            }
            rows = db.execute(
                "SELECT session_id, seq, event_json FROM transcript_events ORDER BY session_id, seq"
            )
            builder: _Turns | None = None
            stem = ""
            for stem_now, seq, event in rows:
                if builder is None or stem_now != stem:
                    if builder is not None:
                        yield from self._window(builder, agent, stem, about.get(stem))
                    stem = str(stem_now)
                    builder = _Turns(safe_session_id(f"openclaw:{agent}:{stem}"), self.tz)
                if not isinstance(event, str):
                    self.warnings.append(f"{path}#{stem}:{seq}: compressed event left out")
                    continue
                self.meter.done += len(event)
                builder.add_line(event, f"{path}#{stem}:{seq}")
            if builder is not None:
                yield from self._window(builder, agent, stem, about.get(stem))
        except sqlite3.Error as exc:
            raise ImportFormatError(str(path), f"not an OpenClaw agent database ({exc})") from None
        finally:
            db.close()

    def _window(
        self, builder: _Turns, agent: str, stem: str, about: tuple[Any, ...] | None
    ) -> Iterator[Session]:
        key, display, channel, chat_type, label, node_display = about or ("",) + (None,) * 5
        entry = {
            "label": label,
            "displayName": display or node_display,
            "channel": channel,
            "chatType": chat_type,
        }
        session = self.session(builder, agent, stem, str(key or ""), entry)
        if session is not None:
            yield session

    def session(
        self, builder: _Turns, agent: str, stem: str, key: str, entry: dict[str, Any]
    ) -> Session | None:
        """The session a transcript's turns make, with what its store entry says."""
        turns = builder.finish()
        if not turns and builder.summary is None:
            return None
        extra: dict[str, str] = {}
        for name, value in (
            ("openclaw_agent", agent),
            ("openclaw_session", stem),
            ("openclaw_key", key),
            ("title", builder.title or entry.get("label") or entry.get("displayName")),
            ("subject", entry.get("subject")),
            ("chat_type", entry.get("chatType")),
        ):
            cleaned = _one_line(value)
            if cleaned:
                extra[name] = cleaned
        tags = [SOURCE]
        delivery = entry.get("deliveryContext")
        channel = (
            entry.get("channel")
            or entry.get("lastChannel")
            or (delivery.get("channel") if isinstance(delivery, dict) else None)
        )
        for tag in (agent, channel):
            cleaned = _tag(tag)
            if cleaned and cleaned not in tags:
                tags.append(cleaned)
        times = [t.timestamp for t in turns] + (
            [builder.summary.generated] if builder.summary else []
        )
        created = builder.started or min(times)
        speakers = list(dict.fromkeys(m.speaker for t in turns for m in t.messages))
        return Session(
            id=builder.session_id,
            created=min(created, *times),
            last_active=max(times),
            participants=speakers or [USER, ASSISTANT],
            tags=tags,
            extra=extra,
            interactions=turns,
            summary=builder.summary,
        )


class _Turns:
    """Turns of one transcript, built as its lines are read."""

    def __init__(self, session_id: str, tz: tzinfo) -> None:
        self.session_id = session_id
        self.tz = tz
        self.turns: list[Interaction] = []
        self.seen: set[str] = set()
        self.parts: list[tuple[str, str]] = []
        self.first: datetime | None = None
        self.open = False  # the current turn waits for a tool result or a reply
        self.started: datetime | None = None
        self.title: str | None = None
        self.summary: Summary | None = None

    def add_line(self, line: str, where: str) -> None:
        """One JSONL line (or ``event_json``) of the transcript."""
        record = json_object(line, where)
        if not isinstance(record.get("type"), str):
            raise ImportFormatError(where, 'expected an object with a "type"')
        self.add(record, where)

    def add(self, record: dict[str, Any], where: str) -> None:
        kind = record["type"]
        if kind == "session":
            if self.started is None and record.get("timestamp") is not None:
                self.started = self._time(record.get("timestamp"), where)
        elif kind == "session_info":
            self.title = _one_line(record.get("name")) or self.title
        elif kind == "compaction" and isinstance(record.get("summary"), str):
            text = record["summary"].strip()
            if text:
                self.summary = Summary(
                    text=text,
                    generated=self._time(record.get("timestamp"), where),
                    model=SUMMARY_MODEL,
                )
        elif kind == "message":
            message = record.get("message")
            if not isinstance(message, dict):
                raise ImportFormatError(where, 'a message entry without a "message" object')
            self.message(message, record, where)

    def message(self, message: dict[str, Any], record: dict[str, Any], where: str) -> None:
        role = message.get("role")
        when = message.get("timestamp")
        stamp = self._time(when if when is not None else record.get("timestamp"), where)
        if role == "user":
            self.close()
            text = _content(message.get("content"), where)
            if text:
                self._part(USER, text, stamp)
        elif role == "assistant":
            text = _content(message.get("content"), where)
            if not text and message.get("errorMessage"):
                text = f"[error: {_one_line(message['errorMessage'])}]"
            if text:
                self._part(ASSISTANT, text, stamp)
            self.open = message.get("stopReason") == "toolUse"
        elif role == "toolResult":
            self.open = True  # the reply to it is still to come

    def _part(self, speaker: str, text: str, stamp: datetime) -> None:
        if self.first is None:
            self.first = stamp
        if self.parts and self.parts[-1][0] == speaker:
            self.parts[-1] = (speaker, f"{self.parts[-1][1]}\n{text}")
        else:
            self.parts.append((speaker, text))

    def close(self) -> None:
        if self.parts and self.first is not None:
            opener = self.parts[0][1]
            iid = stable_id("oc", self.session_id, self.first.isoformat(), opener)
            if iid not in self.seen:
                self.seen.add(iid)
                self.turns.append(
                    Interaction(
                        id=iid,
                        timestamp=self.first,
                        messages=[Message(speaker=s, content=c) for s, c in self.parts],
                    )
                )
        self.parts, self.first, self.open = [], None, False

    def finish(self) -> list[Interaction]:
        if not self.open:  # a turn still running comes with the next import
            self.close()
        return self.turns

    def _time(self, value: object, where: str) -> datetime:
        if isinstance(value, bool):
            raise ImportFormatError(where, f"timestamp {value!r} is not a time")
        if isinstance(value, int | float):
            try:
                return datetime.fromtimestamp(value / 1000, UTC)
            except (OverflowError, OSError, ValueError):
                raise ImportFormatError(where, f"timestamp {value!r} is out of range") from None
        if isinstance(value, str) and value.strip():
            try:
                parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                raise ImportFormatError(where, f"timestamp {value!r} is not ISO 8601") from None
            return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=self.tz)
        raise ImportFormatError(where, "a message without a timestamp")


def _content(content: object, where: str) -> str:
    """A message's visible text: text blocks, ``[image: type]``, ``[tool: name {args}]``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content.strip()
    if not isinstance(content, list):
        raise ImportFormatError(where, "message content is neither text nor a list of blocks")
    out: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            if block["text"].strip():
                out.append(block["text"].strip())
        elif kind == "image":
            out.append(f"[image: {_one_line(block.get('mimeType')) or 'image'}]")
        elif kind == "toolCall":
            args = json.dumps(block.get("arguments") or {}, ensure_ascii=False)
            out.append(f"[tool: {_one_line(block.get('name')) or 'tool'} {args}]")
    return "\n".join(out)


def _one_line(value: object) -> str:
    """A string as a metadata value: one line, no control characters, trimmed, short."""
    if not isinstance(value, str):
        return ""
    kept = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in value)
    return " ".join(kept.split())[:MAX_VALUE].strip()


def _tag(value: object) -> str:
    """A string as a tag (no ``*`` ``` ` ``` ``\\`` ``[`` ``]`` ``<`` ``>`` ``|`` ``,``)."""
    cleaned = _one_line(value)
    return "".join(ch for ch in cleaned if ch not in "*`\\[]<>|,").strip()[:60].strip()


def _transcript_name(name: str) -> bool:
    if ".jsonl" not in name or name.endswith(".trajectory.jsonl") or _CHECKPOINT.search(name):
        return False
    return name.endswith(".jsonl") or _ARCHIVE.search(name) is not None


def _original_name(name: str) -> str:
    """The transcript's own file name inside a migrated copy's name (``<key slug>.<name>
    .imported-<ms>``; the slug may hold dots, a session id holds none), else ``name``."""
    found = _IMPORTED.search(name)
    if found is None or found.end() != len(name) or ".jsonl" not in name:
        return name
    base = name[: found.start()]
    head, _, tail = base.partition(".jsonl")
    return head.rsplit(".", 1)[-1] + ".jsonl" + tail


def _regular(path: Path) -> bool:
    """A regular file that is no symlink (a link could point anywhere)."""
    return path.is_file() and not path.is_symlink()
