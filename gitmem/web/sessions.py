"""The sessions list (``/sessions``) and one session (``/sessions/{id}``).

The list is one page of :meth:`~gitmem.search.methods.Search.browse_sessions`
(answered from the search index, so 10,000 sessions stay fast). A session shows its
metadata, summary and turns, rendered by the ``md`` filter (memory content is untrusted:
raw HTML shows as text); ``?blame=1`` adds who wrote each turn, ``?at=REV`` shows the
session as of a revision (a sha or an ISO date) with a link to roll it back there.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gitmem.errors import SessionNotFound, ValidationError
from gitmem.manager import MemoryManager
from gitmem.models import BlameEntry, Revision, Session, as_when
from gitmem.search.browse import SessionListing
from gitmem.web.pages import manager, paging, param, plain_line, render, zone_name

# revisions offered by the "as of" picker
REVISIONS_SHOWN = 50
TITLE_CHARS = 70
SUMMARY_CHARS = 140
# a participant that is a file (OpenClaw names a memory file's session after the file)
_FILE_NAME = re.compile(r".+\.(?:md|markdown|txt|jsonl?|ya?ml)", re.IGNORECASE)


@dataclass(frozen=True)
class SessionCard:
    """What the sessions list shows of a session beyond its index row: a title, the
    summary's first line, and its participants split into people and files."""

    title: str
    summary: str
    people: tuple[str, ...]
    files: tuple[str, ...]


def card_of(session: Session) -> SessionCard:
    """The card of a loaded session: its ``title`` metadata, else its first user line."""
    title = plain_line(session.extra.get("title", ""), TITLE_CHARS)
    if not title:
        lines = (m.content for i in session.interactions for m in i.messages if m.role == "user")
        title = next((t for t in (plain_line(x, TITLE_CHARS) for x in lines) if t), "")
    summary = plain_line(session.summary.text, SUMMARY_CHARS) if session.summary else ""
    files = tuple(p for p in session.participants if _FILE_NAME.fullmatch(p))
    people = tuple(p for p in session.participants if p not in files)
    return SessionCard(title or session.id, summary, people, files)


class SessionCards:
    """The cards of listed sessions, read from their files once and kept (a page of 50
    would otherwise parse 50 files). A card is read again when its session's index row
    changes (a new turn, a new summary)."""

    def __init__(self, size: int = 20_000) -> None:
        self.size = size
        self._cards: OrderedDict[tuple[Any, ...], SessionCard] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, mm: MemoryManager, row: SessionListing) -> SessionCard:
        key = (mm.path, mm.namespace, row.session_id, row.last_active, row.turns, row.summary)
        with self._lock:
            found = self._cards.get(key)
            if found is not None:
                self._cards.move_to_end(key)
                return found
        # the archive part is not read: it would double a cold page (its first line is rarely
        # needed: an imported title, or the first turn still in the file, stands in)
        session = mm.load_memory(row.session_id)
        card = card_of(session) if session else SessionCard(row.session_id, "", (), ())
        with self._lock:
            self._cards[key] = card
            while len(self._cards) > self.size:
                self._cards.popitem(last=False)
        return card


def _until(raw: str) -> str | None:
    """The ``until`` filter: a plain date means the end of that day."""
    if not raw:
        return None
    if len(raw) == 10:
        try:
            day = date.fromisoformat(raw)
        except ValueError:
            raise ValidationError(
                f"until: {raw!r} is not an ISO date or date-time (e.g. 2024-04-15)"
            ) from None
        return (day + timedelta(days=1)).isoformat() + "T00:00:00+00:00"
    as_when(raw, "until")  # a clear error naming the field
    return raw


def sessions_page(request: Request) -> Response:
    mm = manager(request)
    filters = {
        name: param(request, name) for name in ("tag", "participant", "project", "since", "until")
    }
    pages = paging(request)
    until = _until(filters["until"])
    found = mm.browse_sessions(
        tags=[t for t in (x.strip() for x in filters["tag"].split(",")) if t],
        participant=filters["participant"] or None,
        project=filters["project"] or None,
        since=filters["since"] or None,
        until=until,
        offset=pages.offset,
        limit=pages.size,
    )
    pages.total = found.total
    cards: SessionCards = request.app.state.session_cards
    return render(
        request,
        "sessions.html",
        {
            "title": "Sessions",
            "filters": filters,
            "found": found,
            "cards": {row.session_id: cards.get(mm, row) for row in found.sessions},
            "zone": zone_name(),
            "paging": pages,
            "prev": pages.link(request, pages.page - 1) if pages.page > 1 else None,
            "next": pages.link(request, pages.page + 1)
            if pages.pages is not None and pages.page < pages.pages
            else None,
        },
    )


def _revisions(request: Request, session_id: str) -> list[Revision]:
    return manager(request).history(session_id=session_id, limit=REVISIONS_SHOWN)


def session_page(request: Request) -> Response:
    mm = manager(request)
    session_id: str = request.path_params["session_id"]
    at = param(request, "at")
    blamed = param(request, "blame") == "1"
    commit = mm.resolve(at) if at else None
    session = mm.load_memory(session_id, commit=commit, include_archive=True)
    if session is None:
        where = f" at {commit[:12]}" if commit else ""
        raise SessionNotFound(f"no session {session_id!r}{where}: see the sessions list")
    archived = mm.load_archive(session_id, commit=commit)
    blame: dict[str, BlameEntry] = {}
    if blamed:
        for entry in mm.blame(session_id, commit=commit):
            blame[entry.interaction_id or ""] = entry  # "" is the summary
    revisions = _revisions(request, session_id)
    context: dict[str, Any] = {
        "title": f"Session {session_id}",
        "session": session,
        "session_id": session_id,
        "at": at,
        "commit": commit,
        "blamed": blamed,
        "blame": blame,
        "revisions": revisions,
        "archived": {t.id for t in archived.interactions} if archived else set(),
        "head": mm.head(),
    }
    return render(request, "session.html", context)


ROUTES: list[BaseRoute] = [
    Route("/sessions", sessions_page, name="sessions"),
    Route("/sessions/{session_id:path}", session_page, name="session"),
]
