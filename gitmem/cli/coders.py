"""Coding agents in: ``gitmem import claude-code | codex | gemini-cli``, ``gitmem capture ...``
(run by the agents' hooks after each turn) and ``gitmem hooks print ...`` (the settings that
make them run it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import click

from gitmem.cli.base import Context, pass_ctx
from gitmem.cli.imports import dry_run_option, import_, run_reported, run_watching, watch_option
from gitmem.cli.sharing import hooks
from gitmem.importers import claude_code, codex, gemini_cli, hookinput
from gitmem.importers.engine import ImportResult, Meter
from gitmem.importers.transcripts import Tools, find_files, import_transcripts

AGENTS = hookinput.AGENTS
_MODULES: dict[str, ModuleType] = {
    "claude-code": claude_code,
    "codex": codex,
    "gemini-cli": gemini_cli,
}
_WHAT = {
    "claude-code": "a Claude Code transcript or projects folder",
    "codex": "a Codex rollout file or sessions folder",
    "gemini-cli": "a Gemini CLI chat file or ~/.gemini/tmp",
}


def tools_option(func: Callable[..., None]) -> Callable[..., None]:
    return click.option(
        "--tools",
        type=click.Choice(["summary", "full"]),
        default="summary",
        show_default=True,
        help="Tool calls as one line in the agent's message, or also their results "
        "as a 'tool' speaker.",
    )(func)


def _import_agent(
    ctx: Context,
    agent: str,
    path: str | None,
    tools: str,
    dry_run: bool,
    watch: bool,
    interval: float,
) -> None:
    module = _MODULES[agent]
    root = Path(path).expanduser() if path else module.default_root()
    mm = ctx.manager()
    mode: Tools = "full" if tools == "full" else "summary"

    def work(meter: Meter, progress: Callable[[ImportResult], None]) -> ImportResult:
        files, skipped = find_files(root, module.PATTERNS, _WHAT[agent])
        return import_transcripts(
            mm,
            files,
            module.read,
            source=agent,
            subject=f"Import {agent} sessions from {root.name}",
            tools=mode,
            dry_run=dry_run,
            meter=meter,
            progress=progress,
            warnings=skipped,
        )

    if watch:
        run_watching(ctx, agent, lambda: [root], work, interval=interval)
    else:
        run_reported(ctx, agent, str(root), work)


@import_.command("claude-code")
@click.argument("path", required=False, type=click.Path())
@tools_option
@dry_run_option
@watch_option
@pass_ctx
def import_claude_code(
    ctx: Context, path: str | None, tools: str, dry_run: bool, watch: bool, interval: float
) -> None:
    """Import Claude Code sessions: a transcript (.jsonl) or a folder of them
    (default ~/.claude/projects)."""
    _import_agent(ctx, "claude-code", path, tools, dry_run, watch, interval)


@import_.command("codex")
@click.argument("path", required=False, type=click.Path())
@tools_option
@dry_run_option
@watch_option
@pass_ctx
def import_codex(
    ctx: Context, path: str | None, tools: str, dry_run: bool, watch: bool, interval: float
) -> None:
    """Import OpenAI Codex CLI sessions: a rollout file or a folder of them
    (default ~/.codex/sessions)."""
    _import_agent(ctx, "codex", path, tools, dry_run, watch, interval)


@import_.command("gemini-cli")
@click.argument("path", required=False, type=click.Path())
@tools_option
@dry_run_option
@watch_option
@pass_ctx
def import_gemini_cli(
    ctx: Context, path: str | None, tools: str, dry_run: bool, watch: bool, interval: float
) -> None:
    """Import Gemini CLI chats and checkpoints: a file or a folder (default ~/.gemini/tmp)."""
    _import_agent(ctx, "gemini-cli", path, tools, dry_run, watch, interval)


@hooks.command("print")
@click.argument("agent", type=click.Choice(AGENTS))
@click.option(
    "--command", "command", default="gitmem", show_default=True, help="How the hook runs gitmem."
)
@pass_ctx
def hooks_print(ctx: Context, agent: str, command: str) -> None:
    """Print the hook settings for AGENT, to merge into its settings file; they capture
    into --repo (or the store around the current folder)."""
    click.echo(f"# merge into {hookinput.SETTINGS_FILES[agent]}", err=True)
    click.echo(hookinput.hook_snippet(agent, ctx.store_path(), command), nl=False)
