"""The namespace switcher: a GET form in the header (no script) that remembers the chosen
namespace in a cookie and goes back to the page it was on."""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gitmem.web.pages import NAMESPACE_COOKIE, StoreNamespaces, param, redirect


def _same_site(target: str) -> str:
    # only a path on this server: never a redirect to another site ("//x" and "/\x" are)
    if target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return "/sessions"


def switch(request: Request) -> Response:
    """Show namespace ``to`` ('' the default one) from now on, on the page ``back``."""
    stores: StoreNamespaces = request.app.state.stores
    name = param(request, "to") or None
    response = redirect(_same_site(param(request, "back", "/sessions")))
    if name in stores.choices():
        response.set_cookie(
            NAMESPACE_COOKIE, quote(name or "", safe=""), httponly=True, samesite="strict"
        )
    return response


ROUTES: list[BaseRoute] = [Route("/namespace", switch, name="namespace")]
