"""The curated facts (``/facts``): the memory file with each fact's provenance.

Each fact shows where it came from (its sources, linked to the session turns), its dates,
confidence, tags and what replaced it, and who last changed it (``fact_blame``: the
commit, agent and model). ``?q=`` searches, ``?section=`` narrows, ``?past=1`` adds the
facts that no longer hold, ``?at=`` reads the file as of a date or a revision.

A memory file that does not parse is shown as the error page naming ``path:line``, with
status 500: the request was fine, the store's file is what needs fixing (by hand, or a
revert), so a 4xx that tells the browser to change its request would mislead.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gitmem.errors import ValidationError
from gitmem.format.facts import Fact
from gitmem.models import as_when
from gitmem.web.pages import manager, param, render


def _is_date(value: str) -> bool:
    try:
        as_when(value, "at")
    except ValidationError:
        return False
    return True


def facts_page(request: Request) -> Response:
    mm = manager(request)
    query = param(request, "q")
    section = param(request, "section")
    at = param(request, "at")
    past = param(request, "past") == "1"
    # a date reads the file of then and keeps only the facts valid then; a sha, its file
    as_of = at if at and _is_date(at) else None
    commit = mm.resolve(at) if at else None
    shown = mm.facts(
        section=section or None,
        query=query or None,
        as_of=as_of,
        commit=None if as_of else commit,
        include_past=past,
    )
    memory = mm.memory_file(commit=commit)
    blame = {b.fact.id: b for b in mm.fact_blame(commit=commit)}
    groups: dict[str, list[Fact]] = {}
    for fact in shown:
        groups.setdefault(fact.section, []).append(fact)
    return render(
        request,
        "facts.html",
        {
            "title": "Facts",
            "q": query,
            "section": section,
            "at": at,
            "past": past,
            "commit": commit,
            "groups": groups,
            "count": len(shown),
            "blame": blame,
            "sections": [
                s for s in dict.fromkeys([*memory.sections, *(f.section for f in memory.facts)])
            ],
            "path": mm.facts_path,
        },
    )


ROUTES: list[BaseRoute] = [Route("/facts", facts_page, name="facts")]
