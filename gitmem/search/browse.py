"""Browsing the store from the search index: a page of sessions, and the links between them.

:meth:`~gitmem.search.methods.Search.browse_sessions` and
:meth:`~gitmem.search.methods.Search.link_graph` answer from the index's session
rows (no session file is parsed, so a page out of 10,000 sessions costs a few SQLite
queries); this module holds what they return and the pure steps between rows and results.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from pydantic import Field

from gitmem.models import Result
from gitmem.search.sessionrows import SessionRow
from gitmem.text import one_line

# a summary preview is at most this many characters
PREVIEW_CHARS = 200


class SessionListing(Result):
    """One session as a page of ``browse_sessions`` lists it: its metadata, how many turns
    it holds (archived ones too) and the start of its summary."""

    session_id: str
    created: datetime | None = None
    last_active: datetime | None = None
    turns: int = 0
    tags: list[str] = Field(default_factory=list)
    participants: list[str] = Field(default_factory=list)
    project: str | None = None
    links: list[str] = Field(default_factory=list)
    summary: str | None = None  # the summary's text on one line, shortened


class SessionPage(Result):
    """A page of ``browse_sessions``: its sessions, and how many match the filters in all."""

    sessions: list[SessionListing] = Field(default_factory=list)
    total: int = 0
    offset: int = 0
    limit: int = 50
    commit: str | None = None  # the commit the listing reflects


class LinkGraph(Result):
    """Which sessions link to which (metadata ``links`` and ``[[id]]`` in their text).

    ``links`` maps each session that links to others to its targets (sorted); ``missing``
    lists the targets that are not sessions of the store (sorted).
    """

    links: dict[str, list[str]] = Field(default_factory=dict)
    missing: list[str] = Field(default_factory=list)
    commit: str | None = None


def _moment(stamp: float | None) -> datetime | None:
    return None if stamp is None else datetime.fromtimestamp(stamp, UTC)


def listing(row: SessionRow, turns: int, summary: str | None) -> SessionListing:
    """The listing of a session's main row."""
    return SessionListing(
        session_id=row.session_id,
        created=_moment(row.created),
        last_active=_moment(row.last_active),
        turns=turns,
        tags=list(row.tags),
        participants=list(row.participants),
        project=row.project,
        links=list(row.links),
        summary=None
        if summary is None or not summary.strip()
        else one_line(summary, PREVIEW_CHARS),
    )


def graph(
    links: Iterable[tuple[str, Iterable[str]]], known: set[str], commit: str | None
) -> LinkGraph:
    """The link graph of these (source session, its targets) pairs, several per source
    allowed (a session's link to itself and an empty target are left out); ``known``
    holds the store's session ids."""
    edges: dict[str, set[str]] = {}
    for source, targets in links:
        edges.setdefault(source, set()).update(targets)
    out: dict[str, list[str]] = {}
    for source, targets in sorted(edges.items()):
        kept = sorted({t.strip() for t in targets} - {"", source})
        if kept:
            out[source] = kept
    missing = sorted({t for ts in out.values() for t in ts} - known)
    return LinkGraph(links=out, missing=missing, commit=commit)
