"""Git hooks for hand edits: install, chaining, core.hooksPath, the pre-commit framework."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem import MemoryManager
from gitmem.cli import cli
from tests.conftest import git

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def this_gitmem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


@pytest.fixture
def mm(store: Path) -> MemoryManager:
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "What is a merge driver?", "A program git runs to merge a file.")
    return mm


def commit(store: Path, message: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "commit", "-qam", message], cwd=store, capture_output=True, text=True
    )


def break_heading(path: Path) -> int:
    lines = path.read_text().splitlines()
    at = next(n for n, line in enumerate(lines) if line.startswith("### "))
    lines[at] = "### sometime last week"
    path.write_text("\n".join(lines) + "\n")
    return at + 1


def test_pre_commit_rejects_a_broken_hand_edit_with_its_line(
    mm: MemoryManager, store: Path
) -> None:
    written = mm.install_hooks()
    assert [p.name for p in written] == [
        "pre-commit",
        "post-merge",
        "post-checkout",
        "pre-merge-commit",
        "pre-rebase",
        "pre-push",
    ]
    path = store / "sessions" / "a0" / "s.md"
    # a good hand edit passes
    path.write_text(path.read_text().replace("A program git runs", "A program that git runs"))
    done = commit(store, "clarify")
    assert done.returncode == 0, done.stderr
    head = git(store, "rev-parse", "HEAD")
    line = break_heading(path)
    done = commit(store, "break it")
    assert done.returncode != 0
    assert f"sessions/a0/s.md:{line}:" in done.stderr
    assert "commit refused" in done.stderr
    assert git(store, "rev-parse", "HEAD") == head


def test_conflict_markers_are_refused(mm: MemoryManager, store: Path) -> None:
    mm.install_hooks()
    path = store / "sessions" / "a0" / "s.md"
    text = path.read_text()
    path.write_text(text + "<<<<<<< ours\n> mine\n=======\n> theirs\n>>>>>>> theirs\n")
    done = commit(store, "left-over conflict")
    assert done.returncode != 0
    assert "unresolved merge conflict marker" in done.stderr


def test_existing_hooks_are_kept_and_run_first(
    mm: MemoryManager, store: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "own-hook-ran"
    own = store / ".git" / "hooks" / "pre-commit"
    own.write_text(f"#!/bin/sh\necho ran >> {marker}\n")
    own.chmod(0o755)
    mm.install_hooks()
    mm.install_hooks()  # again: does not chain itself
    chained = store / ".git" / "hooks" / "pre-commit.before-gitmem"
    assert "own-hook-ran" in chained.read_text()
    path = store / "sessions" / "a0" / "s.md"
    path.write_text(path.read_text().replace("merge driver", "merge driver, really"))
    assert commit(store, "edit").returncode == 0
    assert marker.read_text() == "ran\n"
    # the old hook failing stops the commit as it did before
    chained.write_text("#!/bin/sh\nexit 3\n")
    path.write_text(path.read_text() + "\n")
    assert commit(store, "edit").returncode != 0


def test_core_hooks_path_is_respected(mm: MemoryManager, store: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared-hooks"
    git(store, "config", "core.hooksPath", str(shared))
    written = mm.install_hooks()
    assert {p.parent for p in written} == {shared}
    assert not (store / ".git" / "hooks" / "pre-commit").exists()
    line = break_heading(store / "sessions" / "a0" / "s.md")
    done = commit(store, "broken")
    assert done.returncode != 0 and f"sessions/a0/s.md:{line}:" in done.stderr


def test_the_scripts_in_hooks_call_gitmem(
    mm: MemoryManager, store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shim = tmp_path / "bin" / "gitmem"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -P -m gitmem "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim.parent}:/usr/bin:/bin")
    for name in ("pre-commit", "post-merge", "post-checkout"):
        shutil.copy(ROOT / "hooks" / name, store / ".git" / "hooks" / name)
    line = break_heading(store / "sessions" / "a0" / "s.md")
    done = commit(store, "broken")
    assert done.returncode != 0 and f"sessions/a0/s.md:{line}:" in done.stderr
    git(store, "checkout", "--", "sessions/a0/s.md")
    done = subprocess.run(
        ["git", "checkout", "-q", "-b", "other"], cwd=store, capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stderr == ""  # post-checkout ran quietly


def test_pre_commit_framework_hook_validates_files_outside_a_store(
    tmp_path: Path, mm: MemoryManager
) -> None:
    project = tmp_path / "project" / "memory" / "sessions"
    project.mkdir(parents=True)
    good = project / "s.md"
    shutil.copy(mm.path / "sessions" / "a0" / "s.md", good)
    renamed = project / "other.md"
    shutil.copy(good, renamed)
    result = CliRunner().invoke(cli, ["hook", "pre-commit", str(good)])
    assert result.exit_code == 0, result.output
    line = break_heading(good)
    result = CliRunner().invoke(cli, ["hook", "pre-commit", str(good), str(renamed)])
    assert result.exit_code == 1
    assert f"{good}:{line}:" in result.stderr
    assert "does not match the file name" in result.stderr
    spec = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert "- id: gitmem-check" in spec and "entry: gitmem hook pre-commit" in spec


def test_cli_hooks_install_and_unknown_hook(mm: MemoryManager, store: Path) -> None:
    result = CliRunner().invoke(cli, ["--repo", str(store), "hooks", "install"])
    assert result.exit_code == 0 and "pre-commit" in result.output
    assert CliRunner().invoke(cli, ["hook", "pre-applypatch"]).exit_code == 2
