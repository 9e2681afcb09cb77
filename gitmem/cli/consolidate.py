"""``gitmem facts consolidate`` and ``gitmem facts review``: fact consolidation from the CLI.

Two click objects for the ``facts`` group (``gitmem/cli/facts.py`` attaches them with
``facts.add_command(consolidate_command)`` and ``facts.add_command(review_command)``): they
parse options, call ``MemoryManager.consolidate`` / ``review_facts_*`` and print the diff.
"""

from __future__ import annotations

import sys

import click

from gitmem.cli.base import Context, GitmemCommand, GitmemGroup, emit, pass_ctx


@click.command("consolidate", cls=GitmemCommand)
@click.option(
    "--since",
    metavar="WHEN",
    help="A date (turns from then on) or a commit (what changed after it); default: "
    "since the last consolidation.",
)
@click.option("--offline", is_flag=True, help="Never ask the LLM: add salient sentences only.")
@click.option("--dry-run", is_flag=True, help="Show the proposed diff; write nothing.")
@click.option(
    "--on-loss",
    type=click.Choice(["review", "refuse"]),
    help="When the loss guard fires: commit to gitmem/review-facts (review) or write "
    "nothing (refuse); default git config gitmem.facts.onLoss, else review.",
)
@pass_ctx
def consolidate_command(
    ctx: Context, since: str | None, offline: bool, dry_run: bool, on_loss: str | None
) -> None:
    """Turn new summaries and turns into fact changes, as one commit."""
    mm = ctx.manager()
    result = mm.consolidate(since, offline=offline or None, apply=not dry_run, on_loss=on_loss)  # type: ignore[arg-type]

    def text() -> str:
        lines = [
            f"{result.status}: {len(result.changes)} changes ({result.engine})"
            + (f" {result.commit[:12]}" if result.commit else "")
        ]
        if result.branch:
            lines.append(
                f"held on branch {result.branch}: `gitmem facts review show`, then "
                "`gitmem facts review accept|reject`"
            )
        if result.loss is not None and result.loss.fires:
            lines.append(result.loss.render())
        lines += [f"rejected: {r}" for r in result.rejected]
        if result.diff:
            lines.append(result.diff.rstrip("\n"))
        return "\n".join(lines)

    if result.fallback and not ctx.json:
        click.echo(f"warning: {result.fallback}; used the offline extractor", err=True)
    emit(ctx, result.to_dict(), text)
    if result.status in ("refused", "review"):
        sys.exit(1)


@click.group("review", cls=GitmemGroup)
def review_command() -> None:
    """A consolidation held by the loss guard on gitmem/review-facts."""


@review_command.command("show")
@pass_ctx
def review_show(ctx: Context) -> None:
    """Show the held consolidation: its loss report and diff."""
    held = ctx.manager().review_facts_show()
    emit(ctx, held, lambda: f"{held['message'].rstrip()}\n\n{held['diff']}")


@review_command.command("accept")
@pass_ctx
def review_accept(ctx: Context) -> None:
    """Apply the held consolidation (one commit) and drop its branch."""
    sha = ctx.manager().review_facts_accept()
    emit(ctx, {"commit": sha}, lambda: sha or "nothing to change")


@review_command.command("reject")
@pass_ctx
def review_reject(ctx: Context) -> None:
    """Drop the held consolidation's branch (the facts stay as they are)."""
    sha = ctx.manager().review_facts_reject()
    emit(ctx, {"dropped": sha}, lambda: f"dropped {sha[:12]}")
