"""The Search page: a query with filters, its hits with their score components, the
``--explain`` data, and the context that would be assembled for a session.

A thin layer over ``MemoryManager.search(..., explain=True)`` and
``retrieve_context(..., explain=True)``: it reads the GET form, calls the manager and hands
the template plain rows. Snippets are escaped here; the only markup added is ``<mark>``
around words whose term is one of the query's terms (built with ``markupsafe``, so memory
content can never become HTML).
"""

from __future__ import annotations

import html
import re
from functools import cache
from typing import Any
from urllib.parse import urlencode

from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gitmem.errors import ValidationError
from gitmem.format.html import MarkdownHtml
from gitmem.manager import MemoryManager
from gitmem.models import Hit, Interaction
from gitmem.search.context import MESSAGE_OVERHEAD
from gitmem.search.tokens import default_counter
from gitmem.text import find_term, is_cjk
from gitmem.web.pages import int_param, manager, param, render

KINDS = ("", "session", "fact", "any")
DEFAULT_K = 10
MAX_K = 100
DEFAULT_MAX_TOKENS = 2000
MAX_TOKENS = 200_000
# facts shown beside the session hits of a default search, as their own kind of hit
FACT_HITS = 3
# at most this many words of one snippet get a <mark> (a snippet is ~200 characters)
MAX_MARKS = 40

_WORD_CHAR = re.compile(r"[^\W_]")
# a rendered snippet's tags (made by the Markdown renderer: trusted) and its text between
_TAG = re.compile(r"(<[^>]*>)")
# marks a snippet cut out of its text can leave unpaired, and the brackets of a wiki link
_LEFT_MARKS = re.compile(r"\*\*|__|\[\[|\]\]|`")
# a cut word at either end is dropped only when a space comes this close to it
_WORD_REACH = 30
# loading tiktoken's encoding costs more than a page: once per process
_counter = cache(default_counter)


def many(request: Request, name: str) -> list[str]:
    """A parameter given several times or as a comma list (``tag=a&tag=b`` or ``tag=a,b``)."""
    found = [
        part.strip() for value in request.query_params.getlist(name) for part in value.split(",")
    ]
    return list(dict.fromkeys(part for part in found if part))


def highlight(text: str, wanted: set[str]) -> Markup:
    """``text`` escaped, with each word whose term is in ``wanted`` inside ``<mark>``.

    Terms are what :mod:`gitmem.text` makes of a word (stemmed, lower case) or a CJK
    character / bigram, so "books" is marked for the term "book"."""
    if not wanted:
        return escape(text)
    out: list[Markup] = []
    pos = 0
    for _ in range(MAX_MARKS):
        at = find_term(text[pos:], wanted)
        if at is None:
            break
        start = pos + at
        if is_cjk(text[start]):
            end = start + (2 if text[start : start + 2] in wanted else 1)
        else:
            end = start + 1
            while end < len(text) and _WORD_CHAR.match(text[end]) and not is_cjk(text[end]):
                end += 1
        out += [escape(text[pos:start]), Markup("<mark>%s</mark>") % text[start:end]]
        pos = end
    out.append(escape(text[pos:]))
    return Markup("").join(out)


def whole_words(snippet: str) -> str:
    """``snippet`` without the piece of a word its cut left at either end (a snippet cut
    out of a longer text starts or ends with "…")."""
    if snippet.startswith("…"):
        space = snippet.find(" ", 1)
        if 0 < space <= _WORD_REACH:
            snippet = "…" + snippet[space + 1 :]
    if snippet.endswith("…") and len(snippet) > 1:
        space = snippet.rfind(" ", 0, len(snippet) - 1)
        if space >= len(snippet) - _WORD_REACH:
            snippet = snippet[:space].rstrip(" ,;:") + "…"
    return snippet


def card_snippet(markdown: MarkdownHtml, snippet: str, wanted: set[str]) -> Markup:
    """A hit's snippet as a card shows it: cut at whole words, its Markdown rendered by the
    safe renderer (raw HTML stays text), the query's words marked, and the marks a cut
    leaves unpaired (``**``, ``[[``) dropped."""
    rendered = markdown(whole_words(snippet))
    out: list[Markup] = []
    for part in _TAG.split(rendered):
        if part.startswith("<"):
            out.append(Markup(part))  # the renderer's own tag, never memory text
        elif part:
            out.append(highlight(_LEFT_MARKS.sub("", html.unescape(part)), wanted))
    return Markup("").join(out)


def components(values: dict[str, float]) -> list[dict[str, Any]]:
    """Score components as rows for a table of ``<meter>`` bars (0 .. max(1, value))."""
    return [
        {"name": name, "value": value, "max": max(1.0, value)} for name, value in values.items()
    ]


def _hit_row(markdown: MarkdownHtml, hit: Hit, wanted: set[str]) -> dict[str, Any]:
    if hit.kind == "fact":
        anchor = ""
    else:
        anchor = f"turn-{hit.interaction_id}" if hit.interaction_id else "summary"
    return {
        "hit": hit,
        "anchor": anchor,
        "snippet": card_snippet(markdown, hit.snippet, wanted),
        "components": components(hit.components),
        "around": None,
    }


def neighbours(
    mm: MemoryManager, session_id: str, interaction_id: str
) -> tuple[Interaction | None, Interaction | None] | None:
    """The turns before and after one turn of a session (archived turns included), or
    None when the session no longer holds that turn."""
    session = mm.load_memory(session_id, include_archive=True)
    turns = session.interactions if session else []
    for at, turn in enumerate(turns):
        if turn.id == interaction_id:
            return (
                turns[at - 1] if at > 0 else None,
                turns[at + 1] if at + 1 < len(turns) else None,
            )
    return None


def _search(request: Request, q: str, filters: dict[str, Any], kind: str, k: int) -> dict[str, Any]:
    mm = manager(request)
    hits = mm.search(q, k, explain=True, kind=kind or None, **filters)
    explanation = hits.explanation or {}
    wanted = set(explanation.get("terms", {}))
    markdown = request.app.state.markdown
    rows = [_hit_row(markdown, h, wanted) for h in hits]
    # the turns around one hit, on demand (?around=its rank): one session read, not ten
    around = int_param(request, "around", 0, 0, MAX_K)
    if 0 < around <= len(rows):
        hit = rows[around - 1]["hit"]
        if hit.kind == "interaction" and hit.interaction_id:
            rows[around - 1]["around"] = neighbours(mm, hit.session_id, hit.interaction_id)
    facts = []
    if not kind and not filters["session"]:
        found = mm.search(q, FACT_HITS, kind="fact")
        facts = [_hit_row(markdown, h, wanted) for h in found]
    # one line of text per candidate: the hits above already show their bars
    candidates = [
        {**row, "components": " · ".join(f"{k} {v:g}" for k, v in row["components"].items())}
        for row in explanation.get("candidates", [])
    ]
    return {
        "hits": rows,
        "facts": facts,
        "notes": hits.notes,
        "explanation": explanation,
        "candidates": candidates,
    }


def _context(request: Request, session_id: str, q: str, filters: dict[str, Any]) -> dict[str, Any]:
    mm = manager(request)
    max_tokens = int_param(request, "max_tokens", DEFAULT_MAX_TOKENS, 1, MAX_TOKENS)
    wide = {key: filters[key] for key in ("tags", "project", "participant")}
    messages = mm.retrieve_context(session_id, q, max_tokens, explain=True, **wide)
    explanation = messages.explanation or {}
    counter = mm.token_counter or _counter()
    budget = explanation.get("budget", {})
    return {
        "session_id": session_id,
        "max_tokens": max_tokens,
        "found": explanation.get("session_found", False),
        "messages": [
            {
                "role": m["role"],
                "content": m["content"],
                "tokens": counter.count(m["content"]) + MESSAGE_OVERHEAD,
            }
            for m in messages
        ],
        "budget": budget,
        "cut": budget.get("cut", []),
        "included": budget.get("included", []),
        "facts": explanation.get("facts", {}),
        "notes": explanation.get("notes", []),
    }


def around_link(request: Request, rank: int) -> str:
    """This search's URL with the turns around hit ``rank`` shown, scrolled to it."""
    kept = [(k, v) for k, v in request.query_params.multi_items() if k != "around"]
    return f"/search?{urlencode([*kept, ('around', str(rank))])}#hit-{rank}"


def search_page(request: Request) -> Response:
    """GET /search: the form, and when a query or a context session is given, the answer."""
    q = request.query_params.get("q", "")
    kind = param(request, "kind")
    if kind not in KINDS:
        raise ValidationError(
            f"the parameter 'kind' must be one of session, fact, any, not {kind[:40]!r}"
        )
    k = int_param(request, "k", DEFAULT_K, 1, MAX_K)
    participants = many(request, "participant")
    filters: dict[str, Any] = {
        "tags": many(request, "tag"),
        "project": param(request, "project") or None,
        "participant": participants or None,
        "session": many(request, "session") or None,
        "since": param(request, "since") or None,
        "until": param(request, "until") or None,
    }
    context_id = param(request, "context")
    context: dict[str, Any] = {
        "title": "Search",
        "q": q,
        "kind": kind,
        "k": k,
        "filters": filters,
        "tags_text": ", ".join(filters["tags"]),
        "participants_text": ", ".join(participants),
        "sessions_text": ", ".join(filters["session"] or []),
        "explain_open": param(request, "explain") not in ("", "0"),
        "context_id": context_id,
        "max_tokens": param(request, "max_tokens"),
        "searched": bool(q.strip()),
        "result": None,
        "context": None,
        "around_link": lambda rank: around_link(request, rank),
        "around": int_param(request, "around", 0, 0, MAX_K),
    }
    if q.strip():
        context["result"] = _search(request, q, filters, kind, k)
    if context_id:
        context["context"] = _context(request, context_id, q, filters)
    return render(request, "search.html", context)


ROUTES: list[BaseRoute] = [Route("/search", search_page, name="search")]
