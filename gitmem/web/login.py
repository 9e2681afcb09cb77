"""The login page: a browser trades the server's token for a cookie (only when a token is
set, which ``gitmem web`` requires off loopback)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gitmem.web.pages import form, redirect, render
from gitmem.web.security import AUTH_COOKIE, LOGIN_PATH, Security


def _safe_next(target: str) -> str:
    # only a path on this server: never a redirect to another site
    return target if target.startswith("/") and not target.startswith("//") else "/"


def login(request: Request) -> Response:
    security: Security = request.app.state.security
    target = _safe_next(request.query_params.get("next", "/"))
    if request.method == "GET":
        return render(
            request,
            "login.html",
            {"title": "Log in", "next": target, "needed": security.token is not None},
        )
    fields = form(request)
    target = _safe_next(fields.get("next", "/"))
    if not security.token_ok(fields.get("token", "")):
        return render(
            request,
            "login.html",
            {
                "title": "Log in",
                "next": target,
                "needed": True,
                "error": "that is not this server's token",
            },
            401,
        )
    response = redirect(target)
    response.set_cookie(AUTH_COOKIE, security.auth_cookie(), httponly=True, samesite="strict")
    return response


ROUTES: list[BaseRoute] = [Route(LOGIN_PATH, login, methods=["GET", "POST"], name="login")]
