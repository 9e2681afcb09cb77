"""Chat transcripts in and out: OpenAI Chat Completions messages and ChatGPT's data export.

Reads, told apart by content (never by the file name):

- OpenAI Chat Completions ``messages``: a JSON array of ``{role, content, name?,
  tool_calls?, tool_call_id?}``; an object ``{"messages": [...], "id"?, "created"?,
  "title"?}``; a JSON array of such objects; or JSONL with one conversation (array or
  object) per line. ``content`` may be a string, null (an assistant message that only calls
  tools) or a list of parts (``text``; ``image_url`` becomes ``[image: url]``; any other part
  ``[<type>]``). Each tool call becomes a line ``[tool: name {args}]`` of the assistant's
  message; a tool result is a message of the speaker ``Tool``. Roles become speakers as
  ``gitmem save`` names them (``User``, ``Assistant``, ``System``); a user message's
  ``name`` is its speaker.
- ChatGPT's ``conversations.json``: a list of ``{title, create_time, update_time, mapping,
  current_node, conversation_id | id}``, where ``mapping`` is a tree of ``{message, parent,
  children}`` nodes. The branch the person saw last is imported: from ``current_node`` up
  through ``parent`` to the root (without ``current_node``: from the root along the last
  child). Hidden nodes (``metadata.is_visually_hidden_from_conversation``, ``weight`` 0)
  and empty ones are skipped; ``content.parts`` are joined (an image part becomes
  ``[image: pointer]``), an assistant message addressed to a tool (``recipient`` other
  than ``all``) becomes ``[tool: recipient text]``.

Each conversation is one session: ``--session ID`` when the file holds exactly one (a file
with more is refused rather than guessed at), else ``chat:<id>`` / ``chatgpt:<conversation
id>``, or without an id ``chat:<file stem>-<hash>``, the hash of its opening messages (up
to and including the first user message; ``-2``, ``-3``... for a later conversation of the
file opening the same way), so a conversation added before it does not rename it; always
through :func:`~gitmem.importers.engine.safe_session_id`. The title goes to the metadata key
``title``, the tag is ``chat`` or ``chatgpt``. A turn is a user message and the messages up
to the next one; messages before the first user message (a system prompt) form their own
turn. A turn's id hashes the session key, the time the file gives the turn (if any), its
opening message and how many turns opened the same way before it, so two "ok" turns stay
distinct, an unchanged file gives the same ids again, and a turn whose reply changed in the
file (a regenerated answer) is reported as differing rather than stored twice. A turn's
time is the first message time the file gives (``created`` / ``create_time`` /
``timestamp``: epoch seconds, or ISO with naive times in ``tz``); otherwise the
conversation's time (else the file's mtime) plus one second per turn, to keep the order.
Such a derived time is not the source's, so a re-import keeps the stored time of a turn it
already has (a touched or appended file causes no conflicts).

Big files stream: JSONL line by line, a JSON array element by element
(:mod:`gitmem.importers.jsonstream`); memory holds one conversation at a time. How one
conversation's messages are read is :mod:`gitmem.importers.chatmessages`.
:func:`export_chat` gives a session back as a messages array (``gitmem export chat``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import IO, Any

from gitmem.errors import SessionNotFound, ValidationError
from gitmem.importers.chatmessages import (
    ROLES,
    Item,
    chatgpt_items,
    conversation_time,
    openai_items,
    shape,
    time_zone,
    title_of,
)
from gitmem.importers.digests import SourceDigests
from gitmem.importers.engine import (
    PART_SIZE,
    ImportFormatError,
    ImportResult,
    Meter,
    numbered_lines,
    run_import,
    safe_session_id,
    stable_id,
)
from gitmem.importers.jsonstream import JsonStream, top_level
from gitmem.manager import MemoryManager
from gitmem.models import (
    ASSISTANT_SPEAKERS,
    SYSTEM_SPEAKERS,
    USER_SPEAKERS,
    Interaction,
    Message,
    ModelValidationError,
    Session,
    describe_errors,
)

SOURCE = "chat"
# a function name the Chat Completions API takes in tool_calls
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# messages of a conversation without an id that name it (up to the first user message)
OPENING = 3

EXPECTED = (
    "expected OpenAI chat messages (a JSON array of {role, content}), a conversation "
    'object with "messages", JSONL with one conversation per line, or ChatGPT\'s '
    'conversations.json (a list of conversations with "mapping")'
)


@dataclass(frozen=True)
class ChatConversation:
    """One conversation read from the file, as the session it becomes.

    Attributes:
        session: the gitmem session (turns in file order).
        derived: ids of the turns whose time the file does not give (a re-import keeps the
            stored time of these).
        timed: whether the file gives the conversation's time (else the mtime stood in).
        line: the line the conversation starts on.
    """

    session: Session
    derived: frozenset[str]
    timed: bool
    line: int


@dataclass(frozen=True)
class _Raw:
    kind: str  # "openai" | "chatgpt"
    line: int
    data: dict[str, Any]


class _ChatReader:
    """What converting one file's conversations needs to know."""

    def __init__(
        self, path: str, session: str | None, zone: tzinfo | None, mtime: datetime
    ) -> None:
        self.path = path
        self.stem = Path(path).stem or "chat"
        self.session = session
        self.zone = zone
        self.mtime = mtime
        self.count = 0
        self.first_line = 0
        self.openings: dict[str, int] = {}  # opening hash -> conversations that had it

    def unnamed(self, items: list[Item]) -> str:
        """The session id of a conversation without an id: file stem and opening hash."""
        opening: list[str] = []
        for item in items[:OPENING]:
            opening += [item.speaker, item.content]
            if item.role == "user":
                break
        key = stable_id("o", *opening)[2:10]
        seen = self.openings[key] = self.openings.get(key, 0) + 1
        return f"{SOURCE}:{self.stem}-{key}" + (f"-{seen}" if seen > 1 else "")


# --- reading ------------------------------------------------------------------------------


def read_chat(
    path: str | Path,
    *,
    session: str | None = None,
    tz: str | tzinfo | None = None,
    meter: Meter | None = None,
) -> Iterator[ChatConversation]:
    """The conversations of a chat transcript file, one at a time, without a store.

    ``session`` names the session (the file must then hold one conversation); ``tz`` is the
    zone of naive ISO times (default: this machine's); ``meter`` counts the bytes read.
    Raises :class:`ImportFormatError` (``file:line``) on anything it cannot read.
    """
    zone = time_zone(tz)
    name = str(path)
    try:
        handle = open(path, "rb")  # noqa: SIM115  (closed below; the generator owns it)
    except OSError as exc:
        raise ValidationError(f"{name}: cannot read ({exc.strerror})") from None
    with handle:
        stat = os.fstat(handle.fileno())
        if meter is not None:
            meter.total = stat.st_size
        reader = _ChatReader(name, session, zone, datetime.fromtimestamp(int(stat.st_mtime), UTC))
        for raw in _raw_conversations(name, handle, meter):
            found = _convert(reader, raw)
            if found is not None:
                yield found


def _raw_conversations(path: str, handle: IO[bytes], meter: Meter | None) -> Iterator[_Raw]:
    """The conversations of the file, unconverted, told apart by the first character:
    ``{`` on a line that is a whole JSON value means JSONL, anything else starting with
    ``[`` or ``{`` is read as a stream of JSON values."""
    first, line = _first_char(handle)
    if first not in ("[", "{"):
        found = "an empty file" if first is None else f"{first!r}"
        raise ImportFormatError(f"{path}:{line}", f"{EXPECTED}; found {found}")
    if first == "{" and _whole_value(handle.readline()):
        handle.seek(0)
        yield from _jsonl(path, _counted(handle, meter))
        return
    handle.seek(0)
    yield from _json_values(path, JsonStream(path, handle, meter))


def _first_char(handle: IO[bytes]) -> tuple[str | None, int]:
    """The first character that is not whitespace (or a BOM) and its line; the handle is
    left at the start of that line."""
    line = 1
    while True:
        start = handle.tell()
        raw = handle.readline(4096)
        if not raw:
            return None, line
        text = raw.decode("utf-8", "replace").lstrip(" \t\r\n\ufeff")
        if text:
            handle.seek(start)
            return text[0], line
        if raw.endswith(b"\n"):
            line += 1


def _whole_value(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return True


def _counted(handle: IO[bytes], meter: Meter | None) -> Iterator[bytes]:
    for raw in handle:
        if meter is not None:
            meter.done += len(raw)
        yield raw


def _jsonl(path: str, lines: Iterable[bytes]) -> Iterator[_Raw]:
    for number, text in numbered_lines(path, lines):
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ImportFormatError(
                f"{path}:{number}", f"not a JSON value ({exc.msg}, column {exc.colno})"
            ) from None
        except RecursionError:
            raise ImportFormatError(f"{path}:{number}", "JSON nested too deeply") from None
        if isinstance(value, list):
            yield from _from_list(path, number, value)
        else:
            yield _one(path, number, value)


def _json_values(path: str, stream: JsonStream) -> Iterator[_Raw]:
    # a top-level array of messages is one conversation; of conversations, one each
    messages: list[Any] | None = None
    start = 0
    decided = False
    for event in top_level(stream):
        if event.kind == "value":
            yield _one(path, event.line, event.value)
        elif event.kind == "start":
            messages, start, decided = None, event.line, False
        elif event.kind == "item":
            if not decided:
                decided = True
                messages = [] if _is_message(event.value) else None
            if messages is None:
                if isinstance(event.value, list):
                    yield from _from_list(path, event.line, event.value)
                else:
                    yield _one(path, event.line, event.value)
            elif _is_message(event.value):
                messages.append(event.value)
            else:
                raise ImportFormatError(
                    f"{path}:{event.line}",
                    "expected a chat message {role, content} like the "
                    f"array's first element, found {shape(event.value)}",
                )
        elif messages is not None:  # the end of an array of messages
            yield _Raw("openai", start, {"messages": messages})
            messages = None


def _from_list(path: str, line: int, value: list[Any]) -> Iterator[_Raw]:
    """A JSON array given whole: messages (one conversation) or conversations."""
    if not value or _is_message(value[0]):
        yield _Raw("openai", line, {"messages": value})
        return
    for item in value:
        if isinstance(item, list):
            yield _Raw("openai", line, {"messages": item})
        else:
            yield _one(path, line, item)


def _is_message(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and "role" in value
        and "messages" not in value
        and "mapping" not in value
    )


def _one(path: str, line: int, value: Any) -> _Raw:
    if isinstance(value, dict):
        if isinstance(value.get("mapping"), dict):
            return _Raw("chatgpt", line, value)
        if isinstance(value.get("messages"), list):
            return _Raw("openai", line, value)
    raise ImportFormatError(f"{path}:{line}", f"{EXPECTED}; found {shape(value)}")


# --- converting ---------------------------------------------------------------------------


def _convert(reader: _ChatReader, raw: _Raw) -> ChatConversation | None:
    where = f"{reader.path}:{raw.line}"
    reader.count += 1
    if reader.session is not None and reader.count == 2:
        raise ImportFormatError(
            where,
            f"--session {reader.session!r} names one session, but "
            "the file holds more than one conversation (the first "
            f"starts at line {reader.first_line}); import it "
            "without --session: each conversation gets its own "
            "session id",
        )
    reader.first_line = raw.line
    data = raw.data
    tag = raw.kind
    if raw.kind == "chatgpt":
        key = data.get("conversation_id") or data.get("id")
        items = chatgpt_items(where, data, reader.zone)
    else:
        key = data.get("id")
        items = openai_items(where, data["messages"], reader.zone, data.get("timestamps"))
        tag = SOURCE
    if reader.session is not None:
        session_id = safe_session_id(reader.session)
    elif key is not None and str(key).strip():
        session_id = safe_session_id(f"{tag}:{key}")
    else:
        session_id = safe_session_id(reader.unnamed(items))
    created = conversation_time(where, data, ("created", "create_time"), reader.zone)
    updated = conversation_time(where, data, ("updated", "update_time"), reader.zone)
    return _session(
        where,
        session_id,
        tag,
        items,
        created,
        updated,
        reader.mtime,
        title_of(data.get("title")),
        raw.line,
    )


def _session(
    where: str,
    session_id: str,
    tag: str,
    items: list[Item],
    created: datetime | None,
    updated: datetime | None,
    mtime: datetime,
    title: str | None,
    line: int,
) -> ChatConversation | None:
    turns: list[list[Item]] = []
    for item in items:
        if item.role == "user" or not turns:
            turns.append([item])
        else:
            turns[-1].append(item)
    base = created or mtime
    interactions: list[Interaction] = []
    derived: set[str] = set()
    seen: dict[tuple[str, ...], int] = {}
    for at, turn in enumerate(turns):
        given = next((item.when for item in turn if item.when is not None), None)
        when = given or base + timedelta(seconds=at)
        # a turn is known by its opening message (the prompt) and the time the file gives
        # it: a reply that changed since is then reported, not imported as a second turn
        parts = (given.isoformat() if given else "", turn[0].speaker, turn[0].content)
        occurrence = seen.get(parts, 0)
        seen[parts] = occurrence + 1
        turn_id = stable_id(tag, session_id, str(occurrence), *parts)
        if given is None:
            derived.add(turn_id)
        try:
            interactions.append(
                Interaction(
                    id=turn_id,
                    timestamp=when,
                    messages=[Message(speaker=item.speaker, content=item.content) for item in turn],
                )
            )
        except ModelValidationError as exc:
            raise ImportFormatError(where, f"turn {at + 1}: {describe_errors(exc)}") from None
    if not interactions:
        return None
    first = min(turn.timestamp for turn in interactions)
    last = max(turn.timestamp for turn in interactions)
    try:
        session = Session(
            id=session_id,
            created=min(first, created) if created else first,
            last_active=max(last, updated) if updated else last,
            participants=list(dict.fromkeys(m.speaker for t in interactions for m in t.messages)),
            tags=[tag],
            extra={"title": title} if title else {},
            interactions=interactions,
        )
    except ModelValidationError as exc:
        raise ImportFormatError(where, describe_errors(exc)) from None
    return ChatConversation(session, frozenset(derived), created is not None, line)


# --- the store ----------------------------------------------------------------------------


def import_chat(
    mm: MemoryManager,
    path: str | Path,
    *,
    session: str | None = None,
    tz: str | tzinfo | None = None,
    dry_run: bool = False,
    meter: Meter | None = None,
    progress: Callable[[ImportResult], None] | None = None,
    part_size: int = PART_SIZE,
) -> ImportResult:
    """Import a chat transcript file (see the module docstring for the formats) into ``mm``
    as one commit (``Gitmem-Op: import``, ``Gitmem-Source: chat``; a huge file goes in
    parts, see :func:`~gitmem.importers.engine.run_import`).

    Additive and idempotent (:func:`~gitmem.importers.engine.run_import`): turns a session
    lacks are appended, stored ones are kept (also turns saved by hand), a stored turn the
    file has otherwise is reported in ``result.differing``, an unchanged file makes no
    commit, and a malformed one (:class:`ImportFormatError`, ``file:line``) changes nothing.
    ``progress(result so far)`` is called after each conversation.
    """

    digests = SourceDigests(mm, SOURCE)

    def sessions() -> Iterator[Session]:
        # a generator function, so the file can be read again (a huge import in parts)
        if digests.unchanged(Path(path)):
            return
        stored: set[str] | None = None
        for found in read_chat(path, session=session, tz=tz, meter=meter):
            if found.derived:
                if stored is None:  # one listing, not a lookup per conversation
                    stored = set(mm.session_ids())
                if found.session.id in stored:
                    yield _keep_stored_times(mm, found)
                    continue
            yield found.session

    result = run_import(
        mm,
        sessions(),
        source=SOURCE,
        dry_run=dry_run,
        progress=progress,
        reread=sessions,
        size=_size(path),
        part_size=part_size,
        subject=f"Import chat transcripts from {Path(path).name}",
    )
    if not dry_run and not result.differing:  # a conflict is reported again next time
        digests.record(result.commit or mm.repository.head())
    result.unchanged_files = digests.skipped
    return result


def _keep_stored_times(mm: MemoryManager, found: ChatConversation) -> Session:
    """The session with the stored time of each turn whose time the file does not give:
    that time was derived (file mtime, position), and must not turn into a conflict."""
    session = found.session
    if not found.derived:
        return session
    stored = mm.load_memory(session.id)
    if stored is None:
        return session
    times = {turn.id: turn.timestamp for turn in stored.interactions}
    turns = [
        turn.model_copy(update={"timestamp": times[turn.id]})
        if turn.id in found.derived and turn.id in times
        else turn
        for turn in session.interactions
    ]
    update: dict[str, Any] = {"interactions": turns}
    if not found.timed:
        update["created"] = min(turn.timestamp for turn in turns)
        update["last_active"] = max(turn.timestamp for turn in turns)
    return session.model_copy(update=update)


def export_chat(mm: MemoryManager, session_id: str, *, commit: str | None = None) -> dict[str, Any]:
    """The session (with the turns a summary archived) as ``{"title"?, "messages",
    "timestamps"}``: ``messages`` a Chat Completions messages array the API takes as it is,
    ``timestamps`` beside it (one per message: its turn's time in whole seconds on a turn's
    first message, else null), so that ``import chat`` gives the same turns at the same
    times and exporting them again gives the same bytes. ``commit``: as of that commit.

    A message is ``{"role", "content"}``, plus ``"name"`` for a speaker that is not a role
    (``Caroline`` -> role ``user``, name ``Caroline``). The ``[tool: name {args}]`` lines an
    assistant message ends with become its ``tool_calls`` (``{id, type: "function",
    function: {name, arguments}}``, ids ``call_<n>`` counting through the session) when
    tool messages answer each of them, which then carry the ``tool_call_id``; a tool
    message no call asked for is sent as a user message named ``Tool``."""
    session = mm.load_memory(session_id, commit=commit, include_archive=True)
    if session is None:
        when = f" at {commit[:12]}" if commit else ""
        raise SessionNotFound(f"no session {session_id!r} in {mm.path}{when}")
    messages: list[dict[str, Any]] = []
    timestamps: list[str | None] = []
    for turn in session.interactions:
        for at, message in enumerate(turn.messages):
            messages.append(_as_message(message))
            timestamps.append(turn.timestamp.isoformat(timespec="seconds") if at == 0 else None)
    _pair_tool_calls(messages)
    title = session.extra.get("title")
    return {
        **({"title": title} if title else {}),
        "messages": messages,
        "timestamps": timestamps,
    }


def _as_message(message: Message) -> dict[str, Any]:
    name = message.speaker.casefold()
    if name in ROLES:
        return {"role": name, "content": message.content}
    if name in ASSISTANT_SPEAKERS or name in SYSTEM_SPEAKERS or name in USER_SPEAKERS:
        return {"role": message.role, "content": message.content}
    return {"role": "user", "name": message.speaker, "content": message.content}


def _pair_tool_calls(messages: list[dict[str, Any]]) -> None:
    """Tool call lines as ``tool_calls`` answered by the tool messages after them."""
    count = 0
    for at, message in enumerate(messages):
        if message["role"] == "tool" and "tool_call_id" not in message:
            message.update(role="user", name="Tool")  # no call asked for it
            message["content"] = message.pop("content")  # keep the key order
            continue
        if message["role"] != "assistant":
            continue
        text, calls = _tool_lines(message["content"])
        answers = 0
        while at + 1 + answers < len(messages) and messages[at + 1 + answers]["role"] == "tool":
            answers += 1
        if not calls or answers < len(calls):
            continue  # unanswered calls stay text: the API refuses them as tool_calls
        message["content"] = text or None
        message["tool_calls"] = []
        for offset, (name, arguments) in enumerate(calls, 1):
            count += 1
            call_id = f"call_{count}"
            function = {"name": name, "arguments": arguments}
            message["tool_calls"].append({"id": call_id, "type": "function", "function": function})
            messages[at + offset]["tool_call_id"] = call_id


def _tool_lines(content: str) -> tuple[str, list[tuple[str, str]]]:
    """The text before the ``[tool: name args]`` lines a message ends with, and the calls."""
    calls: list[tuple[str, str]] = []
    while content.endswith("]"):
        start = content.rfind("[tool: ")
        if start < 0 or (start > 0 and content[start - 1] != "\n"):
            break
        name, _, arguments = content[start + len("[tool: ") : -1].partition(" ")
        if not _TOOL_NAME.fullmatch(name):
            break
        calls.append((name, arguments or "{}"))
        content = content[: max(start - 1, 0)]
    return content, calls[::-1]


def _size(path: str | Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0  # read_chat says what is wrong with it
