"""The gitmem command end to end, checked with the real git binary."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from gitmem.cli import cli
from tests.conftest import git

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == code, (result.output, result.stderr)
    return result.output if code == 0 else result.stderr


def test_init_save_show_list_check_end_to_end(store: Path) -> None:
    run("init", str(store))
    repo = ("--repo", str(store))
    sha = run(
        *repo,
        "--agent",
        "cli-agent",
        "save",
        "books",
        "--user",
        "Recommend asyncio books",
        "--assistant",
        "Fluent Python",
        "--tag",
        "python",
        "--timestamp",
        "2024-04-15T15:30:25+08:00",
        "--id",
        "t1",
    ).strip()
    assert sha == git(store, "rev-parse", "HEAD").strip()
    run(
        *repo,
        "save",
        "group",
        "-m",
        "Caroline: I went to a support group",
        "-m",
        "Melanie: Wow!",
        "--meta",
        "project=locomo",
    )
    shown = json.loads(run(*repo, "show", "books", "--json"))
    assert shown["interactions"][0]["id"] == "t1"
    assert shown["interactions"][0]["messages"][1] == {
        "speaker": "Assistant",
        "content": "Fluent Python",
    }
    raw = run(*repo, "show", "books", "--raw")
    assert raw == (store / "sessions" / "2a" / "books.md").read_text()
    text = run(*repo, "show", "group")
    assert "Caroline: I went to a support group" in text
    listed = json.loads(run(*repo, "--json", "list"))
    assert [r["id"] for r in listed] == ["group", "books"] or {r["id"] for r in listed} == {
        "group",
        "books",
    }
    assert json.loads(run(*repo, "list", "--tag", "python", "--json"))[0]["id"] == "books"
    assert "parse cleanly" in run(*repo, "check")
    # the store, checked by git itself
    git(store, "fsck", "--strict")
    assert git(store, "status", "--porcelain") == ""
    trailers = git(store, "log", "--format=%(trailers:key=Gitmem-Agent,valueonly)", "-2")
    assert "cli-agent" in trailers
    assert git(store, "rev-list", "--count", "HEAD").strip() == "3"


def test_errors_go_to_stderr_with_exit_1(store: Path) -> None:
    run("init", str(store))
    err = run("--repo", str(store), "show", "missing", code=1)
    assert "no session 'missing'" in err
    err = run("--repo", str(store / "nowhere"), "list", code=1)
    assert "gitmem init" in err


def test_usage_errors_exit_2(store: Path) -> None:
    run("init", str(store))
    run("--repo", str(store), "save", "s", code=2)
    run("--repo", str(store), "save", "s", "--meta", "novalue", "--user", "x", code=2)
    run("--repo", str(store), "save", "s", "--user", "x", "--timestamp", "yesterday", code=2)


def test_check_reports_path_and_line_and_exits_1(store: Path) -> None:
    run("init", str(store))
    run("--repo", str(store), "save", "s", "--user", "q", "--assistant", "a")
    path = store / "sessions" / "a0" / "s.md"
    lines = path.read_text().splitlines()
    at = next(n for n, line in enumerate(lines) if line.startswith("### "))
    lines[at] = "### yesterday afternoon"
    path.write_text("\n".join(lines) + "\n")
    out = CliRunner().invoke(cli, ["--repo", str(store), "check"])
    assert out.exit_code == 1
    assert f"sessions/a0/s.md:{at + 1}:" in out.output
    # and the broken file is not overwritten by a save
    err = run("--repo", str(store), "save", "s", "--user", "q2", code=1)
    assert f"sessions/a0/s.md:{at + 1}:" in err
    assert path.read_text().splitlines()[at] == "### yesterday afternoon"


def test_gitmem_repo_environment_variable(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run("init", str(store))
    monkeypatch.setenv("GITMEM_REPO", str(store))
    run("save", "s", "--user", "q")
    assert "s\t1 turns" in run("list")


def _without_ids(line: str) -> str:
    return re.sub(r"\b[if][0-9a-f]{8}\b", "ID", line.strip())


def test_python_dash_m_and_demo_run_offline(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gitmem", "demo", "--path", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "== done" in out.stdout
    assert "git status --porcelain: clean" in out.stdout
    git(tmp_path / "d", "fsck", "--strict")
    # the README quotes its output (turn and fact ids are random per run)
    printed = {_without_ids(line) for line in out.stdout.splitlines()}
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    quoted = [_without_ids(line) for line in readme if line.startswith("  | ")]
    assert len(quoted) >= 4 and [line for line in quoted if line not in printed] == []
    # its memory reads as notes: named subjects, no transcript lines, no questions
    memory = (tmp_path / "d" / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    facts = [line for line in memory.splitlines() if line.startswith("- ")]
    assert "- The user prefers short books, under 200 pages." in memory
    assert facts and not [f for f in facts if "User:" in f or "Assistant:" in f or "？" in f]
    # run again on the same folder: refused, nothing added
    head = git(tmp_path / "d", "rev-parse", "HEAD")
    again = subprocess.run(
        [sys.executable, "-m", "gitmem", "demo", "--path", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert again.returncode == 1 and "not an empty folder" in again.stderr
    assert git(tmp_path / "d", "rev-parse", "HEAD") == head


def _commands(group: click.Group, prefix: str = "") -> list[str]:
    names = []
    for name, command in sorted(group.commands.items()):
        names.append(prefix + name)
        if isinstance(command, click.Group):
            names.extend(_commands(command, prefix + name + " "))
    return names


def test_every_command_has_help_and_is_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    for name in _commands(cli):
        command = cli
        for part in name.split():
            assert isinstance(command, click.Group)
            command = command.commands[part]
        assert command.help, f"gitmem {name} has no help text"
        assert f"gitmem {name}" in readme, f"README does not mention `gitmem {name}`"


def test_mcp_without_the_mcp_extra_says_what_to_install(store: Path) -> None:
    # as if the mcp package were not installed: importing it fails
    script = (
        "import sys; sys.modules['mcp'] = None; from gitmem.cli import main; "
        f"sys.argv = ['gitmem', '--repo', {str(store)!r}, 'mcp', '--init']; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 1
    assert "pip install '.[mcp]' in gitmem's checkout" in done.stderr
    assert "Traceback" not in done.stderr
    assert not store.exists()  # nothing made: not even the --init store
