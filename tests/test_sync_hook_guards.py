"""The pre-commit hook against a person's commit that would lose saves: a stale editor copy
that drops saved turns, and a commit that would take in a save a killed writer left."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem import MemoryManager
from gitmem.cli import cli
from tests.conftest import git

ROOT = Path(__file__).resolve().parent.parent
SESSION = "sessions/a0/s.md"


@pytest.fixture(autouse=True)
def this_gitmem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


def commit(store: Path, message: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "commit", "-qam", message],
        cwd=store,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )


def _stale_copy_written_back(mm: MemoryManager, store: Path) -> list[str]:
    """A person's editor holds the file from before two saves and writes it back (with
    the person's own change); returns the ids of the two saves it drops."""
    path = store / SESSION
    stale = path.read_text()
    ids = ["late-1", "late-2"]
    for n, iid in enumerate(ids):
        mm.save_interaction("s", f"question {n}", f"answer {n}", interaction_id=iid)
    path.write_text(stale.replace("A program git runs", "A program that git runs"))
    return ids


@pytest.fixture
def mm(store: Path) -> MemoryManager:
    mm = MemoryManager.init(store)
    mm.save_interaction(
        "s",
        "What is a merge driver?",
        "A program git runs to merge a file.",
        interaction_id="first",
    )
    return mm


def test_pre_commit_refuses_a_stale_copy_that_drops_saved_turns(
    mm: MemoryManager, store: Path
) -> None:
    mm.install_hooks()
    dropped = _stale_copy_written_back(mm, store)
    head = git(store, "rev-parse", "HEAD")
    done = commit(store, "clarify")
    assert done.returncode == 1
    assert SESSION in done.stderr
    assert all(i in done.stderr for i in dropped), done.stderr
    assert "GITMEM_ALLOW_DROP=1" in done.stderr
    assert git(store, "rev-parse", "HEAD") == head
    # said on purpose: the commit goes through
    done = commit(store, "drop them", GITMEM_ALLOW_DROP="1")
    assert done.returncode == 0, done.stderr
    assert "late-1" not in (store / SESSION).read_text()


def test_pre_commit_lets_a_whole_session_file_be_removed(mm: MemoryManager, store: Path) -> None:
    mm.install_hooks()
    git(store, "rm", "-q", SESSION)
    done = commit(store, "forget this session")
    assert done.returncode == 0, done.stderr


def test_check_reports_turns_a_person_s_commit_dropped(mm: MemoryManager, store: Path) -> None:
    dropped = _stale_copy_written_back(mm, store)
    git(store, "commit", "-qam", "an editor's stale copy")  # no hook installed
    sha = git(store, "rev-parse", "HEAD").strip()
    problems = mm.check()
    assert [p.path for p in problems] == [SESSION]
    assert sha[:12] in problems[0].problem
    assert all(i in problems[0].problem for i in dropped)
    assert "first" not in problems[0].problem.split("dropped")[1]
    result = CliRunner().invoke(cli, ["--repo", str(store), "check"])
    assert result.exit_code == 1 and "late-2" in result.output
    # a drop said on purpose (the trailer) is not reported, nor are gitmem's own commits
    git(store, "commit", "-q", "--amend", "-m", "drop two turns\n\nGitmem-Allow-Drop: yes")
    mm.save_interaction("s", "again", "ok")
    assert mm.check() == []


def _killed_save(store: Path, kill_at: str) -> None:
    """A real writer process saves one turn and SIGKILLs itself at ``kill_at``."""
    code = (
        "import sys\nfrom gitmem.manager import MemoryManager\n"
        "from tests.reliability.workers import arm\n"
        f"mm = MemoryManager(sys.argv[1])\narm({kill_at!r})\n"
        "mm.save_interaction('s', 'second', 'ok', interaction_id='second')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(store)],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
    )
    assert done.returncode == -9, done.stderr


@pytest.mark.parametrize(
    ("kill_at", "outcome"),
    [
        ("Refs.move:before:1", "finished"),  # the index staged, the branch not moved
        ("GitIndexFile.write:before:1", "undone"),  # the new file in place, not staged
    ],
)
def test_a_person_s_commit_does_not_take_in_a_killed_save(
    mm: MemoryManager, store: Path, kill_at: str, outcome: str
) -> None:
    (store / "notes.txt").write_text("mine\n")
    git(store, "add", "notes.txt")
    git(store, "commit", "-qm", "notes")
    mm.install_hooks()
    mm.close()
    before = git(store, "rev-parse", "HEAD").strip()
    _killed_save(store, kill_at)
    (store / "notes.txt").write_text("mine, edited\n")
    # what a person does: git refuses, names the lock; they remove it and commit again
    done = commit(store, "my notes")
    assert done.returncode != 0 and "index.lock" in done.stderr
    (store / ".git" / "index.lock").unlink()
    done = commit(store, "my notes")
    # the hook repaired the save first and stopped this commit, which had taken it in
    assert done.returncode == 1
    assert f"{SESSION}:1: a gitmem save cut short" in done.stderr
    assert ("finished as its own commit" if outcome == "finished" else "was undone") in done.stderr
    assert "run your commit again" in done.stderr
    done = commit(store, "my notes")
    assert done.returncode == 0, done.stderr
    mine = git(store, "rev-parse", "HEAD").strip()
    assert git(store, "diff", "--name-only", f"{mine}^", mine) == "notes.txt\n"
    assert git(store, "log", "-1", "--format=%s", mine) == "my notes\n"
    assert git(store, "status", "--porcelain") == ""
    assert not (store / ".git" / "refs" / "heads" / "main.lock").exists()
    if outcome == "undone":
        assert git(store, "rev-parse", f"{mine}^").strip() == before
        assert "second" not in (store / SESSION).read_text()
        return
    # the save is its own commit, with its trailers, between the two
    save = git(store, "rev-parse", f"{mine}^").strip()
    assert git(store, "rev-parse", f"{save}^").strip() == before
    trailers = git(store, "log", "-1", "--format=%(trailers:only)", save)
    assert "Gitmem-Op: save" in trailers and "Gitmem-Session: s" in trailers
    assert "second" in git(store, "show", f"{save}:{SESSION}")
    assert "second" in (store / SESSION).read_text()
