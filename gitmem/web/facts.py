"""The curated facts (``/facts``): the memory file with each fact's provenance.

Each fact shows where it came from (its sources, linked to the session turns), its dates,
confidence, tags and what replaced it, and who last changed it (``fact_blame``: the
commit, agent and model). ``?q=`` searches, ``?section=`` narrows, ``?past=1`` adds the
facts that no longer hold, ``?at=`` reads the file as of a date or a revision.

A person corrects the memory here too: POST forms (CSRF-checked by the WebGuard, refused
on a read-only server) add a fact, edit one in place, supersede it by a new one or forget
it, each as one commit by the dashboard's person (``remember``, ``update-fact``,
``supersede``, ``forget``). ``/facts/{id}`` shows one fact with why the agent believes it:
the turns it was learned from, the commit that last wrote it (agent, model, a revert
link) and every commit that touched it.

A memory file that does not parse is shown as the error page naming ``path:line``, with
status 500: the request was fine, the store's file is what needs fixing (by hand, or a
revert), so a 4xx that tells the browser to change its request would mislead.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gitmem.errors import GitmemError, ValidationError
from gitmem.format.facts import DEFAULT_SECTION, Fact, FactSource
from gitmem.manager import MemoryManager
from gitmem.models import Interaction, as_when
from gitmem.store.gitlog import LogEntry
from gitmem.web.pages import form, manager, param, redirect, render
from gitmem.web.undo import refuse_if_read_only

# source turns shown on a fact's page ("why does the agent believe this")
SOURCES_SHOWN = 5
# commits of the memory file read for a fact's history
HISTORY_READ = 200
DONE = {
    "remember": "Added",
    "update-fact": "Saved",
    "supersede": "Superseded: this is the new fact",
    "forget": "Forgotten",
}


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
            "notice": _notice(request),
        },
    )


def _notice(request: Request) -> str:
    done = DONE.get(param(request, "done"), "")
    commit = param(request, "commit")[:12]
    return f"{done} (commit {commit})." if done and commit else ""


def _tags(raw: str) -> list[str]:
    return [t for t in (x.strip() for x in raw.split(",")) if t]


def _done(fact_id: str | None, op: str, commit: str | None) -> Response:
    query = urlencode({"done": op, "commit": commit or ""})
    if fact_id is None:
        return redirect(f"/facts?{query}")
    return redirect(f"/facts/{quote(fact_id, safe='')}?{query}")


def add_fact(request: Request) -> Response:
    """POST /facts/add: remember a fact written by the person at the dashboard."""
    refuse_if_read_only(request, "adding a fact")
    fields = form(request)
    mm = manager(request)
    fact = mm.remember(
        fields.get("text", ""),
        section=fields.get("section", "").strip() or DEFAULT_SECTION,
        tags=_tags(fields.get("tags", "")),
        by_hand=True,
    )
    return _done(fact.id, "remember", mm.head())


def edit_fact(request: Request) -> Response:
    """POST /facts/{id}/edit: change a fact's text, section or tags in place."""
    fact_id = request.path_params["fact_id"]
    refuse_if_read_only(request, f"editing fact {fact_id!r}")
    fields = form(request)
    mm = manager(request)
    mm.update_fact(
        fact_id,
        fields.get("text") or None,
        section=fields.get("section", "").strip() or None,
        tags=_tags(fields["tags"]) if "tags" in fields else None,
    )
    return _done(fact_id, "update-fact", mm.head())


def supersede_fact(request: Request) -> Response:
    """POST /facts/{id}/supersede: a new fact replaces this one from today."""
    fact_id = request.path_params["fact_id"]
    refuse_if_read_only(request, f"superseding fact {fact_id!r}")
    fields = form(request)
    mm = manager(request)
    new = fields.get("text", "")
    if not new.strip():
        raise ValidationError(f"fact {fact_id!r}: the fact that replaces it needs text")
    fact = mm.supersede(fact_id, new, reason=fields.get("reason", ""))
    return _done(fact.id, "supersede", mm.head())


def forget_fact(request: Request) -> Response:
    """POST /facts/{id}/forget: remove the fact (its history keeps it)."""
    fact_id = request.path_params["fact_id"]
    refuse_if_read_only(request, f"forgetting fact {fact_id!r}")
    fields = form(request)
    commit = manager(request).forget(fact_id, fields.get("reason", ""))
    return _done(None, "forget", commit)


def _touches(entry: LogEntry, fact_id: str) -> bool:
    named = ",".join(entry.trailers.get("Gitmem-Fact", []))
    return fact_id in {part.strip().split(" ")[0] for part in named.split(",")}


def _source_turn(mm: MemoryManager, source: FactSource) -> dict[str, Any]:
    """A source with the turn's text when it can be read (a forgotten session: without)."""
    turn: Interaction | None = None
    if source.interaction:
        try:
            session = mm.load_memory(source.session, include_archive=True)
        except GitmemError:
            session = None
        if session is not None:
            turn = next((i for i in session.interactions if i.id == source.interaction), None)
    return {"source": source, "turn": turn}


def fact_page(request: Request) -> Response:
    """GET /facts/{id}: one fact, why the agent believes it, its history and the forms."""
    mm = manager(request)
    fact_id = request.path_params["fact_id"]
    fact = mm.fact(fact_id)
    blame = next((b for b in mm.fact_blame() if b.fact.id == fact_id), None)
    history = [e for e in mm.fact_history()[:HISTORY_READ] if _touches(e, fact_id)]
    return render(
        request,
        "fact.html",
        {
            "title": f"Fact {fact_id}",
            "fact": fact,
            "blame": blame,
            "history": history,
            "sources": [_source_turn(mm, s) for s in fact.sources[:SOURCES_SHOWN]],
            "more_sources": max(0, len(fact.sources) - SOURCES_SHOWN),
            "notice": _notice(request),
        },
    )


ROUTES: list[BaseRoute] = [
    Route("/facts", facts_page, name="facts"),
    Route("/facts/add", add_fact, methods=["POST"]),
    Route("/facts/{fact_id}", fact_page, methods=["GET"], name="fact"),
    Route("/facts/{fact_id}/edit", edit_fact, methods=["POST"]),
    Route("/facts/{fact_id}/supersede", supersede_fact, methods=["POST"]),
    Route("/facts/{fact_id}/forget", forget_fact, methods=["POST"]),
]
