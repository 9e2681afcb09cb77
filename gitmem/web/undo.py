"""The Undo pages: revert a commit, roll a session back, undo an agent's window.

Each action is two steps, as the issue asks: a GET shows a dry-run preview of what would
change (nothing is written), and a POST from that page's confirm form does it, then
redirects (303) to the new commit's diff. A conflict is shown with gitmem's own message
(status 409) on the preview, before confirming when it can be known then, and again if a
write made between preview and confirm causes one. Read-only servers show the previews
without forms and refuse every POST with ReadOnlyError (403).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gitmem.errors import ConflictError, GitmemError, ReadOnlyError, ValidationError
from gitmem.models import Diff, UndoResult
from gitmem.web.pages import form, manager, param, redirect, render

RECENT = 20
AGENT_FIELDS = ("agent", "model", "op", "since", "until")


def refuse_if_read_only(request: Request, what: str) -> None:
    """Raise ReadOnlyError (403) when this server only shows, never writes."""
    if request.app.state.options.read_only:
        raise ReadOnlyError(
            f"this dashboard is read-only: {what} is refused and nothing was "
            "written (start `gitmem web` without --read-only to allow it)"
        )


def _status(exc: GitmemError) -> int:
    return 409 if isinstance(exc, ConflictError) else 400


def landing(request: Request) -> Response:
    """/undo: the three forms and the newest commits, each with a revert link."""
    commits = manager(request).history(limit=RECENT)
    return render(request, "undo.html", {"title": "Undo", "commits": commits})


def by_form(request: Request) -> Response:
    """/undo/revert?sha= and /undo/rollback?session=&to= (the landing's GET forms): on to
    the preview's own address."""
    if request.url.path == "/undo/revert":
        sha = param(request, "sha")
        if not sha:
            raise ValidationError("say which commit to revert: the field 'sha' is empty")
        return redirect(f"/undo/revert/{quote(sha, safe='')}")
    session_id = param(request, "session")
    if not session_id:
        raise ValidationError("say which session to roll back: the field 'session' is empty")
    to = param(request, "to")
    query = f"?to={quote(to, safe='')}" if to else ""
    return redirect(f"/undo/rollback/{quote(session_id)}{query}")


# --- revert ----------------------------------------------------------------------------------


def _revert_page(
    request: Request, sha: str, *, error: str = "", notice: str = "", status: int = 200
) -> Response:
    mm = manager(request)
    context: dict[str, Any] = {
        "title": f"Revert {sha[:12]}",
        "kind": "revert",
        "action": f"/undo/revert/{quote(sha, safe='')}",
        "error": error,
        "notice": notice,
        "hidden": {},
    }
    try:
        result = mm.revert_preview(sha)
        context.update(result=result, commit=result.reverted[0])
    except (ConflictError, ValidationError) as exc:
        # what the commit changed, to show beside the reason it cannot be reverted
        entry = mm.history(commit=sha, limit=1)[0]
        context.update(
            commit=entry,
            result=None,
            changed=mm.diff(None, b=entry.sha, text=True),
            error=error or str(exc),
        )
        status = status if status != 200 else _status(exc)
    return render(request, "undo_preview.html", context, status)


def revert_preview(request: Request) -> Response:
    """GET /undo/revert/{sha}: what reverting it would change now (a dry run)."""
    return _revert_page(request, request.path_params["sha"])


def revert_confirm(request: Request) -> Response:
    """POST /undo/revert/{sha}: revert it, then show the new commit."""
    sha = request.path_params["sha"]
    refuse_if_read_only(request, f"reverting {sha[:12]}")
    form(request)  # CSRF was checked by the WebGuard before this runs
    try:
        new = manager(request).revert(sha)
    except ConflictError as exc:
        return _revert_page(request, sha, error=str(exc), status=409)
    if new is None:
        return _revert_page(
            request,
            sha,
            notice="Nothing to revert: what this commit "
            "changed is undone already. Nothing was written.",
        )
    return redirect(f"/commits/{new}?done=revert")


# --- rollback --------------------------------------------------------------------------------


def _rollback_page(
    request: Request,
    session_id: str,
    to: str,
    *,
    error: str = "",
    notice: str = "",
    status: int = 200,
) -> Response:
    mm = manager(request)
    context: dict[str, Any] = {
        "title": f"Roll back {session_id}",
        "kind": "rollback",
        "session_id": session_id,
        "to": to,
        "action": f"/undo/rollback/{quote(session_id)}",
        "hidden": {"to": to},
        "error": error,
        "notice": notice,
        "result": None,
        # the versions to pick from (newest first)
        "versions": mm.history(session_id, limit=50),
    }
    if to:
        target = mm.resolve(to)
        if mm.load_memory(session_id, commit=target) is None:
            context.update(
                target=target,
                sessions=[],
                error=error
                or (
                    f"session {session_id!r} did not exist at {target[:12]}: pick one of its "
                    "versions below"
                ),
            )
            return render(request, "undo_preview.html", context, 404)
        head = mm.head()
        diff: Diff = mm.diff(session_id, a=head, b=target)
        context.update(target=target, diff=diff, sessions=diff.sessions)
    return render(request, "undo_preview.html", context, status)


def rollback_preview(request: Request) -> Response:
    """GET /undo/rollback/{id}?to=REV: how the session would change going back to REV
    (without ``to``: pick a version)."""
    return _rollback_page(request, request.path_params["session_id"], param(request, "to"))


def rollback_confirm(request: Request) -> Response:
    """POST /undo/rollback/{id} (field ``to``): roll it back, then show the new commit."""
    session_id = request.path_params["session_id"]
    refuse_if_read_only(request, f"rolling back session {session_id!r}")
    to = form(request).get("to", "").strip()
    if not to:
        raise ValidationError("say which revision to roll back to: the field 'to' is empty")
    try:
        new = manager(request).rollback(session_id, to)
    except ConflictError as exc:
        return _rollback_page(request, session_id, to, error=str(exc), status=409)
    if new is None:
        return _rollback_page(
            request,
            session_id,
            to,
            notice="Nothing to roll back: the "
            "session already is in that state. Nothing was written.",
        )
    return redirect(f"/commits/{new}?done=rollback")


# --- undo an agent's window ------------------------------------------------------------------


def _filters(fields: dict[str, str]) -> dict[str, str | None]:
    return {name: (fields.get(name, "").strip() or None) for name in AGENT_FIELDS}


def _agent_page(
    request: Request,
    filters: dict[str, str | None],
    *,
    result: UndoResult | None = None,
    error: str = "",
    notice: str = "",
    status: int = 200,
) -> Response:
    context: dict[str, Any] = {
        "title": "Undo an agent's window",
        "kind": "agent",
        "action": "/undo/agent",
        "filters": filters,
        "hidden": {k: v for k, v in filters.items() if v},
        "result": result,
        "error": error,
        "notice": notice,
    }
    if result is None and not error:
        try:
            context["result"] = manager(request).revert_where(**filters, dry_run=True)
        except (ConflictError, ValidationError) as exc:
            context["error"] = str(exc)
            status = _status(exc)
    return render(request, "undo_preview.html", context, status)


def agent_preview(request: Request) -> Response:
    """GET /undo/agent?agent=&model=&op=&since=&until=: what undoing them would change."""
    return _agent_page(request, _filters(dict(request.query_params)))


def agent_confirm(request: Request) -> Response:
    """POST /undo/agent: undo the window as one commit, then show it."""
    refuse_if_read_only(request, "undoing an agent's window")
    filters = _filters(form(request))
    try:
        result = manager(request).revert_where(**filters, dry_run=False)
    except (ConflictError, ValidationError) as exc:
        return _agent_page(request, filters, error=str(exc), status=_status(exc))
    if result.commit is None:
        return _agent_page(
            request,
            filters,
            result=result,
            notice="Nothing to undo: no "
            "commit matches, or their changes are undone already. Nothing was "
            "written.",
        )
    return redirect(f"/commits/{result.commit}?done=undo")


ROUTES: list[BaseRoute] = [
    Route("/undo", landing, name="undo"),
    Route("/undo/revert", by_form, methods=["GET"]),
    Route("/undo/rollback", by_form, methods=["GET"]),
    Route("/undo/agent", agent_preview, methods=["GET"], name="undo-agent"),
    Route("/undo/agent", agent_confirm, methods=["POST"]),
    Route("/undo/revert/{sha}", revert_preview, methods=["GET"], name="undo-revert"),
    Route("/undo/revert/{sha}", revert_confirm, methods=["POST"]),
    Route(
        "/undo/rollback/{session_id:path}", rollback_preview, methods=["GET"], name="undo-rollback"
    ),
    Route("/undo/rollback/{session_id:path}", rollback_confirm, methods=["POST"]),
]
