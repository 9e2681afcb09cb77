"""The CLI starts without loading what a command does not need: `gitmem --version` imports
neither the models (pydantic) nor the store (GitPython), and a command loads its own module
only. Counted in imported modules, never in seconds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gitmem.cli import cli
from gitmem.cli.base import CommandsOnFirstUse

ROOT = Path(__file__).resolve().parent.parent


def _loaded_by(*args: str) -> set[str]:
    script = (
        "import sys; from gitmem.cli import main; sys.argv = ['gitmem', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('\\n'.join(sorted(sys.modules)), file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=120,
    )
    return set(done.stderr.split())


def test_version_loads_neither_models_nor_store() -> None:
    loaded = _loaded_by("--version")
    heavy = {"pydantic", "git", "gitmem.models", "gitmem.manager", "gitmem.cli.sessions"}
    assert not heavy & loaded, sorted(heavy & loaded)


def test_a_command_loads_its_own_module_only() -> None:
    loaded = _loaded_by("save", "--help")
    assert "gitmem.cli.sessions" in loaded
    assert not {"gitmem.cli.search", "gitmem.cli.serve", "gitmem.cli.imports"} & loaded


@pytest.mark.parametrize(
    ("command", "extra"), [("mcp", ["--transport", "streamable-http"]), ("web", [])]
)
def test_a_refused_bind_is_told_before_the_server_libraries_load(
    tmp_path: Path, command: str, extra: list[str]
) -> None:
    """The tests of the bind policy run many such refusals; a user's typo fails fast too."""
    loaded = _loaded_by("--repo", str(tmp_path), command, *extra, "--token", "short")
    assert not {"mcp", "starlette", "uvicorn", "gitmem.mcp.run", "gitmem.web.run"} & loaded


def test_the_map_names_the_module_of_every_command() -> None:
    commands = cli.commands
    assert isinstance(commands, CommandsOnFirstUse)
    assert set(commands) == set(commands.modules)
    for name, command in commands.items():
        assert str(command.callback.__module__) in commands.modules[name], name


@pytest.mark.parametrize(("group", "sub"), [("import", "claude-code"), ("hooks", "print")])
def test_a_group_loads_the_modules_that_add_to_it(group: str, sub: str) -> None:
    """Another module adds subcommands to ``import`` and ``hooks``: asking for the group in a
    new process must load it too."""
    done = subprocess.run(
        [sys.executable, "-m", "gitmem", group, "--help"], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0 and sub in done.stdout, done.stdout + done.stderr


def test_a_group_met_through_another_command_still_loads_its_other_modules() -> None:
    """``export`` loads the module that also makes the ``import`` group; asking for ``import``
    afterwards in that process must still load the module that adds the coding agents."""
    script = (
        "from click.testing import CliRunner\n"
        "from gitmem.cli import cli\n"
        "runner = CliRunner()\n"
        "runner.invoke(cli, ['export', '--help'])\n"
        "print(runner.invoke(cli, ['import', '--help']).output)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert "claude-code" in done.stdout, done.stdout + done.stderr
