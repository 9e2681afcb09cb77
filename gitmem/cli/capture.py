"""``gitmem capture``: what a coding agent's hook runs after every turn.

It loads the importers and opens the store only when the transcript changed since the last
capture, so an unchanged one costs the CLI's start and one small file read.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gitmem.cli.base import Context, cli, pass_ctx
from gitmem.importers import hookinput


@cli.command("capture")
@click.argument("agent", type=click.Choice(hookinput.AGENTS))
@click.argument("payload", nargs=-1)
@click.option("--tools", type=click.Choice(["summary", "full"]), default="summary")
@pass_ctx
def capture(ctx: Context, agent: str, payload: tuple[str, ...], tools: str) -> None:
    """Import the session an agent's hook names, from where the last capture stopped.

    Claude Code and Gemini CLI hooks give their JSON on stdin, Codex's notify as the last
    argument. Never fails the agent: errors go to .git/gitmem/capture.log in the store
    (~/.local/state/gitmem/capture.log without one) and the exit code is 0.
    """
    folder: Path | None = None
    try:
        store = ctx.store_path()
        folder = hookinput.state_dir(store) if Path(store, ".git").exists() else None
        if agent == "codex":
            transcript = hookinput.notify_transcript(payload[-1] if payload else "")
        else:
            transcript = hookinput.hook_transcript(sys.stdin.read())
        if folder is None:
            raise FileNotFoundError(f"{store}: no gitmem store (gitmem init)")
        if hookinput.unchanged(store, transcript):
            return
        # only now the importers and the store: an unchanged transcript never loads them
        from gitmem.importers.agent_hooks import capture as capture_transcript

        mm = ctx.manager()
        try:
            capture_transcript(
                mm, agent, transcript, tools="full" if tools == "full" else "summary"
            )
        finally:
            mm.close()
    except Exception as exc:  # a hook must never fail its agent
        hookinput.log_failure(folder, f"capture {agent}: {type(exc).__name__}: {exc}")
