"""Time-machine commands: log, diff, blame, rollback, revert, undo, restore, purge."""

from __future__ import annotations

import click

from gitmem.cli import views
from gitmem.cli.base import Context, cli, emit, parse_period, pass_ctx, rev_option
from gitmem.history.purge import PurgeReport


@cli.command("log")
@click.argument("session_id", required=False)
@click.option("--op", help="Only commits with this Gitmem-Op (save, summarize, revert...).")
@click.option("--agent", "by_agent", help="Only commits by this agent (Gitmem-Agent).")
@click.option("--model", "by_model", help="Only commits made with this model (Gitmem-Model).")
@click.option(
    "--since",
    "--after",
    "since",
    help="Only commits at or after this date: ISO, or as git says it (2 weeks ago, yesterday).",
)
@click.option("--until", "--before", "until", help="Only commits at or before this date.")
@click.option(
    "-n",
    "--max-count",
    "--limit",
    "limit",
    type=click.IntRange(min=1),
    help="At most this many commits.",
)
@click.option("--oneline", is_flag=True, help="One line a commit: short sha and subject.")
@click.option("--changes", is_flag=True, help="Also list what each commit changed (slower).")
@pass_ctx
def log_(
    ctx: Context,
    session_id: str | None,
    op: str | None,
    by_agent: str | None,
    by_model: str | None,
    since: str | None,
    until: str | None,
    limit: int | None,
    oneline: bool,
    changes: bool,
) -> None:
    """The audit trail of a session (or of the whole store), newest first. Takes git log's
    spellings: ``-n 3``, ``--max-count 3``, ``--oneline``, ``--since "2 weeks ago"``."""
    mm = ctx.manager()
    revisions = mm.history(
        session_id,
        op=op,
        agent=by_agent,
        model=by_model,
        limit=limit,
        changes=changes,
        **parse_period(since, until, mm.secret_config),
    )

    def text() -> str:
        lines = []
        for rev in revisions:
            lines.append(f"{rev.sha[:7]} {rev.subject}" if oneline else views.rev_line(rev))
            for sid, labels in rev.changes.items():
                lines.extend(f"    {sid}: {label}" for label in labels)
        return "\n".join(lines) or "no commits match"

    emit(ctx, [r.model_dump(mode="json") for r in revisions], text)


@cli.command("diff")
@click.argument("args", nargs=-1, required=True, metavar="SESSION A [B]")
@click.option("--all", "whole", is_flag=True, help="Every session: the arguments are A [B].")
@click.option("--structured", is_flag=True, help="Interactions, metadata and summary changes.")
@pass_ctx
def diff_(ctx: Context, args: tuple[str, ...], whole: bool, structured: bool) -> None:
    """Differences of SESSION between revisions A and B (default B: HEAD).

    Revisions are shas, HEAD~N, branch names or ISO dates. With --all, the whole store.
    """
    session_id = None if whole else args[0]
    revs = args if whole else args[1:]
    if not 1 <= len(revs) <= 2:
        raise click.UsageError("give SESSION A [B], or --all A [B]")
    result = ctx.manager().diff(session_id, revs[0], revs[1] if len(revs) > 1 else None)

    def text() -> str:
        if not structured:
            return result.unified.rstrip("\n") or "no differences"
        lines = [line for d in result.sessions for line in views.structured(d)]
        lines += [f"{path} (not a session file)" for path in result.files]
        return "\n".join(lines) or "no differences"

    data = result.model_dump(mode="json")
    data["unified"] = result.unified
    emit(ctx, data, text)


@cli.command()
@click.argument("session_id")
@pass_ctx
def blame(ctx: Context, session_id: str) -> None:
    """Who last changed each interaction and the summary of SESSION, and when."""
    entries = ctx.manager().blame(session_id)

    def text() -> str:
        lines = []
        for entry in entries:
            who = (entry.agent or entry.author) + (f" ({entry.model})" if entry.model else "")
            item = entry.interaction_id or "summary"
            lines.append(
                f"{item}\t{entry.sha[:12]}  {entry.time.isoformat()}  {who}  {entry.op or '-'}"
            )
        return "\n".join(lines) or "the session is empty"

    emit(ctx, [e.model_dump(mode="json") for e in entries], text)


def _written(ctx: Context, sha: str | None, what: str, unchanged: str) -> None:
    emit(ctx, {"commit": sha}, lambda: f"{what}: {sha}" if sha else unchanged)


@cli.command()
@click.argument("session_id")
@click.option("--to", "to", required=True, metavar="REV|DATE", help="The revision to go back to.")
@pass_ctx
def rollback(ctx: Context, session_id: str, to: str) -> None:
    """Restore SESSION as it was at a revision, as a new commit."""
    mm = ctx.manager()
    with rev_option(to, "--to", mm.secret_config):
        sha = mm.rollback(session_id, to=to)
    _written(ctx, sha, "rolled back", "already in that state; nothing written")


@cli.command()
@click.argument("commit")
@pass_ctx
def revert(ctx: Context, commit: str) -> None:
    """Undo exactly what COMMIT changed (part by part), as a new commit."""
    sha = ctx.manager().revert(commit)
    _written(ctx, sha, "reverted", "already undone; nothing written")


@cli.command()
@click.option("--agent", "by_agent", help="Undo the commits of this agent (Gitmem-Agent).")
@click.option("--model", "by_model", help="Undo the commits made with this model.")
@click.option("--op", help="Only commits with this Gitmem-Op.")
@click.option("--since", required=True, help="From this ISO date/time on.")
@click.option("--until", help="Up to this ISO date/time.")
@click.option("--dry-run", is_flag=True, help="Only list what would be undone.")
@pass_ctx
def undo(
    ctx: Context,
    by_agent: str | None,
    by_model: str | None,
    op: str | None,
    since: str,
    until: str | None,
    dry_run: bool,
) -> None:
    """Undo everything an agent or model did since a date, as one commit."""
    if not (by_agent or by_model):
        raise click.UsageError("say whose changes to undo: --agent NAME or --model NAME")
    mm = ctx.manager()
    result = mm.revert_where(
        agent=by_agent,
        model=by_model,
        op=op,
        dry_run=dry_run,
        **parse_period(since, until, mm.secret_config),
    )

    def text() -> str:
        if not result.reverted:
            return "no commits match; nothing to undo"
        head = "would undo" if dry_run else "undoing"
        lines = [f"{head} {len(result.reverted)} commit(s):"]
        lines += ["  " + views.rev_line(r) for r in result.reverted]
        lines += [line for d in result.sessions for line in views.structured(d)]
        if not dry_run:
            lines.append(f"committed {result.commit}" if result.commit else "nothing left to undo")
        return "\n".join(lines)

    emit(ctx, result.model_dump(mode="json"), text)


@cli.command()
@click.argument("session_id")
@click.option("--rev", metavar="REV|DATE", help="The version to bring back (default: the last).")
@pass_ctx
def restore(ctx: Context, session_id: str, rev: str | None) -> None:
    """Bring back a deleted SESSION from history, as a new commit."""
    mm = ctx.manager()
    with rev_option(rev, "--rev", mm.secret_config):
        sha = mm.restore_session(session_id, rev)
    _written(ctx, sha, "restored", "nothing written")


def _purge_lines(report: PurgeReport) -> list[str]:
    # ids and paths only: the purged content is never printed
    head = "would change" if report.dry_run else "changed"
    lines = [f"{head} {len(report.commits)} commit(s):"]
    for commit in report.commits:
        what = ", ".join(commit.files) or "-"
        message = " (and its message)" if commit.message else ""
        lines.append(f"  {commit.commit[:12]}: {what}{message}")
    return lines


@cli.command()
@click.option("--text", help="Every occurrence of this text becomes [purged].")
@click.option("--pattern", metavar="REGEX", help="Every match of this regular expression.")
@click.option("--session", "session_id", metavar="ID", help="The session's files, everywhere.")
@click.option("--turn", metavar="SESSION#ID", help="One turn, from its session's files.")
@click.option("--fact", "fact_id", metavar="ID", help="One fact's line, from the memory file.")
@click.option("--secrets", is_flag=True, help="Every secret `gitmem scan` finds.")
@click.option("--dry-run", is_flag=True, help="Only list the commits and files that would change.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_ctx
def purge(
    ctx: Context,
    text: str | None,
    pattern: str | None,
    session_id: str | None,
    turn: str | None,
    fact_id: str | None,
    secrets: bool,
    dry_run: bool,
    yes: bool,
) -> None:
    """Remove content from the whole history, for real (rewrites every commit holding it)."""
    mm = ctx.manager()

    def run(dry: bool) -> PurgeReport:
        return mm.purge(
            text=text,
            pattern=pattern,
            session=session_id,
            turn=turn,
            fact=fact_id,
            secrets=secrets,
            dry_run=dry,
        )

    if not dry_run and not yes:
        preview = run(True)
        click.echo("\n".join(_purge_lines(preview)), err=True)
        if not preview.commits:
            emit(ctx, preview.model_dump(mode="json"), lambda: "nothing to purge")
            return
        click.confirm("Rewrite these commits? This cannot be undone", abort=True, err=True)
    report = run(dry_run)

    def summary() -> str:
        if not report.commits:
            return "nothing to purge"
        lines = _purge_lines(report)
        if not dry_run:
            lines.append(f"moved {len(report.refs)} ref(s); purge commit {report.purge_commit}")
            removed = ", ".join(f"{n} {kind}" for kind, n in report.removed.items())
            lines.append(f"removed {removed}; caches dropped: {', '.join(report.caches) or '-'}")
        return "\n".join(lines)

    emit(ctx, report.model_dump(mode="json"), summary)
