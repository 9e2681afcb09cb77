"""The sharing commands of the gitmem CLI, end to end on real repositories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem.cli import cli
from gitmem.format import parse as markdown
from gitmem.models import Interaction, Message, Session, Summary
from tests.conftest import git

ROOT = Path(__file__).resolve().parent.parent
T0 = datetime(2024, 4, 15, 15, 30, tzinfo=timezone(timedelta(hours=8)))


def run(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == code, (result.output, result.stderr)
    return result.output if code == 0 else result.stderr


def test_remote_push_clone_sync_pull(tmp_path: Path) -> None:
    remote = tmp_path / "memory.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    run("init", a)
    assert "added remote origin" in run("--repo", a, "remote", "add", "origin", remote.as_uri())
    assert json.loads(run("--repo", a, "remote", "list", "--json")) == [
        {"name": "origin", "url": remote.as_uri()}
    ]
    run("--repo", a, "save", "s", "--user", "from a", "--timestamp", T0.isoformat())
    assert run("--repo", a, "push").strip() == "pushed"
    assert "cloned" in run("clone", remote.as_uri(), b)
    run(
        "--repo",
        a,
        "save",
        "s",
        "--user",
        "a again",
        "--timestamp",
        (T0 + timedelta(minutes=1)).isoformat(),
    )
    run(
        "--repo",
        b,
        "save",
        "s",
        "--user",
        "from b",
        "--timestamp",
        (T0 + timedelta(minutes=2)).isoformat(),
    )
    out = run("--repo", a, "sync")
    assert "sync origin/main" in out and "pushed" in out
    err = run("--repo", b, "push", code=1)
    assert "gitmem sync" in err
    synced = json.loads(run("--repo", b, "--json", "sync"))
    assert synced["action"] == "merge" and synced["pushed"] is True
    pulled = json.loads(run("--repo", a, "pull", "--json"))
    assert pulled["action"] == "fast-forward"
    shown = json.loads(run("--repo", a, "show", "s", "--json"))
    assert [t["messages"][0]["content"] for t in shown["interactions"]] == [
        "from a",
        "a again",
        "from b",
    ]
    for store in (a, b):
        assert git(Path(store), "status", "--porcelain") == ""
    assert "no remote named 'nope'" in run("--repo", a, "sync", "nope", code=1)


def _write(path: Path, session: Session) -> Path:
    path.write_text(markdown.render(session))
    return path


def test_merge_file_driver_command(tmp_path: Path) -> None:
    def turn(tid: str, minute: int) -> Interaction:
        return Interaction(
            id=tid,
            timestamp=T0 + timedelta(minutes=minute),
            messages=[Message(speaker="User", content=tid)],
        )

    base = Session(id="s", created=T0, last_active=T0, interactions=[turn("t0", 0)])
    ours = base.model_copy(
        update={
            "interactions": [turn("t0", 0), turn("a", 1)],
            "summary": Summary(text="ours", generated=T0),
        }
    )
    theirs = base.model_copy(
        update={
            "interactions": [turn("t0", 0), turn("b", 2)],
            "summary": Summary(text="theirs", generated=T0 + timedelta(hours=1)),
        }
    )
    o = _write(tmp_path / "O", base)
    a = _write(tmp_path / "A", ours)
    b = _write(tmp_path / "B", theirs)
    result = CliRunner().invoke(cli, ["merge-file", str(o), str(a), str(b), "sessions/s.md"])
    assert result.exit_code == 0, result.stderr
    merged = markdown.parse(a.read_text())
    assert [t.id for t in merged.interactions] == ["t0", "a", "b"]
    assert merged.summary is not None and merged.summary.text == "theirs"
    assert "both sides rewrote the summary" in result.stderr
    assert "git show HEAD:sessions/s.md" in result.stderr  # where the dropped one lives
    # a side that does not parse: git's own conflict, exit 1
    a.write_text(markdown.render(ours).replace("### 2024", "### someday", 1))
    result = CliRunner().invoke(cli, ["merge-file", str(o), str(a), str(b), "sessions/s.md"])
    assert result.exit_code == 1
    assert "cannot merge sessions/s.md by meaning" in result.stderr
    assert "<<<<<<< ours" in a.read_text()


@pytest.mark.parametrize("command", [["push"], ["pull"], ["sync"]])
def test_sharing_commands_without_a_remote_fail_cleanly(store: Path, command: list[str]) -> None:
    run("init", str(store))
    err = run("--repo", str(store), *command, code=1)
    assert "no remote named 'origin'" in err and "gitmem remote add" in err


def test_the_driver_path_loads_neither_the_manager_nor_gitpython(tmp_path: Path) -> None:
    # git starts the driver once per merged file: it must start light
    probe = (
        "import os, sys, runpy; sys.argv = ['gitmem', 'merge-file', '--help']\n"
        "def stop(code):\n    raise SystemExit(code)\n"
        "os._exit = stop  # the driver ends its process at once; here the probe goes on\n"
        "try:\n    runpy.run_module('gitmem', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in ('git', 'gitmem.manager', 'click') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-P", "-c", probe],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert "usage: gitmem merge-file" in done.stderr


def test_the_merge_driver_notes_carry_no_secret(tmp_path: Path) -> None:
    # git prints the driver's stderr on every `git pull`: the note quoting a dropped summary
    # must not show a secret that one side's summary held
    key = "ghp_" + "A1b2C3d4" * 4 + "A1b2"
    base = Session(id="s", created=T0, last_active=T0)
    ours = base.model_copy(update={"summary": Summary(text=f"token {key}", generated=T0)})
    theirs = base.model_copy(
        update={"summary": Summary(text="theirs", generated=T0 + timedelta(hours=1))}
    )
    paths = [_write(tmp_path / name, s) for name, s in (("O", base), ("A", ours), ("B", theirs))]
    done = subprocess.run(
        [sys.executable, "-m", "gitmem", "merge-file", *map(str, paths), "sessions/s.md"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "both sides rewrote the summary" in done.stderr
    assert key not in done.stderr and "[REDACTED:github-token]" in done.stderr
