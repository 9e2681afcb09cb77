"""The History page (the audit log, store-wide or per session) and the Commit page (one
commit's header and its structured diff against its parent).

A thin layer over ``MemoryManager.history`` and ``diff``: the page reads filters from the
query string and shows what the manager returns. Paging walks back from a commit
(``?before=SHA`` shows what comes after it in ``git log`` order), so a page costs the same
on the first commit of a store as on the ten-thousandth. The diff page also loads both
versions of each changed session to show the turns' text, not only their ids.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gitmem.errors import GitmemError, RevisionNotFound, ValidationError
from gitmem.format.facts import Fact
from gitmem.manager import MemoryManager
from gitmem.models import Diff, Interaction, Revision, Session, SessionDiff
from gitmem.web.pages import manager, param, render

PAGE_SIZE = 50
# a commit changing more sessions (an import) shows the others as one line each: loading
# and rendering every turn of 500 sessions would take seconds
DETAILED = 20
DONE = {"revert": "Reverted", "rollback": "Rolled back", "undo": "Undone"}
FILTERS = ("session", "op", "agent", "model", "since", "until")
# a commit id in a trailer or a message (Gitmem-Reverts, Gitmem-Reviewed-Commit, "Revert abc1234")
_SHA = re.compile(r"\b[0-9a-f]{7,40}\b")
_TRAILER = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9-]{0,63})\s*[:=]\s*(.*\S)\s*")


def trailer_filters(request: Request) -> dict[str, str]:
    """``?trailer=Key: value`` (repeatable) as a mapping, or a ValidationError naming it."""
    found: dict[str, str] = {}
    for raw in request.query_params.getlist("trailer"):
        if not raw.strip():
            continue
        match = _TRAILER.fullmatch(raw)
        if match is None:
            raise ValidationError(
                f"the parameter 'trailer' must look like 'Gitmem-Via: web' "
                f"(a key of letters, digits and '-', then a value), not "
                f"{raw[:60]!r}"
            )
        found[match.group(1)] = match.group(2)
    return found


def linked_shas(text: str) -> Markup:
    """``text`` escaped, with every commit id in it a link to its commit page."""
    out: list[Markup] = []
    pos = 0
    for found in _SHA.finditer(text):
        sha = found.group(0)
        out += [
            escape(text[pos : found.start()]),
            Markup('<a class="mono" href="/commits/%s" data-test="sha-link">%s</a>')
            % (sha, sha[:12]),
        ]
        pos = found.end()
    out.append(escape(text[pos:]))
    return Markup("").join(out)


def _older_link(request: Request, last: str) -> str:
    kept = [(k, v) for k, v in request.query_params.multi_items() if k != "before"]
    return f"/history?{urlencode([*kept, ('before', last)])}"


def history_page(request: Request) -> Response:
    """GET /history: newest commits first, filtered, 50 a page."""
    mm = manager(request)
    values = {name: param(request, name) for name in FILTERS}
    trailers = trailer_filters(request)
    before = param(request, "before")
    start = mm.resolve(before) if before else None
    # one more than a page (and the start itself) says whether there is an older page
    found = mm.history(
        values["session"] or None,
        op=values["op"] or None,
        agent=values["agent"] or None,
        model=values["model"] or None,
        since=values["since"] or None,
        until=values["until"] or None,
        limit=PAGE_SIZE + 2,
        commit=start,
        trailers=trailers or None,
        changes=param(request, "changes") == "1",
    )
    rows = [rev for rev in found if rev.sha != start]
    older = _older_link(request, rows[PAGE_SIZE - 1].sha) if len(rows) > PAGE_SIZE else None
    newest = None
    if before:
        newest = "/history?" + urlencode(
            [(k, v) for k, v in request.query_params.multi_items() if k != "before"]
        )
    return render(
        request,
        "history.html",
        {
            "title": f"History of {values['session']}" if values["session"] else "History",
            "values": values,
            "trailer_text": "; ".join(f"{k}: {v}" for k, v in trailers.items()),
            "rows": rows[:PAGE_SIZE],
            "older": older,
            "newest": newest,
            "start": start,
            "changes": param(request, "changes") == "1",
        },
    )


def message_body(revision: Revision) -> str:
    """The commit message without its subject line and its trailer block."""
    rest = revision.message.partition("\n")[2].strip("\n")
    if revision.trailers:
        rest = "\n\n".join(rest.split("\n\n")[:-1])
    return rest.strip("\n")


def _version(mm: MemoryManager, session_id: str, commit: str | None) -> Session | None:
    if commit is None:
        return None
    try:
        return mm.load_memory(session_id, commit=commit)
    except GitmemError:  # a version that does not parse: SessionDiff.problems names it
        return None


def _turns(session: Session | None) -> dict[str, Interaction]:
    return {} if session is None else {i.id: i for i in session.interactions}


def session_view(mm: MemoryManager, diff: Diff, change: SessionDiff) -> dict[str, Any]:
    """One session's change with the text of its turns (old and new versions)."""
    old = _turns(_version(mm, change.session_id, diff.a if change.status != "added" else None))
    new = _turns(_version(mm, change.session_id, diff.b if change.status != "removed" else None))
    return {
        "diff": change,
        "added": [new.get(i, i) for i in change.interactions_added],
        "removed": [old.get(i, i) for i in change.interactions_removed],
        "changed": [(old.get(i), new.get(i), i) for i in change.interactions_changed],
        "metadata": [(key, _shown(fc.old), _shown(fc.new)) for key, fc in change.metadata.items()],
    }


def _shown(value: str | list[str] | None) -> str | None:
    return ", ".join(value) if isinstance(value, list) else value


def _facts(mm: MemoryManager, commit: str | None) -> dict[str, Fact]:
    if commit is None:
        return {}
    try:
        return {fact.id: fact for fact in mm.memory_file(commit=commit).facts}
    except GitmemError:  # a broken memory file: FactDiff.problems names it
        return {}


def commit_page(request: Request) -> Response:
    """GET /commits/{sha}: the commit's header and structured diff (``?session=`` narrows it,
    ``?unified=1`` adds the text diff, ``?done=revert|rollback|undo`` says it is new)."""
    mm = manager(request)
    asked = request.path_params["sha"]
    sha = mm.resolve(asked)
    found = mm.history(commit=sha, limit=1)
    if not found or found[0].sha != sha:  # a commit of another namespace: not shown here
        raise RevisionNotFound(f"no commit {sha[:12]} in this namespace")
    revision = found[0]
    session_id = param(request, "session") or None
    unified = param(request, "unified") == "1"
    diff = mm.diff(session_id, None, sha, text=unified)
    facts: list[dict[str, Any]] = []
    if diff.facts:
        old, new = _facts(mm, diff.a), _facts(mm, diff.b)
        facts = [
            {
                "diff": fd,
                "added": [new.get(i, i) for i in fd.added],
                "removed": [old.get(i, i) for i in fd.removed],
                "changed": [(old.get(i), new.get(i), i) for i in fd.changed],
            }
            for fd in diff.facts
        ]
    done = param(request, "done")
    return render(
        request,
        "commit.html",
        {
            "title": f"Commit {sha[:12]}",
            "sha": sha,
            "rev": revision,
            "diff": diff,
            "body": message_body(revision),
            "session_id": session_id,
            "unified": unified,
            "sessions": [session_view(mm, diff, change) for change in diff.sessions[:DETAILED]],
            "brief": diff.sessions[DETAILED:],
            "facts": facts,
            "notice": DONE.get(done),
            "toggle": _toggle(request, unified),
        },
    )


def _toggle(request: Request, unified: bool) -> str:
    kept = [(k, v) for k, v in request.query_params.multi_items() if k not in ("unified", "done")]
    if not unified:
        kept.append(("unified", "1"))
    query = urlencode(kept)
    return request.url.path + (f"?{query}" if query else "")


ROUTES: list[BaseRoute] = [
    Route("/history", history_page, name="history"),
    Route("/commits/{sha}", commit_page, name="commit"),
]
