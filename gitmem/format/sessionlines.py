"""Session files in gitmem's own form, merged by turn block without building a ``Session``.

git starts the merge driver once per session file that both sides changed, and the usual
case is two clones that each appended turns: the models' import alone costs more than the
whole merge. A file as ``render`` writes it is a fixed head (title, metadata list, the
conversation heading) and one block per turn (``### <time> {#id}``, then ``**Speaker**:``
and ``>`` lines per message). For the strict form read here (English labels, no custom
metadata, no summary, no escaped message, values and speakers that need no escapes, aware
timestamps written as ``isoformat`` writes them, at least one turn) the parser reads each
block and the head back to values that render to the same text, so two blocks are equal
turns exactly when their timestamps are equal and the rest of their text is equal.
:func:`merge_session_lines` then does what the session merge
(:func:`gitmem.sync.merge.merge_sessions`) does, on those texts, and writes what its render
writes, byte for byte. Whatever that merge would note (a value or a turn changed on both
sides, a turn deleted on one side and edited on the other) or any version not in this form,
it declines: None, and the caller runs the full parse and merge.

The turn order both merges share (:func:`turn_order`) lives here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

TITLE = "# Session: "
HEADING = "\n\n## Conversation\n"
# render's metadata keys in its order; the first three are always written
KEYS = ("Session ID", "Created", "Last active", "Participants", "Tags", "Project", "Links")

_ID = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}"
# a label (speaker, tag, participant, project) that needs nothing escaped nor checked apart
_LABEL = r"[^\s*`\\\[\]<>|,:\uff1a]+(?: [^\s*`\\\[\]<>|,:\uff1a]+)*"
_LABEL_RE = re.compile(_LABEL)
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@/+-]*")
_LINK = re.compile(r"\[\[([A-Za-z0-9][A-Za-z0-9_.@/+-]*)\]\]")
# one turn block as render writes it: a quote line is ">" (an empty line) or "> " and text
_MESSAGE = rf"\*\*{_LABEL}\*\*:\n(?:>(?: [^\n]+)?\n)+\n"
_BLOCK = re.compile(rf"### ([^\s{{}}]+) \{{#({_ID})\}}\n(?:\n|(?:{_MESSAGE})+)")


class Timed(Protocol):
    """A turn as the ordering rule sees it."""

    @property
    def id(self) -> str: ...

    @property
    def timestamp(self) -> datetime: ...


T = TypeVar("T", bound=Timed)


@dataclass(frozen=True)
class TurnBlock:
    """One turn of a file in the strict form: its id, time, text, and the text after its
    heading line (equal timestamps and equal bodies: equal turns)."""

    id: str
    timestamp: datetime
    text: str
    body: str

    def same_turn(self, other: TurnBlock | None) -> bool:
        """Whether ``other`` is the same turn (as the models compare them)."""
        return other is not None and (
            self.text == other.text
            or (self.body == other.body and self.timestamp == other.timestamp)
        )


@dataclass(frozen=True)
class SessionLines:
    """A session file in the strict form: its metadata values and its turns."""

    id: str
    created: tuple[datetime, str]
    last_active: tuple[datetime, str]
    participants: tuple[str, ...]
    tags: tuple[str, ...]
    project: str | None
    links: tuple[str, ...]
    turns: tuple[TurnBlock, ...]


def _stamp(text: str) -> datetime | None:
    """The aware datetime ``text`` is the ``isoformat`` of, or None."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None or when.isoformat() != text:
        return None
    return when


def _labels(value: str) -> tuple[str, ...] | None:
    items = value.split(", ")
    return tuple(items) if all(_LABEL_RE.fullmatch(item) for item in items) else None


def read_head(text: str) -> dict[str, object] | None:
    """The metadata values of a head in the strict form (the text before the conversation
    heading), or None."""
    lines = text.split("\n")
    if len(lines) < 6 or lines[1] or lines[2] != "## Metadata":
        return None
    values: dict[str, object] = {}
    at = 0
    for line in lines[3:]:
        key, sep, value = line[4:].partition("**: ")
        if line[:4] != "- **" or not sep or not value or key not in KEYS[at:]:
            return None
        at = KEYS.index(key) + 1
        if key in ("Created", "Last active"):
            when = _stamp(value)
            parsed: object = None if when is None else (when, value)
        elif key in ("Participants", "Tags"):
            parsed = _labels(value)
        elif key == "Project":
            parsed = value if _LABEL_RE.fullmatch(value) else None
        elif key == "Links":
            links = value.split(", ")
            found = [_LINK.fullmatch(link) for link in links]
            parsed = tuple(m.group(1) for m in found if m) if all(found) else None
        else:
            parsed = value if _SESSION_ID.fullmatch(value) and lines[0] == TITLE + value else None
        if parsed is None:
            return None
        values[key] = parsed
    if not {"Session ID", "Created", "Last active"} <= set(values):
        return None
    return values


def read_turns(text: str) -> tuple[TurnBlock, ...] | None:
    """The turn blocks ``text`` consists of (each ending in its blank line), or None."""
    turns: list[TurnBlock] = []
    pos = 0
    while pos < len(text):
        found = _BLOCK.match(text, pos)
        if found is None:
            return None
        when = _stamp(found.group(1))
        if when is None:
            return None
        block = found.group(0)
        turns.append(TurnBlock(found.group(2), when, block, block[block.index("\n") :]))
        pos = found.end()
    return tuple(turns)


def read_session_lines(data: bytes) -> SessionLines | None:
    """A session file's values and turn blocks when it is exactly in the strict form."""
    try:
        src = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = src.replace("\n", "")
    if not lines.isprintable() and not all(ch.isprintable() or ch == "\t" for ch in lines):
        return None  # a character render escapes, a CR, or the parser's placeholder
    head, sep, rest = src.partition(HEADING)
    # render drops the blank line that ends the last turn
    if not sep or rest[:1] != "\n" or rest[-2:] == "\n\n":
        return None
    values = read_head(head)
    turns = read_turns(rest[1:] + "\n")
    if values is None or not turns or len({t.id for t in turns}) != len(turns):
        return None
    return SessionLines(
        id=str(values["Session ID"]),
        created=values["Created"],  # type: ignore[arg-type]
        last_active=values["Last active"],  # type: ignore[arg-type]
        participants=values.get("Participants", ()),  # type: ignore[arg-type]
        tags=values.get("Tags", ()),  # type: ignore[arg-type]
        project=values.get("Project"),  # type: ignore[arg-type]
        links=values.get("Links", ()),  # type: ignore[arg-type]
        turns=turns,
    )


def merge_session_lines(base: bytes | None, ours: bytes, theirs: bytes) -> bytes | None:
    """The merged file (what the session merge renders) when each version is in the strict
    form and the merge notes nothing; else None."""
    old = None if base is None else read_session_lines(base)
    mine = read_session_lines(ours)
    other = read_session_lines(theirs)
    if (base is not None and old is None) or mine is None or other is None:
        return None
    if mine.id != other.id or (old is not None and old.id != mine.id):
        return None  # the session merge refuses it, with a message
    old_project = old.project if old else None
    if mine.project == other.project or other.project == old_project:
        project = mine.project
    elif mine.project == old_project:
        project = other.project
    else:
        return None  # changed on both sides: a note
    turns = merge_turn_blocks(old.turns if old else (), mine.turns, other.turns)
    if turns is None:
        return None
    head = [
        f"{TITLE}{mine.id}",
        "",
        "## Metadata",
        f"- **Session ID**: {mine.id}",
        f"- **Created**: {_earlier(mine, other)}",
        f"- **Last active**: {_later(mine, other)}",
    ]
    lists = [
        ("Participants", merge_list(old, mine, other, "participants")),
        ("Tags", merge_list(old, mine, other, "tags")),
        ("Project", [project] if project else []),
        ("Links", [f"[[{link}]]" for link in merge_list(old, mine, other, "links")]),
    ]
    head += [f"- **{key}**: {', '.join(items)}" for key, items in lists if items]
    text = "\n".join([*head, "", "## Conversation", ""]) + "\n" + "".join(t.text for t in turns)
    while text.endswith("\n\n"):
        text = text[:-1]
    return text.encode("utf-8")


def _earlier(ours: SessionLines, theirs: SessionLines) -> str:
    """The created time ``min`` keeps (ours on a tie), as written."""
    return theirs.created[1] if theirs.created[0] < ours.created[0] else ours.created[1]


def _later(ours: SessionLines, theirs: SessionLines) -> str:
    """The last-active time ``max`` keeps (ours on a tie), as written."""
    return (
        theirs.last_active[1]
        if theirs.last_active[0] > ours.last_active[0]
        else ours.last_active[1]
    )


def merge_list(
    base: SessionLines | None, ours: SessionLines, theirs: SessionLines, name: str
) -> list[str]:
    """The session merge's three-way union of a list field."""
    old: Sequence[str] = getattr(base, name) if base else ()
    mine: Sequence[str] = getattr(ours, name)
    other: Sequence[str] = getattr(theirs, name)
    removed = (set(old) - set(mine)) | (set(old) - set(other))
    return [item for item in dict.fromkeys([*mine, *other]) if item not in removed]


def merge_turn_blocks(
    base: Sequence[TurnBlock], ours: Sequence[TurnBlock], theirs: Sequence[TurnBlock]
) -> list[TurnBlock] | None:
    """The session merge's turns when no turn needs a note (else None)."""
    was = {t.id: t for t in base}
    a = {t.id: t for t in ours}
    b = {t.id: t for t in theirs}
    chosen: dict[str, TurnBlock] = {}
    for tid in dict.fromkeys([*a, *b]):
        mine, other, old = a.get(tid), b.get(tid), was.get(tid)
        if mine is not None and other is not None:
            if mine.same_turn(other) or other.same_turn(old):
                chosen[tid] = mine
            elif mine.same_turn(old):
                chosen[tid] = other
            else:
                return None  # edited on both sides: a note
        elif old is None:
            chosen[tid] = mine or other  # type: ignore[assignment]  # added on one side
        elif not old.same_turn(mine or other):
            return None  # deleted on one side, edited on the other: a note
    left = [t for t in ours if t.id in chosen]
    right = [t for t in theirs if t.id in chosen]
    same = [x.text == y.text for x, y in zip(left, right, strict=False)]
    start = same.index(False) if False in same else len(same)
    return [chosen[tid] for tid in turn_order(left, right, set(a) & set(b), start)]


def turn_order(left: Sequence[T], right: Sequence[T], shared: set[str], start: int) -> list[str]:
    """The ids of two sides' turns in merged order: ``left[:start]`` (the same turns as
    ``right[:start]``), then both sides' turns, each side's order kept, a turn new on one
    side before the next turn both have, and turns new on both interleaved by (timestamp, id)."""
    order = [t.id for t in left[:start]]
    done = set(order)
    i = j = start
    while True:
        while i < len(left) and left[i].id in done:
            i += 1
        while j < len(right) and right[j].id in done:
            j += 1
        if i >= len(left) and j >= len(right):
            return order
        if j >= len(right):
            take = left[i]
        elif i >= len(left):
            take = right[j]
        else:
            take = _first(left[i], right[j], shared)
        order.append(take.id)
        done.add(take.id)


def _first(a: T, b: T, shared: set[str]) -> T:
    a_new, b_new = a.id not in shared, b.id not in shared
    if a_new and b_new:
        return a if (a.timestamp, a.id) <= (b.timestamp, b.id) else b
    return b if b_new and not a_new else a
