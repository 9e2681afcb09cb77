"""docs/cli.md is generated from the click command tree by docs/gen_cli.py: it must match."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import click

from gitmem.cli import cli

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "docs" / "gen_cli.py"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_cli", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_up_to_date() -> None:
    gen = generator()
    written = gen.TARGET.read_text()
    assert written == gen.render(), "docs/cli.md is stale: run python docs/gen_cli.py"


def shown_options(text: str, path: str) -> set[str]:
    """The option names in the first column of the options table under ``## `path` ``."""
    section = text.split(f"## `{path}`\n", 1)[1].split("\n## ", 1)[0]
    cells = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return {name for cell in cells for name in re.findall(r"(?<![\w-])--?[\w-]+", cell)}


def test_cli_reference_names_every_command_and_option() -> None:
    text = (ROOT / "docs" / "cli.md").read_text()
    missing: list[str] = []

    def visit(command: click.Command, path: str) -> None:
        if f"## `{path}`\n" not in text:
            missing.append(path)
            return
        shown = shown_options(text, path)
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                names = [o for o in (*param.opts, *param.secondary_opts) if o != "--help"]
                missing.extend(f"{path} {o}" for o in names if o not in shown)
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                if not sub.hidden:
                    visit(sub, f"{path} {name}")

    visit(cli, "gitmem")
    assert not missing, f"docs/cli.md does not show {missing}"
