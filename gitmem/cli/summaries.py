"""Summary commands: summarize and the review branches held by the loss guard."""

from __future__ import annotations

import sys

import click

from gitmem.cli.base import Context, cli, emit, pass_ctx


@cli.command()
@click.argument("session_id", required=False)
@click.option(
    "--llm/--offline",
    "use_llm",
    default=None,
    help="Force the LLM (GITMEM_LLM_* / OPENAI_*) or the offline summarizer "
    "(default: the LLM when one is configured).",
)
@click.option(
    "--idle",
    metavar="DURATION",
    help="Summarize every session quiet for DURATION (30m, 2h, 1d) instead of one.",
)
@click.option("--count", type=click.IntRange(min=1), help="Summarize only the first N new turns.")
@pass_ctx
def summarize(
    ctx: Context, session_id: str | None, use_llm: bool | None, idle: str | None, count: int | None
) -> None:
    """Summarize SESSION_ID's new turns as one commit (or, with --idle, all idle sessions)."""
    from gitmem.cli.views import outcome_lines
    from gitmem.summary.engines import LLMSummarizer, Summarizer
    from gitmem.summary.triggers import parse_duration

    if (session_id is None) == (idle is None):
        raise click.UsageError("give a SESSION_ID or --idle DURATION (not both)")
    engine: Summarizer | None = None
    mm = ctx.manager()
    if use_llm:
        config = mm.llm_config()
        if config is None:
            raise click.UsageError(
                "--llm: no LLM configured; set GITMEM_LLM_BASE_URL / GITMEM_LLM_MODEL / "
                "GITMEM_LLM_API_KEY (or the OPENAI_* variables)"
            )
        engine = LLMSummarizer(config)
    if idle is not None:
        try:
            quiet = parse_duration(idle)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--idle") from None
        outcomes = mm.summarize_idle(quiet, summarizer=engine, offline=use_llm is False)
        emit(
            ctx,
            [o.to_dict() for o in outcomes],
            lambda: "\n".join(outcome_lines(outcomes)) or f"no session idle for {idle}",
        )
        if any(o.status != "committed" for o in outcomes):
            sys.exit(1)
        return
    assert session_id is not None
    outcome = mm.summarize_outcome(
        session_id, summarizer=engine, offline=use_llm is False, count=count
    )
    if outcome.fallback and not ctx.json:
        click.echo(f"warning: {outcome.fallback}; used the offline summarizer", err=True)
    emit(ctx, outcome.to_dict(), lambda: outcome.commit or "")


@cli.group()
def review() -> None:
    """Summaries held by the loss guard on gitmem/review/<session> branches."""


@review.command("list")
@pass_ctx
def review_list(ctx: Context) -> None:
    """List summaries waiting for review."""
    items = ctx.manager().review_list()
    emit(
        ctx,
        [i.to_dict() for i in items],
        lambda: (
            "\n".join(f"{i.session_id}\t{i.branch}\t{i.commit[:12]}\t{i.subject}" for i in items)
            or "no summaries waiting for review"
        ),
    )


@review.command("show")
@click.argument("session_id")
@pass_ctx
def review_show(ctx: Context, session_id: str) -> None:
    """Show a held summary: the loss report and its diff."""
    item = ctx.manager().review_show(session_id)
    emit(ctx, item.to_dict(), lambda: f"{item.message.rstrip()}\n\n{item.diff}")


@review.command("accept")
@click.argument("session_id")
@pass_ctx
def review_accept(ctx: Context, session_id: str) -> None:
    """Apply a held summary to the session (one commit) and drop its branch."""
    sha = ctx.manager().review_accept(session_id)
    emit(ctx, {"session_id": session_id, "commit": sha}, lambda: sha)


@review.command("reject")
@click.argument("session_id")
@pass_ctx
def review_reject(ctx: Context, session_id: str) -> None:
    """Drop a held summary's branch (the session keeps its current summary)."""
    sha = ctx.manager().review_reject(session_id)
    emit(ctx, {"session_id": session_id, "dropped": sha}, lambda: f"dropped {sha[:12]}")
