"""Search commands: search, context, reindex, embed."""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from gitmem.cli import views
from gitmem.cli.base import Context, cli, emit, parse_period, pass_ctx
from gitmem.manager import MemoryManager
from gitmem.models import Hit


@cli.command()
@click.argument("query", required=False, default="")
@click.option(
    "-k",
    "--k",
    "k",
    default=10,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="How many hits at most.",
)
@click.option("--tag", "tags", multiple=True, help="Only sessions with this tag (repeatable).")
@click.option("--project", help="Only sessions of this project.")
@click.option("--participant", help="Only sessions where this speaker takes part.")
@click.option(
    "--speaker",
    metavar="NAME",
    help="Only turns this person spoke in (any case); without QUERY, their newest turns.",
)
@click.option("--session", "sessions", multiple=True, help="Only this session (repeatable).")
@click.option("--since", help="Only turns at or after this ISO date/time.")
@click.option("--until", help="Only turns at or before this ISO date/time.")
@click.option(
    "--links",
    is_flag=True,
    help="Add sessions linked to or from the hits' (summary or best turns).",
)
@click.option("--explain", is_flag=True, help="Show every candidate and its score components.")
@click.option(
    "--kind",
    type=click.Choice(["session", "fact", "any"]),
    default="session",
    show_default=True,
    help="Search the sessions, the curated facts (memory/MEMORY.md), or both.",
)
@click.option(
    "--all-namespaces",
    "every",
    is_flag=True,
    help="Operator: search every namespace (read-only; each hit names its namespace).",
)
@pass_ctx
def search(
    ctx: Context,
    query: str,
    k: int,
    tags: tuple[str, ...],
    project: str | None,
    participant: str | None,
    speaker: str | None,
    sessions: tuple[str, ...],
    since: str | None,
    until: str | None,
    links: bool,
    explain: bool,
    kind: str,
    every: bool,
) -> None:
    """Search the memory for QUERY (keyword + fuzzy ranking, any language).

    A query that names someone who spoke ("what did Carol say about the index") finds
    their turns; --speaker NAME keeps only the turns NAME spoke in."""
    if every:
        ctx.refuse_namespace("--all-namespaces")
    mm = ctx.manager()
    options: dict[str, Any] = {
        "tags": tags,
        "project": project,
        "participant": participant,
        "speaker": speaker,
        "session": sessions or None,
        "include_links": links,
        "kind": kind,
        **parse_period(since, until, mm.secret_config),
    }
    if every:
        _search_every_namespace(ctx, mm, query, k, options)
        return
    hits = mm.search(query, k, explain=explain, **options)

    def text() -> str:
        lines = [views.hit_line(at, hit) for at, hit in enumerate(hits, 1)]
        if not hits:
            lines.append("no relevant memories")
            lines.extend(f"note: {n}" for n in hits.notes)
        if hits.explanation is not None:
            lines.append("")
            lines.extend(views.explain_search(hits.explanation))
        return "\n".join(lines)

    data: dict[str, Any] = {
        "query": query,
        "hits": [h.model_dump(mode="json") for h in hits],
        "notes": hits.notes,
    }
    if hits.explanation is not None:
        data["explanation"] = hits.explanation
    emit(ctx, data, text)


def _search_every_namespace(
    ctx: Context, first: MemoryManager, query: str, k: int, options: dict[str, Any]
) -> None:
    """``search --all-namespaces``: the best ``k`` hits of every namespace together, each
    with its namespace (None: the default one)."""
    found: list[tuple[str | None, Hit]] = []
    notes: list[str] = []
    for name, mm in ctx.every_namespace(first):
        hits = mm.search(query, k, **options)
        found += [(name, hit) for hit in hits]
        notes += [f"{views.namespace_name(name)}: {note}" for note in hits.notes]
    found.sort(key=lambda pair: -pair[1].score)
    found = found[:k]

    def text() -> str:
        lines = [
            f"[{views.namespace_name(name)}] {views.hit_line(at, hit)}"
            for at, (name, hit) in enumerate(found, 1)
        ]
        return "\n".join(lines or ["no relevant memories", *(f"note: {n}" for n in notes)])

    hits_data = [{"namespace": name, **hit.model_dump(mode="json")} for name, hit in found]
    emit(ctx, {"query": query, "hits": hits_data, "notes": notes}, text)


@cli.command()
@click.argument("session_id")
@click.argument("query")
@click.option(
    "--max-tokens",
    default=2000,
    show_default=True,
    type=click.IntRange(1),
    help="Token budget of the whole context.",
)
@click.option(
    "-k",
    "--k",
    "k",
    default=8,
    show_default=True,
    type=click.IntRange(0, 200),
    help="Memories to retrieve at most.",
)
@click.option(
    "--recent",
    default=8,
    show_default=True,
    type=click.IntRange(0, 1000),
    help="Recent turns of the session to include at most.",
)
@click.option(
    "--links", is_flag=True, help="Add memories of sessions linked to or from the retrieved ones'."
)
@click.option(
    "--rerank",
    is_flag=True,
    help="Let the configured LLM choose and condense the memories from the top "
    "--candidates (lexical order if it fails).",
)
@click.option(
    "--candidates",
    default=20,
    show_default=True,
    type=click.IntRange(1, 200),
    help="Lexical candidates the reranker chooses from.",
)
@click.option("--explain", is_flag=True, help="Show the search, the budget and what was cut.")
@pass_ctx
def context(
    ctx: Context,
    session_id: str,
    query: str,
    max_tokens: int,
    k: int,
    recent: int,
    links: bool,
    rerank: bool,
    candidates: int,
    explain: bool,
) -> None:
    """Assemble chat messages for SESSION_ID's next turn about QUERY, within a budget."""
    mm = ctx.manager()
    messages = mm.retrieve_context(
        session_id,
        query,
        max_tokens,
        k=max(k, 1),
        recent_turns=recent,
        explain=explain,
        include_links=links,
        rerank=rerank,
        rerank_candidates=candidates,
    )

    def text() -> str:
        lines: list[str] = []
        info = messages.explanation
        if info is not None:
            if info["search"] is not None:
                lines.extend(views.explain_search(info["search"] | {"links": info["links"]}))
                lines.append("")
            if info.get("rerank") is not None:
                lines.extend(views.explain_rerank(info["rerank"]))
                lines.append("")
            budget = info["budget"]
            lines.append(
                f"budget: {budget['used']} of {budget['budget']} tokens used ({budget['counter']})"
            )
            for piece in budget["included"]:
                why = f"  ({piece['reason']})" if piece.get("reason") else ""
                lines.append(f"  + {piece['source']:<7} {piece['tokens']:>5}  {piece['ref']}{why}")
            for piece in budget["cut"]:
                lines.append(
                    f"  - {piece['source']:<7} {piece['tokens']:>5}  {piece['ref']}"
                    f"  ({piece['reason']})"
                )
            lines.extend(f"note: {n}" for n in info["notes"])
            lines.append("")
        for message in messages:
            lines.append(f"[{message['role']}]")
            lines.append(message["content"])
        return "\n".join(lines) or "(no context)"

    data: dict[str, Any] = {"session_id": session_id, "messages": list(messages)}
    if messages.explanation is not None:
        data["explanation"] = messages.explanation
    emit(ctx, data, text)


@cli.command()
@pass_ctx
def reindex(ctx: Context) -> None:
    """Rebuild the search index from the store's HEAD (never needed for correctness)."""
    mm = ctx.manager()
    start = time.perf_counter()
    quiet = ctx.json
    with click.progressbar(
        length=1, label="indexing sessions", file=sys.stderr, hidden=quiet
    ) as bar:

        def progress(done: int, total: int) -> None:
            bar.length = max(total, 1)
            bar.update(done - bar.pos)

        report = mm.reindex(progress)
    seconds = time.perf_counter() - start
    data = {
        "commit": report.commit,
        "sessions": report.indexed,
        "unreadable": report.unreadable,
        "seconds": round(seconds, 3),
    }
    emit(
        ctx,
        data,
        lambda: (
            f"indexed {report.indexed} sessions at {str(report.commit)[:12]} in {seconds:.2f} s"
            + "".join(f"\nunreadable (see `gitmem check`): {p}" for p in report.unreadable)
        ),
    )


@cli.command()
@pass_ctx
def embed(ctx: Context) -> None:
    """Embed every memory that has no vector of the configured embedding model yet."""
    mm = ctx.manager()
    start = time.perf_counter()
    with click.progressbar(
        length=1, label="embedding memories", file=sys.stderr, hidden=ctx.json
    ) as bar:

        def progress(done: int, total: int) -> None:
            bar.length = max(total, 1)
            bar.update(done - bar.pos)

        count = mm.embed_pending(progress)
    seconds = time.perf_counter() - start
    config = mm.embedding_config()
    model = config.model if config else None
    data = {"embedded": count, "model": model, "seconds": round(seconds, 3)}
    emit(ctx, data, lambda: f"embedded {count} memories with {model} in {seconds:.2f} s")
