"""What every page module shares: the manager, the form, rendering and paging.

Page code is a thin layer over :class:`~gitmem.manager.MemoryManager`: it reads query
parameters, calls the manager, and renders a template. Endpoints are plain functions:
Starlette runs them in its thread pool, so a slow git call never blocks the event loop.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any
from urllib.parse import unquote, urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse

from gitmem.errors import ValidationError
from gitmem.manager import MemoryManager

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


# the namespace a browser switched to (percent-encoded; empty: the default one)
NAMESPACE_COOKIE = "gitmem_ns"
NAMESPACE_FIELD = "namespace"  # in every form that writes: the namespace it was shown in


class StoreNamespaces:
    """The managers the dashboard shows: ``first``, the one it was started on, and, unless
    ``fixed`` to that one's namespace, one per namespace a browser switches to (opened on
    first use, kept until :meth:`close`)."""

    def __init__(self, first: MemoryManager, *, fixed: bool = False) -> None:
        self.first = first
        self.fixed = fixed
        self._opened: dict[str | None, MemoryManager] = {first.namespace: first}
        self._lock = threading.Lock()

    def choices(self) -> list[str | None]:
        """The namespaces a browser may switch between (none when fixed, or only one)."""
        if self.fixed:
            return []
        found: list[str | None] = [None, *self.first.namespaces()]
        return found if len(found) > 1 else []

    def get(self, name: str | None) -> MemoryManager:
        """The manager of namespace ``name``; ``first`` for one the switcher does not offer."""
        if name not in self.choices():
            return self.first
        with self._lock:
            found = self._opened.get(name)
            if found is None:
                found = self._opened[name] = MemoryManager(
                    self.first.path,
                    agent=self.first.agent,
                    model=self.first.model,
                    via=self.first.via,
                    namespace=name,
                )
            return found

    def close(self) -> None:
        """Close the managers opened here (not ``first``: its owner closes it)."""
        with self._lock:
            for opened in self._opened.values():
                if opened is not self.first:
                    opened.close()
            self._opened = {self.first.namespace: self.first}


def manager(request: Request) -> MemoryManager:
    """The store this server shows, in the namespace the browser switched to; for a form,
    the namespace the form was shown in (a switch in another tab since must not move a
    confirmed undo to another person's memory)."""
    stores: StoreNamespaces = request.app.state.stores
    fields = form(request)
    if NAMESPACE_FIELD in fields:
        wanted = fields[NAMESPACE_FIELD] or None
        found = stores.get(wanted)
        if found.namespace != wanted:
            raise ValidationError(
                f"this form was shown for namespace {wanted or '(default)'!r}, which this "
                "dashboard does not serve; reload the page. Nothing was changed."
            )
        return found
    raw = request.cookies.get(NAMESPACE_COOKIE)
    if raw is None or stores.fixed:
        return stores.first
    return stores.get(unquote(raw) or None)


def form(request: Request) -> dict[str, str]:
    """The fields of a POSTed form, CSRF-checked by :class:`gitmem.web.security.WebGuard`."""
    fields: dict[str, str] = request.scope.get("state", {}).get("form", {})
    return fields


def param(request: Request, name: str, default: str = "") -> str:
    """A query parameter, stripped ('' when absent)."""
    return request.query_params.get(name, default).strip()


def int_param(
    request: Request, name: str, default: int, low: int = 1, high: int = 1_000_000
) -> int:
    """A whole-number query parameter within [low, high], or a ValidationError naming it."""
    raw = param(request, name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError(
            f"the parameter {name!r} must be a whole number, not {raw[:40]!r}"
        ) from None
    if not low <= value <= high:
        raise ValidationError(
            f"the parameter {name!r} must be between {low} and {high}, not {value}"
        )
    return value


def render(
    request: Request, template: str, context: Mapping[str, Any], status: int = 200
) -> HTMLResponse:
    """``template`` rendered with ``context`` plus what every page needs (request, CSRF
    token, the store)."""
    templates = request.app.state.templates
    full = {
        "csrf": request.scope.get("state", {}).get("csrf", ""),
        "store": manager(request),
        "options": request.app.state.options,
        "namespaces": request.app.state.stores.choices(),
        **context,
    }
    response: HTMLResponse = templates.TemplateResponse(request, template, full, status_code=status)
    return response


def redirect(url: str) -> RedirectResponse:
    """After a POST: see the result with a GET (the browser's back button never re-posts)."""
    return RedirectResponse(url, status_code=303)


@dataclass
class Paging:
    """A page of a longer list: ``page`` (1-based), its size and the total when known."""

    page: int
    size: int
    total: int | None = None

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.size

    @property
    def pages(self) -> int | None:
        return None if self.total is None else max(1, -(-self.total // self.size))

    def link(self, request: Request, page: int) -> str:
        """This page's URL with ``page`` changed, every other parameter kept."""
        kept = [(k, v) for k, v in request.query_params.multi_items() if k != "page"]
        return f"{request.url.path}?{urlencode([*kept, ('page', str(page))])}"


def paging(request: Request, total: int | None = None) -> Paging:
    """The page asked for by ``?page=`` and ``?size=``."""
    return Paging(
        int_param(request, "page", 1),
        int_param(request, "size", PAGE_SIZE, 1, MAX_PAGE_SIZE),
        total,
    )


def local_zone() -> tzinfo:
    """The zone times are shown in: the server's own (a dashboard runs beside its user)."""
    zone = datetime.now().astimezone().tzinfo
    return zone if zone is not None else UTC


def zone_name() -> str:
    """The shown zone's short name, for a table header (``UTC``, ``CET``)."""
    return datetime.now(local_zone()).tzname() or "UTC"


def stamp(value: datetime | None) -> str:
    """A time in the shown zone, named: ``2026-03-02 10:00 CET``."""
    if value is None:
        return ""
    return value.astimezone(local_zone()).strftime("%Y-%m-%d %H:%M %Z")


_UNITS: tuple[tuple[int, str], ...] = (
    (365 * 86400, "year"),
    (30 * 86400, "month"),
    (7 * 86400, "week"),
    (86400, "day"),
    (3600, "hour"),
    (60, "minute"),
)


def ago(value: datetime | None, now: datetime | None = None) -> str:
    """How long ago ``value`` was, as people say it: ``3 hours ago``, ``just now``."""
    if value is None:
        return ""
    seconds = ((now or datetime.now(UTC)) - value).total_seconds()
    if seconds < 0:
        return "in the future"
    for size, unit in _UNITS:
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'' if count == 1 else 's'} ago"
    return "just now"


def when(value: datetime | float | None) -> str:
    """A time as people read it in a list: ``2026-11-30 14:02`` (UTC)."""
    if value is None:
        return ""
    if not isinstance(value, datetime):
        value = datetime.fromtimestamp(value, UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


# Markdown marks that mean nothing in a one-line label (a title, a summary's first line)
_MARKS = re.compile(r"\*\*|__|\[\[|\]\]|`|^\s*(?:[-*+>]|#{1,6}|\d+[.)])\s+")


def words(text: str, limit: int) -> str:
    """``text`` on one line, cut at a whole word to at most ``limit`` characters (then an
    ellipsis); a word longer than that is cut where it must be."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:.-") + "…"


def plain_line(text: str, limit: int) -> str:
    """The first non-empty line of Markdown ``text`` without its marks, cut at a word."""
    for line in text.splitlines():
        shown = _MARKS.sub("", line).strip()
        if shown:
            return words(shown, limit)
    return ""
