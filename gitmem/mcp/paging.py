"""``load_session`` in pages: an answer the SDK's client can read whatever the session's size.

The client reads one answer as one server-sent event of at most 1 MiB, and an answer carries
the session twice (the Markdown for the model and the structured content), each with JSON's
escapes; a turn of a few hundred KB would already be refused. So a page holds as many turns
as fit a byte budget, and a turn too large for one page is split: each piece repeats the
turn's id, and a piece whose first message continues the previous piece's last one marks
that message ``"continues": true``. The cursor of the next page, ``"T.M.C"`` (turn, message,
character; ``"T"`` when a page starts on a whole turn), counts turns from the first one the
call selects (after ``last``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from gitmem.errors import ValidationError
from gitmem.format.render import render
from gitmem.models import Interaction, Message, Session

# the estimated JSON of one copy of a page's turns; two copies and the rest of the session
# stay well under the client's 1 MiB event
PAGE_BYTES = 256 * 1024
# what a whole answer may measure; above it the page is built again with half the budget
ANSWER_MAX_BYTES = 900 * 1024
_CURSOR = re.compile(r"(\d{1,9})(?:\.(\d{1,9})\.(\d{1,12}))?")
_OVERHEAD = 100  # a message's speaker, keys and Markdown beside its content


@dataclass(frozen=True)
class Cursor:
    """Where a page starts: a turn, a message of it, a character of that message."""

    turn: int = 0
    message: int = 0
    char: int = 0

    def __str__(self) -> str:
        if not (self.message or self.char):
            return str(self.turn)
        return f"{self.turn}.{self.message}.{self.char}"


def parse_cursor(text: str | None) -> Cursor:
    if text is None or not text.strip():
        return Cursor()
    found = _CURSOR.fullmatch(text.strip())
    if found is None:
        raise ValidationError(
            f"cursor: {text[:40]!r} is not a cursor this server gave "
            "(the 'next' of a load_session answer, e.g. '12' or '3.0.250000')"
        )
    turn, message, char = (int(g) if g else 0 for g in found.groups())
    return Cursor(turn, message, char)


def _cost(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def _fit(text: str, budget: int) -> int:
    """How many leading characters of ``text`` cost at most ``budget`` (at least 1)."""
    low, high = 1, min(len(text), max(budget, 1))
    while low < high:
        mid = (low + high + 1) // 2
        if _cost(text[:mid]) <= budget:
            low = mid
        else:
            high = mid - 1
    return low


@dataclass
class Page:
    turns: list[Interaction]
    # the message dicts that continue the previous piece (turn index in ``turns``)
    continues: int | None
    next: Cursor | None


def page(
    turns: list[Interaction], start: Cursor, limit: int | None, budget: int = PAGE_BYTES
) -> Page:
    """The turns from ``start`` that fit ``budget`` (and ``limit`` turns), and the cursor of
    the rest."""
    if start.turn > len(turns) or (start.turn == len(turns) and (start.message or start.char)):
        raise ValidationError(f"cursor: {start} is past the session's {len(turns)} turns")
    if start.turn < len(turns):
        first = turns[start.turn]
        if start.message >= max(len(first.messages), 1) or (
            first.messages and start.char > len(first.messages[start.message].content)
        ):
            raise ValidationError(f"cursor: {start} does not point into turn {start.turn}")
    out: list[Interaction] = []
    left = budget
    at = start
    continues = 0 if start.char else None
    while at.turn < len(turns) and (limit is None or len(out) < limit):
        turn = turns[at.turn]
        taken: list[Message] = []
        cut: Cursor | None = None
        for index in range(at.message, len(turn.messages)):
            said = turn.messages[index]
            content = said.content[at.char :] if index == at.message else said.content
            cost = _cost(content) + _OVERHEAD
            if cost <= left:
                taken.append(
                    said
                    if content is said.content
                    else said.model_copy(update={"content": content})
                )
                left -= cost
                continue
            if out or taken:
                if left > 4 * _OVERHEAD:  # room for a piece of it
                    n = _fit(content, left - _OVERHEAD)
                    taken.append(said.model_copy(update={"content": content[:n]}))
                    offset = (at.char if index == at.message else 0) + n
                    cut = Cursor(at.turn, index, offset)
                else:
                    cut = Cursor(at.turn, index, at.char if index == at.message else 0)
            else:  # the page's first message: a piece of it, however small the budget
                n = _fit(content, max(left - _OVERHEAD, 1))
                taken.append(said.model_copy(update={"content": content[:n]}))
                cut = Cursor(at.turn, index, (at.char if index == at.message else 0) + n)
            left = 0
            break
        if taken or not turn.messages:
            out.append(turn.model_copy(update={"messages": taken}))
        if cut is not None:
            if cut.message == 0 and cut.char == 0:
                cut = Cursor(cut.turn)
            return Page(out, continues, cut)
        at = Cursor(at.turn + 1)
    return Page(out, continues, at if at.turn < len(turns) else None)


def as_data(session: Session, found: Page) -> dict[str, Any]:
    """The page's structured content: the session with the page's turns, the continuing
    message marked, and ``next``."""
    shown = session.model_copy(update={"interactions": found.turns})
    data = shown.to_dict()
    if found.continues is not None and data["interactions"]:
        messages = data["interactions"][found.continues]["messages"]
        if messages:
            messages[0]["continues"] = True
    return data


def answer(
    session: Session, turns: list[Interaction], cursor: str | None, limit: int | None
) -> tuple[str, dict[str, Any]]:
    """One page of ``turns`` (the session's, or its last N) from ``cursor``: the Markdown
    (with how to ask for the rest) and the structured content (with ``next`` and
    ``total_interactions``)."""
    start = parse_cursor(cursor)
    budget = PAGE_BYTES
    while True:
        found = page(turns, start, limit, budget)
        data = as_data(session, found)
        data["next"] = None if found.next is None else str(found.next)
        data["total_interactions"] = len(turns)
        text = render(session.model_copy(update={"interactions": found.turns}))
        if found.next is not None:
            text += f"\n\n(more turns follow: call load_session again with cursor={data['next']!r})"
        size = _cost(text) + len(
            json.dumps(data, ensure_ascii=False).encode("utf-8", "surrogatepass")
        )
        if size <= ANSWER_MAX_BYTES or budget <= 4 * 1024:
            return text, data
        budget //= 2  # Markdown escapes or a long summary: a smaller page
