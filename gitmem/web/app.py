"""The dashboard's Starlette application: routes of every page module, templates, errors.

:func:`create_app` wraps one :class:`~gitmem.manager.MemoryManager`; ``gitmem web``
(:mod:`gitmem.web.run`) serves it with uvicorn, and tests drive it with Starlette's
TestClient or a real browser.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from gitmem.errors import (
    ConflictError,
    FactNotFound,
    GitmemError,
    InvalidSessionId,
    ReadOnlyError,
    RevisionNotFound,
    SessionNotFound,
    SummaryLossError,
    ValidationError,
)
from gitmem.format.html import MarkdownHtml
from gitmem.manager import MemoryManager
from gitmem.web import (
    facts,
    history,
    links,
    login,
    namespaces,
    reviews,
    search,
    sessions,
    undo,
)
from gitmem.web.pages import StoreNamespaces, ago, redirect, render, stamp, when
from gitmem.web.security import Security, WebGuard

HERE = Path(__file__).resolve().parent


@dataclass
class WebOptions:
    """What the dashboard allows: ``read_only`` hides and refuses every undo and review
    action; ``token`` and ``hosts`` go to :class:`gitmem.web.security.Security`;
    ``fixed_namespace`` keeps it to the manager's namespace (else a store with several
    offers a switcher)."""

    token: str | None = None
    hosts: tuple[str, ...] | None = None
    read_only: bool = False
    # the manager's namespace only (gitmem web --namespace): no switcher to the others
    fixed_namespace: bool = False


_STATUS: list[tuple[type[Exception], int]] = [
    (SessionNotFound, 404),
    (RevisionNotFound, 404),
    (FactNotFound, 404),
    (InvalidSessionId, 404),
    (ConflictError, 409),
    (SummaryLossError, 409),
    (ReadOnlyError, 403),
    (ValidationError, 400),
]


def status_of(exc: Exception) -> int:
    """The HTTP status a gitmem error is shown with."""
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return status
    return 500


def _templates(markdown: MarkdownHtml) -> Jinja2Templates:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["md"] = lambda text: Markup(markdown(text or ""))
    env.filters["when"] = when
    env.filters["ago"] = ago
    env.filters["stamp"] = stamp
    env.filters["shalinks"] = history.linked_shas
    env.filters["short"] = lambda sha: (sha or "")[:8]
    return Jinja2Templates(env=env)


async def _gitmem_error(request: Request, exc: Exception) -> Response:
    status = status_of(exc)
    # the error page is shown where the browser is, not where a refused form pointed
    request.scope.get("state", {}).pop("form", None)
    return render(
        request,
        "error.html",
        {"title": type(exc).__name__, "message": str(exc), "status": status},
        status,
    )


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return render(
        request,
        "error.html",
        {"title": f"HTTP {exc.status_code}", "message": exc.detail, "status": exc.status_code},
        exc.status_code,
    )


def _home(_request: Request) -> Response:
    return redirect("/sessions")


def create_app(mm: MemoryManager, options: WebOptions | None = None) -> Starlette:
    """The dashboard for ``mm``, behind the security middleware. The caller closes ``mm``;
    ``app.state.stores.close()`` closes the other namespaces' managers it opened."""
    options = options or WebOptions()
    routes: list[BaseRoute] = [
        Route("/", _home, name="home"),
        *sessions.ROUTES,
        *search.ROUTES,
        *history.ROUTES,
        *undo.ROUTES,
        *reviews.ROUTES,
        *links.ROUTES,
        *facts.ROUTES,
        *login.ROUTES,
        *namespaces.ROUTES,
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(
        routes=routes, exception_handlers={GitmemError: _gitmem_error, HTTPException: _http_error}
    )
    app.state.stores = StoreNamespaces(mm, fixed=options.fixed_namespace)
    app.state.options = options
    app.state.markdown = MarkdownHtml(lambda target: "/sessions/" + target)
    app.state.templates = _templates(app.state.markdown)
    app.state.session_cards = sessions.SessionCards()
    app.state.link_drawings = links.LinkDrawings()
    security = Security(token=options.token, hosts=options.hosts)
    app.state.security = security
    app.add_middleware(WebGuard, security=security)
    return app
