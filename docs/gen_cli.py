"""Write docs/cli.md, the command reference, from gitmem's click command tree.

    python docs/gen_cli.py            # rewrite docs/cli.md
    python docs/gen_cli.py --check    # exit 1 when docs/cli.md differs from the commands

Every command and group under ``gitmem`` (hidden ones left out), depth first in name order:
its usage line, its help text and a table of its options (``--help``, which every command has,
left out). tests/test_cli_reference.py fails when docs/cli.md is stale: change a command's help
or options, then run this.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's gitmem, whether or not it is installed

from gitmem.cli import cli  # noqa: E402

TARGET = ROOT / "docs" / "cli.md"
WIDTH = 100  # click wraps usage lines at the terminal width: fixed, so the page is stable

HEADER = """\
# Command reference

Generated from the commands themselves by `python docs/gen_cli.py`; do not edit by hand
(tests/test_cli_reference.py fails when this page is stale). `gitmem COMMAND --help` prints
the same. The [README](../README.md#command-line) groups the commands by what they do.
"""


def walk(command: click.Command, ctx: click.Context) -> Iterator[click.Context]:
    """``ctx`` and the contexts of every visible subcommand below it, depth first."""
    yield ctx
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            sub = command.commands[name]
            if not sub.hidden:
                child = click.Context(sub, info_name=name, parent=ctx, terminal_width=WIDTH)
                yield from walk(sub, child)


def help_text(command: click.Command) -> str:
    """The command's help as Markdown paragraphs (click's ``\\b`` no-rewrap markers dropped)."""
    text = (command.help or "").strip()
    lines = [line for line in text.splitlines() if line.strip() != "\b"]
    return "\n".join(line.strip() for line in lines)


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def options_table(ctx: click.Context) -> list[str]:
    rows = []
    for param in ctx.command.get_params(ctx):
        record = param.get_help_record(ctx)
        if isinstance(param, click.Option) and record is not None and "--help" not in param.opts:
            names, help_ = record
            rows.append(f"| `{cell(names)}` | {cell(help_)} |")
    if not rows:
        return []
    return ["| option | what it does |", "|---|---|", *rows, ""]


def section(ctx: click.Context) -> list[str]:
    command = ctx.command
    path = ctx.command_path
    lines = [f"## `{path}`", ""]
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines += ["```text", f"Usage: {path} {usage}".rstrip(), "```", ""]
    text = help_text(command)
    if text:
        lines += [text, ""]
    if isinstance(command, click.Group):
        names = [n for n in sorted(command.commands) if not command.commands[n].hidden]
        listed = ", ".join(f"[`{n}`](#{anchor(f'{path} {n}')})" for n in names)
        lines += [f"Commands: {listed}.", ""]
    return lines + options_table(ctx)


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading (the backticks around it drop out)."""
    return "".join(c for c in heading.lower() if c.isalnum() or c in " -_").replace(" ", "-")


def render() -> str:
    root = click.Context(cli, info_name="gitmem", terminal_width=WIDTH)
    lines = [HEADER]
    for ctx in walk(cli, root):
        lines += section(ctx)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if TARGET.read_text() != text:
            print(f"{TARGET} is stale: run python docs/gen_cli.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
