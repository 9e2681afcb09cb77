"""``gitmem import ...`` and ``gitmem export ...``: other tools' memory in and out.

Every importer shares the options and the report made here: ``--dry-run`` (say what would
change, write nothing), ``--json`` (one document: sessions, turns added, skipped,
conflicts, commit), ``--watch`` (import again whenever the source changes), and a progress
line on stderr for long imports (never with ``--json``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click

from gitmem.cli.base import Context, cli, emit, pass_ctx, rev_option
from gitmem.importers import chat, locomo, nanobot, openclaw
from gitmem.importers.engine import ImportResult, Meter
from gitmem.importers.watch import watch as watch_files

F = TypeVar("F", bound=Callable[..., Any])

# the progress line is redrawn at most this often (seconds): on a terminal, in a log
REDRAW_S = 0.2
LOG_EVERY_S = 5.0


@cli.group("import")
def import_() -> None:
    """Import memory from other tools (nanobot, OpenClaw, chat exports, LoCoMo)."""


@cli.group("export")
def export() -> None:
    """Write a session out in another tool's format."""


def dry_run_option(func: F) -> F:
    """``--dry-run``: report what the import would change and write nothing."""
    return click.option("--dry-run", is_flag=True, help="Say what would change; write nothing.")(
        func
    )


class ProgressLine:
    """A one-line progress display on stderr: bytes read (of the total when known),
    sessions and turns so far. Silent with ``--json``; redrawn in place on a terminal,
    printed every few seconds otherwise (logs)."""

    def __init__(self, ctx: Context, meter: Meter, label: str) -> None:
        self.quiet = ctx.json
        self.meter = meter
        self.label = label
        self.tty = sys.stderr.isatty()
        self.shown = time.monotonic()  # a short import draws nothing
        self.every = REDRAW_S if self.tty else LOG_EVERY_S
        self.drawn = False

    def __call__(self, result: ImportResult) -> None:
        now = time.monotonic()
        if self.quiet or now - self.shown < self.every:
            return
        self.shown = now
        done, total = self.meter.done, self.meter.total
        if total:
            filled = min(30, 30 * done // total)
            bar = f"[{'#' * filled}{'.' * (30 - filled)}] {100 * done // total:3d}% "
        else:
            bar = f"{done / 1e6:.1f} MB "
        text = f"{self.label}: {bar}{len(result.sessions)} sessions, {len(result.added)} new turns"
        click.echo(("\r" + text) if self.tty else text, err=True, nl=not self.tty)
        self.drawn = True

    def close(self) -> None:
        if self.drawn and self.tty:
            click.echo("", err=True)


def report(ctx: Context, result: ImportResult, source: str) -> None:
    """Print an import's result: the JSON document, or a line plus any conflicts."""
    if result.warnings and not ctx.json:
        click.echo("\n".join(f"warning: {w}" for w in result.warnings), err=True)
    if result.differing and not ctx.json:
        click.echo(
            f"kept {len(result.differing)} stored turn(s) that differ from {source} "
            "(session, interaction):\n  " + "\n  ".join(f"{s} {i}" for s, i in result.differing),
            err=True,
        )
    emit(ctx, result.to_dict(), result.describe)


def run_reported(
    ctx: Context,
    label: str,
    source: str,
    work: Callable[[Meter, Callable[[ImportResult], None]], ImportResult],
) -> ImportResult:
    """Run ``work(meter, progress)`` with a progress line, then print its report."""
    meter = Meter()
    line = ProgressLine(ctx, meter, label)
    try:
        result = work(meter, line)
    finally:
        line.close()
    report(ctx, result, source)
    return result


# --- --watch: import again whenever the source changes (gitmem.importers.watch) -------------

Work = Callable[[Meter, Callable[[ImportResult], None]], ImportResult]


def watch_option(func: F) -> F:
    """``--watch`` and ``--interval SECONDS``: keep importing as the source changes."""
    func = click.option(
        "--interval",
        type=click.FloatRange(min=0.05),
        default=1.0,
        show_default=True,
        metavar="SECONDS",
        help="With --watch: seconds between two looks at the files.",
    )(func)
    return click.option(
        "--watch", is_flag=True, help="Keep importing as the files change, until Ctrl-C."
    )(func)


def run_watching(
    ctx: Context,
    label: str,
    roots: Callable[[], Iterable[Path]],
    run: Work,
    *,
    interval: float = 1.0,
) -> int:
    """Import with ``run`` (as :func:`run_reported`'s ``work``) now and after every settled
    change under ``roots()``, until Ctrl-C; return how many imports ran.

    Prints one report per import that changed something (with ``--json`` one JSON document
    per line), an import's error on stderr (with ``--json`` as an error document line) and
    goes on, and a final line on stderr when stopped.
    """
    shown = [os.fspath(path) for path in roots()]
    where = ", ".join(shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")
    click.echo(f"watching {label} ({where}) every {interval:g}s (Ctrl-C to stop)", err=True)

    def once() -> ImportResult:
        meter = Meter()
        line = ProgressLine(ctx, meter, label)  # draws only for a long import
        try:
            return run(meter, line)
        finally:
            line.close()

    def on_result(result: ImportResult) -> None:
        would = result.dry_run and (result.added or result.extended or result.summaries)
        if result.commit is None and not would:
            return
        if ctx.json:
            click.echo(json.dumps(result.to_dict(), ensure_ascii=False, default=str))
        else:
            report(ctx, result, label)

    def on_error(exc: Exception) -> None:
        if ctx.json:
            click.echo(
                json.dumps({"error": str(exc), "kind": type(exc).__name__}, ensure_ascii=False)
            )
        else:
            click.echo(f"Error: {exc} (trying again when the files change)", err=True)

    count = watch_files(
        roots,
        once,
        interval=interval,
        debounce=min(0.5, interval),
        on_result=on_result,
        on_error=on_error,
    )
    click.echo(f"stopped watching {label} after {count} import(s)", err=True)
    return count


# --- end of --watch ---------------------------------------------------------------------------


@import_.command("locomo")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--convs", help="Only these conversations, e.g. 0-2 or 0,3 (default: all).")
@dry_run_option
@watch_option
@pass_ctx
def import_locomo(
    ctx: Context, file: str, convs: str | None, dry_run: bool, watch: bool, interval: float
) -> None:
    """Import a LoCoMo benchmark file: one session per LoCoMo session, turn ids kept."""
    mm = ctx.manager()
    if watch:
        run_watching(
            ctx,
            "locomo",
            lambda: [Path(file)],
            lambda meter, progress: locomo.import_locomo(mm, file, convs=convs, dry_run=dry_run),
            interval=interval,
        )
        return
    result = locomo.import_locomo(
        mm,
        file,
        convs=convs,
        dry_run=dry_run,
        progress=None if ctx.json else (lambda text: click.echo(text, err=True)),
    )
    report(ctx, result, file)


@import_.command("nanobot")
@click.argument(
    "path", required=False, default="~/.nanobot", type=click.Path(exists=False, file_okay=False)
)
@click.option(
    "--tz", help="Zone of nanobot's naive timestamps, e.g. Europe/Berlin (default: this machine's)."
)
@click.option(
    "--tools",
    type=click.Choice(["summary", "full"]),
    default="summary",
    show_default=True,
    help="Tool calls as one line in the assistant's message, or also the results "
    "as a 'tool' speaker.",
)
@dry_run_option
@watch_option
@pass_ctx
def import_nanobot(
    ctx: Context, path: str, tz: str | None, tools: str, dry_run: bool, watch: bool, interval: float
) -> None:
    """Import nanobot's memory: sessions, summaries, MEMORY.md/USER.md/SOUL.md versions
    and history, from a WORKSPACE or a NANOBOT_HOME (default ~/.nanobot)."""
    mm = ctx.manager()
    mode: nanobot.Tools = "full" if tools == "full" else "summary"

    def work(meter: Meter, progress: Callable[[ImportResult], None]) -> ImportResult:
        return nanobot.import_nanobot(
            mm, path, tz=tz, tools=mode, dry_run=dry_run, meter=meter, progress=progress
        )

    if watch:
        run_watching(ctx, "nanobot", lambda: nanobot.watched_paths(path), work, interval=interval)
        return
    run_reported(ctx, "nanobot", path, work)


@import_.command("openclaw")
@click.argument("workspace", required=False, type=click.Path(file_okay=False))
@click.option(
    "--agents-dir",
    type=click.Path(file_okay=False),
    help="Where <agentId>/sessions/ live (default: beside the workspace, else ~/.openclaw/agents).",
)
@click.option(
    "--tz", "zone", help="Zone for naive times and daily-log dates (default: the local zone)."
)
@dry_run_option
@watch_option
@pass_ctx
def import_openclaw(
    ctx: Context,
    workspace: str | None,
    agents_dir: str | None,
    zone: str | None,
    dry_run: bool,
    watch: bool,
    interval: float,
) -> None:
    """Import OpenClaw: MEMORY.md versions, daily logs and agent session transcripts."""
    mm = ctx.manager()

    def work(meter: Meter, progress: Callable[[ImportResult], None]) -> ImportResult:
        return openclaw.import_openclaw(
            mm,
            workspace,
            agents_dir=agents_dir,
            tz=zone,
            dry_run=dry_run,
            meter=meter,
            progress=progress,
        )

    if watch:
        run_watching(
            ctx,
            "openclaw",
            lambda: openclaw.watched_paths(workspace, agents_dir),
            work,
            interval=interval,
        )
    else:
        run_reported(ctx, "openclaw", workspace or "OpenClaw", work)


@import_.command("chat")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--session",
    "session_id",
    metavar="ID",
    help="Session id for a file that holds one conversation "
    "(default: chat:<id>, chatgpt:<id> or chat:<file stem>-<hash of its opening>).",
)
@click.option(
    "--tz",
    metavar="ZONE",
    help="Time zone of naive ISO times, e.g. Europe/Berlin (default: this machine's).",
)
@dry_run_option
@watch_option
@pass_ctx
def import_chat(
    ctx: Context,
    file: str,
    session_id: str | None,
    tz: str | None,
    dry_run: bool,
    watch: bool,
    interval: float,
) -> None:
    """Import chat transcripts: OpenAI messages arrays (JSON or JSONL) or ChatGPT's
    conversations.json, one session per conversation."""
    mm = ctx.manager()

    def work(meter: Meter, progress: Callable[[ImportResult], None]) -> ImportResult:
        return chat.import_chat(
            mm, file, session=session_id, tz=tz, dry_run=dry_run, meter=meter, progress=progress
        )

    if watch:
        run_watching(ctx, "chat", lambda: [Path(file)], work, interval=interval)
    else:
        run_reported(ctx, "chat", file, work)


@export.command("chat")
@click.argument("session_id", metavar="SESSION")
@click.option(
    "--output", "-o", type=click.Path(dir_okay=False), help="Write to this file instead of stdout."
)
@click.option(
    "--jsonl", is_flag=True, help="The conversation on one line (append to a JSONL file)."
)
@click.option("--at", metavar="REV|DATE", help="As the store was then (sha, HEAD~3, ISO date).")
@pass_ctx
def export_chat(
    ctx: Context, session_id: str, output: str | None, jsonl: bool, at: str | None
) -> None:
    """Write a session as {"title", "messages", "timestamps"} (JSON): "messages" is an OpenAI
    Chat Completions messages array (tool calls as tool_calls), "timestamps" the turn times
    that `gitmem import chat` reads back."""
    mm = ctx.manager()
    with rev_option(at, "--at", mm.secret_config):
        doc = chat.export_chat(mm, session_id, commit=mm.resolve(at) if at else None)
    messages = doc["messages"]
    if jsonl:
        text = json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n"
    else:
        text = json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    Path(output).write_text(text, encoding="utf-8")
    emit(
        ctx,
        {"session_id": session_id, "output": output, "messages": len(messages)},
        lambda: f"wrote {len(messages)} message(s) of {session_id} to {output}",
    )
