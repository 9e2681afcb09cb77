"""Session commands: init, save, show, list, check, demo, scan."""

from __future__ import annotations

import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from gitmem.cli import views
from gitmem.cli.base import Context, cli, emit, parse_period, parse_when, pass_ctx, rev_option
from gitmem.errors import SessionNotFound
from gitmem.format.render import render
from gitmem.models import Message


@cli.command()
@click.argument("path", required=False, type=click.Path(file_okay=False))
@click.option(
    "--here",
    is_flag=True,
    help="Make the existing git repository at PATH (or --repo, or the current "
    "folder) a store on purpose: one commit adding the gitmem merge "
    "attributes to its .gitattributes.",
)
@pass_ctx
def init(ctx: Context, path: str | None, here: bool) -> None:
    """Create a memory store (a git repository) at PATH or --repo."""
    if path:
        ctx.repo = path
    mm = ctx.manager(init=True, adopt=here)
    emit(
        ctx,
        {"path": str(mm.path), "head": mm.head()},
        lambda: f"Initialized gitmem store in {mm.path}",
    )


@cli.command()
@click.argument("session_id")
@click.option("--user", "user_text", help="The user's message.")
@click.option("--assistant", "assistant_text", help="The assistant's reply.")
@click.option(
    "-m",
    "--message",
    "messages",
    multiple=True,
    metavar="SPEAKER: TEXT",
    help="A message from any speaker, e.g. 'Caroline: hi' (repeatable).",
)
@click.option("--tag", "tags", multiple=True, help="Tag the session (repeatable).")
@click.option(
    "--meta", "meta", multiple=True, metavar="KEY=VALUE", help="Set a metadata key (repeatable)."
)
@click.option("--timestamp", help="ISO time of the turn (default: now).")
@click.option("--id", "interaction_id", help="Interaction id (default: generated).")
@pass_ctx
def save(
    ctx: Context,
    session_id: str,
    user_text: str | None,
    assistant_text: str | None,
    messages: tuple[str, ...],
    tags: tuple[str, ...],
    meta: tuple[str, ...],
    timestamp: str | None,
    interaction_id: str | None,
) -> None:
    """Save one interaction to SESSION_ID as one commit."""
    turn: list[Message | dict[str, str]] = []
    if user_text is not None:
        turn.append({"role": "user", "content": user_text})
    if assistant_text is not None:
        turn.append({"role": "assistant", "content": assistant_text})
    for item in messages:
        speaker, sep, text = item.partition(":")
        if not sep:
            raise click.BadParameter(
                f"expected 'SPEAKER: TEXT', got {item!r}", param_hint="--message"
            )
        turn.append({"speaker": speaker.strip(), "content": text.removeprefix(" ")})
    if not turn:
        raise click.UsageError("nothing to save: give --user/--assistant or --message")
    metadata: dict[str, str] = {}
    for item in meta:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--meta")
        metadata[key.strip()] = value.strip()
    mm = ctx.manager()
    sha = mm.save_messages(
        session_id,
        turn,
        parse_when(timestamp, "--timestamp", mm.secret_config),
        interaction_id,
        tags=tags,
        metadata=metadata,
    )
    emit(ctx, {"session_id": session_id, "commit": sha}, lambda: sha or "no change")


@cli.command()
@click.argument("session_id")
@click.option("--raw", is_flag=True, help="Print the Markdown file as stored.")
@click.option("--at", metavar="REV|DATE", help="As the store was then (sha, HEAD~3, ISO date).")
@pass_ctx
def show(ctx: Context, session_id: str, raw: bool, at: str | None) -> None:
    """Show a session (parsed, or --raw Markdown)."""
    mm = ctx.manager()
    with rev_option(at, "--at", mm.secret_config):
        session = mm.load_memory(session_id, commit=mm.resolve(at) if at else None)
    if session is None:
        when = f" at {at}" if at else ""
        raise SessionNotFound(f"no session {session_id!r} in {mm.path}{when}")
    if raw and not ctx.json:
        click.echo(render(session), nl=False)
        return

    emit(ctx, session.model_dump(mode="json"), lambda: views.session_text(session))


@cli.command("list")
@click.option("--tag", "tags", multiple=True, help="Only sessions with this tag (repeatable).")
@click.option("--participant", help="Only sessions where this speaker takes part.")
@click.option("--project", help="Only sessions of this project.")
@click.option("--since", help="Last active at or after this ISO date/time.")
@click.option("--until", help="Last active at or before this ISO date/time.")
@click.option("--at", metavar="REV|DATE", help="As the store was then (sha, HEAD~3, ISO date).")
@click.option(
    "--all-namespaces",
    "every",
    is_flag=True,
    help="Operator: list every namespace's sessions (read-only; each row names its namespace).",
)
@pass_ctx
def list_(
    ctx: Context,
    tags: tuple[str, ...],
    participant: str | None,
    project: str | None,
    since: str | None,
    until: str | None,
    at: str | None,
    every: bool,
) -> None:
    """List sessions, most recently active first."""
    if every:
        ctx.refuse_namespace("--all-namespaces")
    mm = ctx.manager()
    with rev_option(at, "--at", mm.secret_config):
        commit = mm.resolve(at) if at else None
    period = parse_period(since, until, mm.secret_config)
    found = ctx.every_namespace(mm) if every else iter([(ctx.namespace, mm)])
    rows = []
    for name, opened in found:
        sessions = opened.list_session_infos(
            tags=tags, participant=participant, project=project, commit=commit, **period
        )
        rows += [
            {**views.session_summary(s), **({"namespace": name} if every else {})} for s in sessions
        ]
    if every:  # each namespace's list is in order already
        rows.sort(key=lambda r: datetime.fromisoformat(r["last_active"]), reverse=True)

    def line(r: dict[str, Any]) -> str:
        where = f"[{views.namespace_name(r['namespace'])}]\t" if every else ""
        title = f"\t{r['title']}" if r["title"] else ""
        return (
            f"{where}{r['id']}\t{r['interactions']} turns\t{r['last_active']}\t"
            + ",".join(r["tags"])
            + title
        )

    emit(ctx, rows, lambda: "\n".join(line(r) for r in rows) or "no sessions")


@cli.command()
@pass_ctx
def namespaces(ctx: Context) -> None:
    """List the store's namespaces with their sessions, turns and facts."""
    mm = ctx.manager()
    counts: list[tuple[str | None, int, int, int]] = []
    for name, opened in ctx.every_namespace(mm):
        sessions = opened.list_session_infos()
        turns = sum(s.interactions for s in sessions)
        counts.append((name, len(sessions), turns, len(opened.facts())))
    emit(
        ctx,
        [{"namespace": n, "sessions": s, "turns": t, "facts": f} for n, s, t, f in counts],
        lambda: "\n".join(
            f"{views.namespace_name(n)}\t{s} sessions\t{t} turns\t{f} facts"
            for n, s, t, f in counts
        ),
    )


@cli.command()
@pass_ctx
def check(ctx: Context) -> None:
    """Validate every memory file; print path:line problems, exit 1 if any."""
    mm = ctx.manager()
    problems = mm.check()
    emit(
        ctx,
        [{"path": p.path, "line": p.line, "problem": p.problem} for p in problems],
        lambda: "\n".join(str(p) for p in problems) or "all memory files parse cleanly",
    )
    if problems:
        sys.exit(1)


@cli.command()
@click.option(
    "--path",
    type=click.Path(file_okay=False),
    help="A new or empty folder to build the demo store in (default: a new temporary folder).",
)
@pass_ctx
def demo(ctx: Context, path: str | None) -> None:
    """Run the whole lifecycle on built-in defaults (offline, no API key)."""
    from gitmem.cli.demo import run_demo

    target = Path(path) if path else Path(tempfile.mkdtemp(prefix="gitmem-demo-"))
    if not ctx.json:
        run_demo(target, echo=click.echo)
        return
    lines: list[str] = []
    run_demo(target, echo=lines.append)
    emit(ctx, {"path": str(target), "log": "\n".join(lines).splitlines()}, str)


@cli.command()
@pass_ctx
def scan(ctx: Context) -> None:
    """Report secrets already in history (every branch), masked; exit 1 if any."""
    findings = ctx.manager().scan_history()

    def text() -> str:
        if not findings:
            return "no secrets found in history"
        still = sum(1 for f in findings if f.at_head)
        lines = [str(f) for f in findings]
        lines.append(
            f"{len(findings)} secret(s) in history, {still} still at HEAD: rotate each "
            "key, then purge history (docs/reliability.md: Secrets already in history)"
        )
        return "\n".join(lines)

    emit(ctx, [f.to_dict() for f in findings], text)
    if findings:
        sys.exit(1)
