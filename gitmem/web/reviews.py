"""The Reviews pages: what the loss guards held on review branches, and accepting or
rejecting it.

A summary that drops too many facts waits on ``gitmem/review/<session>``
(:mod:`gitmem.summary.methods`); a consolidation of the facts file that removes too much
waits on ``gitmem/review-facts`` (:mod:`gitmem.facts.consolidation`). These pages list
them, show the held version beside the current one with the loss report and the diff, and
accept or reject them with POST forms (CSRF-checked by the WebGuard), then redirect (303) back
with a notice. Read-only servers show them without forms and refuse the POSTs (403).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gitmem.errors import ConflictError, GitmemError, NothingToSummarize
from gitmem.web.pages import form, manager, param, redirect, render
from gitmem.web.undo import refuse_if_read_only

NOTICES = {
    "accept": "Accepted: the held version is now in the store (commit {commit}).",
    "reject": "Rejected: the review branch was dropped (it held commit {commit}); nothing "
    "else changed.",
    "same": "Nothing to apply: the session already has that summary; the review branch was "
    "dropped.",
}


_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


@dataclass
class DiffCell:
    """One side of a side-by-side row: a line number and text, ``kind`` "del", "add",
    "same" or "" (no line on this side)."""

    number: int | None = None
    text: str = ""
    kind: str = ""


@dataclass
class DiffRow:
    """A row of a side-by-side diff: the old line left, the new one right; a ``heading``
    row (a file or a hunk) spans both."""

    left: DiffCell
    right: DiffCell
    heading: str = ""


def side_by_side(diff: str) -> list[DiffRow]:
    """A unified ``diff`` as rows of old beside new: a run of removed lines is paired line
    by line with the added lines that follow it, unchanged lines stand on both sides."""
    rows: list[DiffRow] = []
    removed: list[DiffCell] = []
    added: list[DiffCell] = []
    old = new = 0

    def flush() -> None:
        for at in range(max(len(removed), len(added))):
            rows.append(
                DiffRow(
                    removed[at] if at < len(removed) else DiffCell(),
                    added[at] if at < len(added) else DiffCell(),
                )
            )
        removed.clear()
        added.clear()

    for line in diff.splitlines():
        hunk = _HUNK.match(line)
        if line.startswith(("diff --git", "index ", "--- ", "+++ ", "new file", "deleted file")):
            flush()
            if line.startswith("+++ "):
                rows.append(DiffRow(DiffCell(), DiffCell(), line[4:].removeprefix("b/")))
        elif hunk:
            flush()
            old, new = int(hunk.group(1)), int(hunk.group(2))
            rows.append(DiffRow(DiffCell(), DiffCell(), line))
        elif line.startswith("-"):
            removed.append(DiffCell(old, line[1:], "del"))
            old += 1
        elif line.startswith("+"):
            added.append(DiffCell(new, line[1:], "add"))
            new += 1
        elif not line.startswith("\\"):  # "\ No newline at end of file"
            flush()
            text = line[1:] if line.startswith(" ") else line
            rows.append(DiffRow(DiffCell(old, text, "same"), DiffCell(new, text, "same")))
            old += 1
            new += 1
    flush()
    return rows


def _held(call: Callable[..., Any], *args: str) -> Any:
    """``call(*args)`` on a review branch; a missing branch is a 404 with gitmem's message."""
    try:
        return call(*args)
    except GitmemError as exc:
        if type(exc) is GitmemError:  # "no summary of session ... is waiting for review"
            raise HTTPException(404, str(exc)) from None
        raise


def _facts_review(request: Request) -> dict[str, Any] | None:
    """The held consolidation of the facts, or None when none waits."""
    try:
        return manager(request).review_facts_show()
    except GitmemError:  # "no consolidation is waiting for review"
        return None


def _notice(request: Request) -> str:
    done = param(request, "done")
    text = NOTICES.get(done, "")
    return text.format(commit=param(request, "commit")[:12]) if text else ""


def _back(done: str, commit: str | None, **extra: str) -> Response:
    query = urlencode({"done": done, "commit": commit or "", **extra})
    return redirect(f"/reviews?{query}")


def list_reviews(request: Request) -> Response:
    """/reviews: every held summary and the held facts consolidation, if any."""
    return render(
        request,
        "reviews.html",
        {
            "title": "Reviews",
            "reviews": manager(request).review_list(),
            "facts": _facts_review(request),
            "notice": _notice(request),
            "subject": param(request, "subject"),
        },
    )


def _summary_page(
    request: Request, session_id: str, *, error: str = "", status: int = 200
) -> Response:
    mm = manager(request)
    review = _held(mm.review_show, session_id)
    held = mm.load_memory(session_id, commit=review.commit)
    current = mm.load_memory(session_id)
    return render(
        request,
        "review.html",
        {
            "title": f"Review: summary of {session_id}",
            "kind": "session",
            "session_id": session_id,
            "review": review,
            "message": review.message,
            "diff": review.diff,
            "rows": side_by_side(review.diff),
            "held": held.summary if held else None,
            "current": current.summary if current else None,
            "error": error,
            "action": f"/reviews/session/{quote(session_id)}",
        },
        status,
    )


def show_summary(request: Request) -> Response:
    """GET /reviews/session/{id}: the held summary vs the current one, and why it was held."""
    return _summary_page(request, request.path_params["session_id"])


def accept_summary(request: Request) -> Response:
    """POST /reviews/session/{id}/accept: apply the held summary (one commit)."""
    session_id = request.path_params["session_id"]
    refuse_if_read_only(request, f"accepting the summary of {session_id!r}")
    form(request)  # CSRF was checked by the WebGuard
    try:
        commit = _held(manager(request).review_accept, session_id)
    except ConflictError as exc:
        return _summary_page(request, session_id, error=str(exc), status=409)
    except NothingToSummarize:
        return _back("same", None, subject=session_id)
    return _back("accept", commit, subject=session_id)


def reject_summary(request: Request) -> Response:
    """POST /reviews/session/{id}/reject: drop the review branch."""
    session_id = request.path_params["session_id"]
    refuse_if_read_only(request, f"rejecting the summary of {session_id!r}")
    form(request)
    dropped = _held(manager(request).review_reject, session_id)
    return _back("reject", dropped, subject=session_id)


def _facts_page(request: Request, *, error: str = "", status: int = 200) -> Response:
    held = _held(manager(request).review_facts_show)
    return render(
        request,
        "review.html",
        {
            "title": "Review: consolidation of the facts",
            "kind": "facts",
            "review": held,
            "message": held["message"],
            "diff": held["diff"],
            "rows": side_by_side(held["diff"]),
            "error": error,
            "action": "/reviews/facts",
        },
        status,
    )


def show_facts(request: Request) -> Response:
    """GET /reviews/facts: the held consolidation, its loss report and diff."""
    if _facts_review(request) is None:
        return render(
            request,
            "reviews.html",
            {
                "title": "Reviews",
                "reviews": manager(request).review_list(),
                "facts": None,
                "notice": "No consolidation of the facts is waiting for review.",
                "subject": "",
            },
        )
    return _facts_page(request)


def accept_facts(request: Request) -> Response:
    """POST /reviews/facts/accept: apply the held consolidation on today's facts."""
    refuse_if_read_only(request, "accepting the facts consolidation")
    form(request)
    try:
        commit = _held(manager(request).review_facts_accept)
    except ConflictError as exc:
        return _facts_page(request, error=str(exc), status=409)
    return _back("accept", commit, subject="facts")


def reject_facts(request: Request) -> Response:
    """POST /reviews/facts/reject: drop the held consolidation."""
    refuse_if_read_only(request, "rejecting the facts consolidation")
    form(request)
    return _back("reject", _held(manager(request).review_facts_reject), subject="facts")


ROUTES: list[BaseRoute] = [
    Route("/reviews", list_reviews, name="reviews"),
    Route("/reviews/facts", show_facts, methods=["GET"], name="review-facts"),
    Route("/reviews/facts/accept", accept_facts, methods=["POST"]),
    Route("/reviews/facts/reject", reject_facts, methods=["POST"]),
    # the GET first: a session id may end in "/accept"; POSTs fall through to the actions
    Route("/reviews/session/{session_id:path}", show_summary, methods=["GET"], name="review"),
    Route("/reviews/session/{session_id:path}/accept", accept_summary, methods=["POST"]),
    Route("/reviews/session/{session_id:path}/reject", reject_summary, methods=["POST"]),
]
