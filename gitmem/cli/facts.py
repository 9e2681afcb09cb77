"""``gitmem facts``: the curated memory file (``memory/MEMORY.md``) from the command line.

list, add, edit, forget, supersede, pin, unpin, show and blame, each a thin call of the facts
methods of ``MemoryManager`` (:mod:`gitmem.facts.methods`) and a view of what it returns. A
fact typed here with no ``--source`` is recorded as written by hand: a person ran the command.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import click

from gitmem.cli.base import Context, emit, parse_when, pass_ctx, rev_option
from gitmem.cli.base import cli as root
from gitmem.cli.consolidate import consolidate_command, review_command
from gitmem.errors import FactNotFound, ParseError
from gitmem.facts.methods import FactBlame
from gitmem.format.facts import DEFAULT_SECTION, Fact
from gitmem.manager import MemoryManager
from gitmem.store.gitlog import LogEntry, looks_like_date

F = TypeVar("F", bound=Callable[..., Any])
SHORT = 12  # characters of a commit id shown to a person


@root.group()
def facts() -> None:
    """Curated facts with provenance in memory/MEMORY.md (see docs/facts.md)."""


facts.add_command(consolidate_command)
facts.add_command(review_command)


# --- views ---------------------------------------------------------------------------------


def shown(text: str) -> str:
    """``text`` on one terminal line: line breaks and control characters as ``\\u{XXXX}``
    (a fact may hold any text; a terminal should not act on it)."""
    return "".join(ch if ch.isprintable() or ch == "\t" else f"\\u{{{ord(ch):04X}}}" for ch in text)


def provenance(fact: Fact) -> str:
    """Where a fact came from: its sources, the agent that wrote it, or ``by hand``."""
    if fact.sources:
        return ", ".join(shown(str(s)) for s in fact.sources)
    return f"by {shown(fact.by)}" if fact.by else "by hand"


def fact_line(fact: Fact) -> str:
    """``- text  [id ← sources · until ... · #tag]`` as ``facts list`` prints it."""
    extra = [f"from {fact.valid_from}"] if fact.valid_from else []
    extra += [f"until {fact.valid_until}"] if fact.valid_until else []
    extra += [f"replaced by {fact.replaced_by}"] if fact.replaced_by else []
    extra += [" ".join("#" + shown(t) for t in fact.tags)] if fact.tags else []
    tail = "".join(f" · {part}" for part in extra)
    return f"- {shown(fact.text)}  [{fact.id} ← {provenance(fact)}{tail}]"


def facts_text(found: Iterable[Fact]) -> str:
    """Facts grouped under their sections (in the order the sections first appear)."""
    groups: dict[str, list[Fact]] = {}
    for fact in found:
        groups.setdefault(fact.section, []).append(fact)
    return "\n\n".join(
        f"## {section}\n" + "\n".join(fact_line(f) for f in items)
        for section, items in groups.items()
    )


def fact_text(fact: Fact) -> list[str]:
    """Every field of one fact, one per line."""
    lines = [
        f"{fact.id}  {shown(fact.text)}",
        f"  section:     {fact.section}",
        f"  source:      {provenance(fact)}",
    ]
    if fact.valid_from or fact.valid_until:
        lines.append(
            f"  valid:       from {fact.valid_from or '-'} until {fact.valid_until or '-'}"
        )
    if fact.confidence is not None:
        lines.append(f"  confidence:  {fact.confidence}")
    if fact.tags:
        lines.append("  tags:        " + " ".join("#" + shown(t) for t in fact.tags))
    if fact.replaced_by:
        lines.append(f"  replaced by: {fact.replaced_by}")
    return lines


def who(agent: str | None, author: str, model: str | None) -> str:
    return shown(agent or author) + (f" ({shown(model)})" if model else "")


def entry_dict(entry: LogEntry) -> dict[str, Any]:
    """A commit of the memory file, as ``facts show --json`` lists it."""
    return {
        "commit": entry.sha,
        "when": entry.time.isoformat(),
        "author": entry.author,
        "agent": _last(entry, "Gitmem-Agent"),
        "model": _last(entry, "Gitmem-Model"),
        "op": _last(entry, "Gitmem-Op"),
        "subject": entry.subject,
        "reason": _last(entry, "Gitmem-Reason"),
    }


def blame_line(item: FactBlame) -> str:
    return (
        f"{item.fact.id}  {item.commit[:SHORT]}  {item.when.date().isoformat()}  "
        f"{who(item.agent, item.author, item.model)}  {item.op or '-'}  "
        f"{shown(item.fact.text)}"
    )


def _last(entry: LogEntry, key: str) -> str | None:
    values = entry.trailers.get(key)
    return values[-1] if values else None


def _named(entry: LogEntry) -> set[str]:
    """The fact ids a commit's ``Gitmem-Fact`` trailer names (``a, b (+3)``)."""
    value = _last(entry, "Gitmem-Fact") or ""
    return {part.split(" (+")[0].strip() for part in value.split(",") if part.strip()}


# --- helpers -------------------------------------------------------------------------------


def _date(value: str | None, name: str) -> str | None:
    """A date option: an ISO date or date-time, else a usage error naming the option."""
    if value is not None:
        parse_when(value, name)
    return value


def _touching(mm: MemoryManager, fact_id: str, commit: str | None) -> list[LogEntry]:
    """The commits (newest first) that changed the fact or name it in ``Gitmem-Fact``."""
    entries = mm.fact_history(commit=commit)
    versions = [_version(mm, e.sha, fact_id) for e in entries]
    out = []
    for at, entry in enumerate(entries):
        before = versions[at + 1] if at + 1 < len(versions) else None
        if fact_id in _named(entry) or versions[at] != before:
            out.append(entry)
    return out


def _version(mm: MemoryManager, commit: str, fact_id: str) -> Fact | None:
    try:
        return mm.memory_file(commit=commit).get(fact_id)
    except ParseError:  # a broken version: the commit that fixed it shows the change
        return None


# --- commands ------------------------------------------------------------------------------


@facts.command("list")
@click.option("--section", help="Only facts under this heading.")
@click.option("--query", "-q", help="Only facts sharing words with QUERY, best match first.")
@click.option("--tag", "tags", multiple=True, help="Only facts with this tag (repeat: all).")
@click.option(
    "--all",
    "include_past",
    is_flag=True,
    help="Also facts that were replaced or whose 'valid until' passed.",
)
@click.option(
    "--at",
    "at",
    metavar="DATE|REV",
    help="The memory as of a revision, or a date (the last commit before it, and "
    "the facts valid then).",
)
@click.option("--limit", type=click.IntRange(min=1), help="At most N facts.")
@pass_ctx
def list_(
    ctx: Context,
    section: str | None,
    query: str | None,
    tags: tuple[str, ...],
    include_past: bool,
    at: str | None,
    limit: int | None,
) -> None:
    """The curated facts, grouped by section, each with its id and sources."""
    mm = ctx.manager()
    options: dict[str, Any] = {
        "section": section,
        "query": query,
        "tags": tags,
        "include_past": include_past,
        "limit": limit,
    }
    with rev_option(at, "--at", mm.secret_config):
        if at is None:
            found = mm.facts(**options)
        elif looks_like_date(at.strip()):
            found = mm.facts(as_of=at.strip(), **options)
        else:
            found = mm.at(at).facts(**options)
    emit(
        ctx,
        [f.to_dict() for f in found],
        lambda: facts_text(found) or "no facts" + (" match" if query or tags or section else ""),
    )


def _source_option(help_text: str) -> Callable[[F], F]:
    return click.option(
        "--source", "sources", multiple=True, metavar="SESSION[#TURN]", help=help_text
    )


@facts.command("add")
@click.argument("text")
@click.option(
    "--section", default=DEFAULT_SECTION, show_default=True, help="The heading to put it under."
)
@_source_option("Where it was learned (repeatable); without one it is recorded as by hand.")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@click.option("--from", "valid_from", metavar="DATE", help="True from this ISO date.")
@click.option("--until", "valid_until", metavar="DATE", help="True until this ISO date.")
@click.option("--confidence", type=click.FloatRange(0.0, 1.0), help="How sure, 0 to 1.")
@click.option("--id", "fact_id", help="Use this id (letters, digits, _ - .) instead of a new one.")
@pass_ctx
def add(
    ctx: Context,
    text: str,
    section: str,
    sources: tuple[str, ...],
    tags: tuple[str, ...],
    valid_from: str | None,
    valid_until: str | None,
    confidence: float | None,
    fact_id: str | None,
) -> None:
    """Remember TEXT as a new fact (one commit); prints its id."""
    fact = ctx.manager().remember(
        text,
        section=section,
        source=list(sources) or None,
        tags=tags,
        valid_from=_date(valid_from, "--from"),
        valid_until=_date(valid_until, "--until"),
        confidence=confidence,
        fact_id=fact_id,
        by_hand=not sources,
    )
    emit(ctx, fact.to_dict(), lambda: fact.id)


@facts.command("edit")
@click.argument("fact_id", metavar="ID")
@click.option("--text", help="The new text.")
@click.option("--section", help="Move it under this heading.")
@click.option("--tag", "tags", multiple=True, help="Replace its tags (repeatable).")
@click.option("--from", "valid_from", metavar="DATE", help="True from this ISO date.")
@click.option("--until", "valid_until", metavar="DATE", help="True until this ISO date.")
@click.option("--confidence", type=click.FloatRange(0.0, 1.0), help="How sure, 0 to 1.")
@_source_option("Add a source (repeatable).")
@pass_ctx
def edit(
    ctx: Context,
    fact_id: str,
    text: str | None,
    section: str | None,
    tags: tuple[str, ...],
    valid_from: str | None,
    valid_until: str | None,
    confidence: float | None,
    sources: tuple[str, ...],
) -> None:
    """Change fact ID in place (its id stays), as one commit."""
    if not (
        text is not None
        or section
        or tags
        or valid_from
        or valid_until
        or confidence is not None
        or sources
    ):
        raise click.UsageError(
            "say what to change: --text, --section, --tag, --from, --until, "
            "--confidence or --source"
        )
    fact = ctx.manager().update_fact(
        fact_id,
        text,
        section=section,
        tags=tags or None,
        valid_from=_date(valid_from, "--from"),
        valid_until=_date(valid_until, "--until"),
        confidence=confidence,
        source=list(sources) or None,
    )
    emit(ctx, fact.to_dict(), lambda: fact.id)


@facts.command("forget")
@click.argument("fact_id", metavar="ID")
@click.option("--reason", default="", help="Why (kept in the commit message).")
@pass_ctx
def forget(ctx: Context, fact_id: str, reason: str) -> None:
    """Remove fact ID as one commit (history keeps it); prints the commit."""
    sha = ctx.manager().forget(fact_id, reason)
    emit(ctx, {"id": fact_id, "commit": sha}, lambda: sha)


@facts.command("supersede")
@click.argument("old")
@click.argument("new")
@click.option("--reason", default="", help="Why (kept in the commit message).")
@_source_option("Where the new fact was learned (repeatable).")
@click.option("--when", metavar="DATE", help="The old fact's 'valid until' (default: today).")
@pass_ctx
def supersede(
    ctx: Context, old: str, new: str, reason: str, sources: tuple[str, ...], when: str | None
) -> None:
    """Replace fact OLD by NEW (an existing fact's id, or the new text): the old one stays,
    marked 'until' and 'replaced by'. Prints the new fact's id."""
    fact = ctx.manager().supersede(
        old, new, reason=reason, source=list(sources) or None, when=_date(when, "--when")
    )
    emit(ctx, {"replaced": old, "fact": fact.to_dict()}, lambda: fact.id)


@facts.command("pin")
@click.argument("fact_id", metavar="ID")
@pass_ctx
def pin(ctx: Context, fact_id: str) -> None:
    """Pin fact ID: it comes first in every context (within the facts' share of the budget),
    whatever the query. One commit; prints the id."""
    fact = ctx.manager().pin_fact(fact_id)
    emit(ctx, fact.to_dict(), lambda: fact.id)


@facts.command("unpin")
@click.argument("fact_id", metavar="ID")
@pass_ctx
def unpin(ctx: Context, fact_id: str) -> None:
    """Unpin fact ID: it comes into a context only when it matters there. One commit; prints
    the id."""
    fact = ctx.manager().pin_fact(fact_id, pinned=False)
    emit(ctx, fact.to_dict(), lambda: fact.id)


@facts.command("show")
@click.argument("fact_id", metavar="ID")
@click.option("--at", "at", metavar="REV|DATE", help="The fact as of a revision or date.")
@pass_ctx
def show(ctx: Context, fact_id: str, at: str | None) -> None:
    """One fact: its fields, its provenance and the commits that touched it."""
    mm = ctx.manager()
    with rev_option(at, "--at", mm.secret_config):
        commit = None if at is None else mm.resolve(at)
    try:
        fact = mm.fact(fact_id, commit=commit)
    except FactNotFound as exc:
        gone = next(
            (
                e
                for e in mm.fact_history(commit=commit)
                if fact_id in _named(e) and _last(e, "Gitmem-Op") == "forget"
            ),
            None,
        )
        if gone is None:
            raise
        raise FactNotFound(
            f"{exc}; it was forgotten in commit {gone.sha[:SHORT]}: "
            f"`gitmem facts show {fact_id} --at {gone.sha[:SHORT]}~1`"
        ) from None
    entries = _touching(mm, fact_id, commit)

    def text() -> str:
        lines = fact_text(fact)
        lines.append("  history:" if entries else "  history:     (none)")
        lines += [
            f"    {e.sha[:SHORT]}  {e.time.isoformat()}  "
            f"{who(_last(e, 'Gitmem-Agent'), e.author, _last(e, 'Gitmem-Model'))}  "
            f"{_last(e, 'Gitmem-Op') or '-'}  {shown(e.subject)}"
            for e in entries
        ]
        return "\n".join(lines)

    emit(
        ctx,
        {"fact": fact.to_dict(), "at": commit, "history": [entry_dict(e) for e in entries]},
        text,
    )


@facts.command("blame")
@click.option("--at", "at", metavar="REV|DATE", help="Blame the file as of a revision or date.")
@pass_ctx
def blame(ctx: Context, at: str | None) -> None:
    """For each fact: the commit, date, agent, model and operation that last wrote it."""
    mm = ctx.manager()
    with rev_option(at, "--at", mm.secret_config):
        commit = None if at is None else mm.resolve(at)
    items = mm.fact_blame(commit=commit)
    emit(
        ctx,
        [i.to_dict() for i in items],
        lambda: "\n".join(blame_line(i) for i in items) or "no facts",
    )
