"""What each MCP tool does, as plain functions over ``MemoryManager`` (no SDK in sight).

Every tool returns an :class:`Answer`: a short text a model reads and the same facts as a
JSON-ready dict (the tool's structured content). The server layer (``server.py``) maps
these functions to tools, runs writes as the calling client's agent (so each commit says who
made it, and ``Gitmem-Via: mcp``) and turns a ``GitmemError`` into a tool error.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gitmem.errors import SessionNotFound, ValidationError
from gitmem.format.facts import DEFAULT_SECTION
from gitmem.format.render import render
from gitmem.guard.inputs import fresh_interaction_id
from gitmem.manager import MemoryManager
from gitmem.mcp import paging
from gitmem.models import Revision, Session, SessionInfo

# the default cap on the text of one save (the HTTP transport also caps a request at 4 MiB)
MAX_SAVE_BYTES = 1024 * 1024
# get_context's token budget, and the recall prompt's
CONTEXT_TOKENS_MIN = 50
CONTEXT_TOKENS_MAX = 200_000
# a diff's unified text is cut here: the structured part says what changed
MAX_UNIFIED_CHARS = 20_000


@dataclass
class Answer:
    """A tool's result: ``text`` for the model, ``data`` as structured content."""

    text: str
    data: dict[str, Any]


def _when(value: str | None, name: str) -> datetime | None:
    if value is None or not value.strip():
        return None
    try:
        return datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValidationError(f"{name}: not an ISO date/time: {value[:40]!r}") from None


def _commit(mm: MemoryManager, at: str | None) -> str | None:
    return mm.resolve(at) if at else None


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "no commit"


# --- writes --------------------------------------------------------------------------------


def save_interaction(
    mm: MemoryManager,
    session: str,
    user: str | None,
    assistant: str | None,
    messages: list[dict[str, str]] | None,
    tags: list[str] | None,
    metadata: dict[str, str] | None,
    timestamp: str | None,
    max_bytes: int = MAX_SAVE_BYTES,
) -> Answer:
    """One turn saved as one commit; the turn's id is chosen here so it can be returned."""
    turn: list[dict[str, str]] = []
    if user is not None:
        turn.append({"role": "user", "content": user})
    if assistant is not None:
        turn.append({"role": "assistant", "content": assistant})
    for at, item in enumerate(messages or []):
        speaker = item.get("speaker") or item.get("role")
        if not speaker or "content" not in item:
            raise ValidationError(f"messages[{at}]: give 'speaker' (or 'role') and 'content'")
        turn.append({"speaker": speaker, "content": item["content"]})
    if not turn:
        raise ValidationError("nothing to save: give user and/or assistant, or messages")
    size = sum(len(m["content"].encode("utf-8", "surrogatepass")) for m in turn)
    if size > max_bytes:
        raise ValidationError(
            f"session {session!r}: the turn is {size:,} bytes; this server saves at most "
            f"{max_bytes:,} per call (gitmem mcp --max-bytes); nothing saved"
        )
    iid = fresh_interaction_id(set())
    sha = mm.save_messages(
        session, turn, _when(timestamp, "timestamp"), iid, tags=tags or (), metadata=metadata
    )
    data = {"session": session, "interaction_id": iid, "commit": sha}
    return Answer(f"saved turn {iid} to session {session!r} (commit {_short(sha)})", data)


def remember(
    mm: MemoryManager,
    text: str,
    section: str | None,
    sources: list[str] | None,
    tags: list[str] | None,
) -> Answer:
    """One curated fact added to the memory file as one commit."""
    fact = mm.remember(
        text, section=section or DEFAULT_SECTION, source=sources or None, tags=tags or ()
    )
    return Answer(
        f"remembered [{fact.id}] under {fact.section!r}: {fact.text}", {"fact": fact.to_dict()}
    )


def summarize(mm: MemoryManager, session: str, offline: bool) -> Answer:
    outcome = mm.summarize_outcome(session, offline=offline, reason="asked through MCP")
    data = outcome.to_dict()
    model = f" by {outcome.model}" if outcome.model else ""
    fallback = f" (fell back: {outcome.fallback})" if outcome.fallback else ""
    return Answer(f"summarized {session!r}{model}{fallback}: commit {_short(outcome.commit)}", data)


def revert(mm: MemoryManager, commit: str) -> Answer:
    sha = mm.revert(commit)
    text = f"reverted {commit}: commit {_short(sha)}" if sha else "already undone; nothing written"
    return Answer(text, {"reverted": commit, "commit": sha})


def rollback(mm: MemoryManager, session: str, to: str) -> Answer:
    sha = mm.rollback(session, to)
    text = (
        f"rolled {session!r} back to {to}: commit {_short(sha)}"
        if sha
        else "already in that state; nothing written"
    )
    return Answer(text, {"session": session, "to": to, "commit": sha})


def undo_agent(
    mm: MemoryManager,
    agent: str | None,
    model: str | None,
    since: str,
    until: str | None,
    op: str | None,
    dry_run: bool,
) -> Answer:
    if not (agent or model):
        raise ValidationError("say whose changes to undo: give agent or model")
    low = _when(since, "since")
    if low is None:
        raise ValidationError("since: give the ISO date/time to undo from")
    result = mm.revert_where(
        agent=agent, model=model, op=op, since=low, until=_when(until, "until"), dry_run=dry_run
    )
    verb = "would undo" if dry_run else "undid"
    text = f"{verb} {len(result.reverted)} commit(s)"
    if result.commit:
        text += f": commit {_short(result.commit)}"
    return Answer(text, result.to_dict())


# --- reads ---------------------------------------------------------------------------------


def _session(
    mm: MemoryManager, session: str, at: str | None = None, include_archive: bool = False
) -> Session:
    found = mm.load_memory(session, commit=_commit(mm, at), include_archive=include_archive)
    if found is None:
        when = f" at {at}" if at else ""
        raise SessionNotFound(f"no session {session!r} in {mm.path}{when}")
    return found


def load_session(
    mm: MemoryManager,
    session: str,
    at: str | None,
    last: int | None,
    include_archive: bool,
    cursor: str | None = None,
    limit: int | None = None,
) -> Answer:
    """The session (or its last N turns) in pages the client can read (see ``paging``)."""
    found = _session(mm, session, at, include_archive)
    turns = found.interactions
    if last is not None and last < len(turns):
        turns = turns[-last:]
    return Answer(*paging.answer(found, turns, cursor, limit))


def session_row(session: SessionInfo) -> dict[str, Any]:
    """A session as one line of a listing."""
    summary = session.summary or ""
    return {
        "id": session.id,
        "interactions": session.interactions,
        "last_active": session.last_active.isoformat(),
        "tags": list(session.tags),
        "participants": list(session.participants),
        "project": session.project,
        "summary": summary[:300],
    }


def list_sessions(
    mm: MemoryManager,
    tags: list[str] | None,
    participant: str | None,
    project: str | None,
    since: str | None,
    until: str | None,
    at: str | None,
    limit: int,
) -> Answer:
    found = mm.list_session_infos(
        tags=tags or (),
        participant=participant,
        project=project,
        since=_when(since, "since"),
        until=_when(until, "until"),
        commit=_commit(mm, at),
    )
    rows = [session_row(s) for s in found[:limit]]
    lines = [f"{r['id']}\t{r['interactions']} turns\t{r['last_active']}" for r in rows]
    more = len(found) - len(rows)
    if more > 0:
        lines.append(f"... and {more} more (raise limit or filter)")
    return Answer("\n".join(lines) or "no sessions", {"sessions": rows, "total": len(found)})


def search(
    mm: MemoryManager,
    query: str,
    k: int,
    tags: list[str] | None,
    project: str | None,
    participant: str | None,
    sessions: list[str] | None,
    since: str | None,
    until: str | None,
    include_links: bool,
    *,
    speaker: str | None = None,
) -> Answer:
    hits = mm.search(
        query,
        k,
        tags=tags or (),
        project=project,
        participant=participant,
        speaker=speaker,
        session=sessions or None,
        since=_when(since, "since"),
        until=_when(until, "until"),
        include_links=include_links,
    )
    rows = [
        {
            "session": h.session_id,
            "interaction_id": h.interaction_id,
            "score": h.score,
            "snippet": h.snippet,
            "commit": h.commit,
            "kind": h.kind,
            "speaker": h.speaker,
            "timestamp": h.timestamp.isoformat() if h.timestamp else None,
            # include_links: "out" (a hit's session links to it), "in" (it links to one)
            "link": "+".join(w for w in ("out", "in") if f"link_{w}" in h.components) or None,
        }
        for h in hits
    ]
    lines = [
        f"{at}. [{r['session']} {r['interaction_id'] or 'summary'}] "
        f"({r['score']:.3f}){f' (link {w})' if (w := r['link']) else ''} {r['snippet']}"
        for at, r in enumerate(rows, 1)
    ]
    if not rows:
        lines = ["no relevant memories", *(f"note: {n}" for n in hits.notes)]
    return Answer("\n".join(lines), {"query": query, "hits": rows, "notes": list(hits.notes)})


def facts(
    mm: MemoryManager,
    query: str | None,
    section: str | None,
    at: str | None,
    include_past: bool,
    limit: int,
) -> Answer:
    found = mm.facts(
        section,
        query if query and query.strip() else None,
        commit=_commit(mm, at),
        include_past=include_past,
        limit=limit,
    )
    lines = [f"- {f.text} [{f.id}]" + ("" if f.current() else " (past)") for f in found]
    return Answer("\n".join(lines) or "no facts", {"facts": [f.to_dict() for f in found]})


def get_context(
    mm: MemoryManager,
    session: str,
    query: str,
    max_tokens: int,
    k: int,
    recent: int,
    rerank: bool = False,
) -> Answer:
    messages = mm.retrieve_context(
        session, query, max_tokens, k=max(k, 1), recent_turns=recent, rerank=rerank
    )
    listed = [dict(m) for m in messages]
    text = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in listed)
    return Answer(text or "(no context)", {"session": session, "messages": listed})


def context_budget(value: str) -> int:
    """A token budget given as text (a prompt's arguments are strings), within the bounds
    of ``get_context``."""
    try:
        budget = int(value.strip())
    except ValueError:
        raise ValidationError(f"max_tokens: not a number: {value[:20]!r}") from None
    if budget < CONTEXT_TOKENS_MIN:
        raise ValidationError(f"max_tokens: {budget} is less than {CONTEXT_TOKENS_MIN}")
    if budget > CONTEXT_TOKENS_MAX:
        raise ValidationError(f"max_tokens: {budget} is more than {CONTEXT_TOKENS_MAX:,}")
    return budget


def _rev_row(rev: Revision) -> dict[str, Any]:
    row = rev.to_dict()
    row.pop("message", None)  # the subject and trailers say it; bodies can be long
    return row


def history(
    mm: MemoryManager,
    session: str | None,
    op: str | None,
    agent: str | None,
    model: str | None,
    since: str | None,
    until: str | None,
    limit: int,
    changes: bool,
) -> Answer:
    revisions = mm.history(
        session,
        op=op,
        agent=agent,
        model=model,
        since=_when(since, "since"),
        until=_when(until, "until"),
        limit=limit,
        changes=changes,
    )
    lines = []
    for rev in revisions:
        who = rev.agent or rev.author
        lines.append(f"{rev.sha[:12]} {rev.time.isoformat()} {rev.op or '-'} {who}: {rev.subject}")
        for sid, labels in rev.changes.items():
            lines.extend(f"    {sid}: {label}" for label in labels)
    return Answer(
        "\n".join(lines) or "no commits match",
        {"session": session, "commits": [_rev_row(r) for r in revisions]},
    )


def diff(mm: MemoryManager, session: str | None, a: str | None, b: str | None) -> Answer:
    result = mm.diff(session, a, b)
    data = result.to_dict()
    unified = result.unified
    cut = len(unified) > MAX_UNIFIED_CHARS
    for item in data["sessions"]:
        item["unified"] = item["unified"][:MAX_UNIFIED_CHARS]
    data["unified"] = unified[:MAX_UNIFIED_CHARS]
    data["unified_truncated"] = cut
    labels = [f"{d.session_id}: {label}" for d in result.sessions for label in d.labels()]
    return Answer("\n".join(labels) or "no differences", data)


def blame(mm: MemoryManager, session: str, at: str | None) -> Answer:
    entries = mm.blame(session, commit=_commit(mm, at))
    lines = [
        f"{e.interaction_id or 'summary'}\t{e.sha[:12]} {e.time.isoformat()} "
        f"{e.agent or e.author}{f' ({e.model})' if e.model else ''} {e.op or '-'}"
        for e in entries
    ]
    return Answer(
        "\n".join(lines) or "the session is empty",
        {"session": session, "entries": [e.to_dict() for e in entries]},
    )


def session_markdown(mm: MemoryManager, session: str, at: str | None = None) -> str:
    """The session's Markdown file (as of ``at``), for the resources."""
    return render(_session(mm, session, at))
