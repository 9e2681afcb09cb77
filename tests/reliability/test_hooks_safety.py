"""Opening, cloning or writing a memory store never runs code that came with it.

A store can arrive as a folder (a copy, an archive, a shared volume) whose ``.git`` holds
hooks and config that execute commands. gitmem writes commits in-process (no hook runs) and
runs its own git commands with ``core.hooksPath=/dev/null`` and ``core.fsmonitor=false``.
``git clone`` copies neither hooks nor config from the remote.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from gitmem.manager import MemoryManager
from gitmem.store.repository import Housekeeping
from gitmem.summary.triggers import SummaryConfig
from tests.conftest import git

HOOKS = [
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-merge-commit",
    "post-merge",
    "post-checkout",
    "post-rewrite",
    "pre-push",
    "pre-auto-gc",
    "reference-transaction",
    "post-index-change",
    "fsmonitor-watchman",
]


def _booby_trap(store: Path, markers: Path) -> None:
    """Every hook, and an fsmonitor command, writes a marker file when it runs."""
    markers.mkdir(exist_ok=True)
    hooks = store / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for name in HOOKS:
        hook = hooks / name
        hook.write_text(f"#!/bin/sh\ntouch '{markers / name}'\ncat >/dev/null 2>&1\nexit 0\n")
        hook.chmod(hook.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monitor = store / ".git" / "monitor.sh"
    monitor.write_text(f"#!/bin/sh\ntouch '{markers / 'fsmonitor'}'\necho\n")
    monitor.chmod(0o755)
    git(store, "config", "core.fsmonitor", str(monitor))
    git(store, "config", "gc.auto", "1")  # any gc --auto would run (and its hook)
    git(store, "config", "gc.autoDetach", "false")


def _exercise(store: Path) -> None:
    """Every kind of write gitmem makes, plus reads that run git."""
    mm = MemoryManager(store, housekeeping=Housekeeping(every_commits=3))
    mm.summary_config = SummaryConfig(offline=True, on_loss="review", loss_threshold=0.0)
    for n in range(4):
        mm.save_interaction("s", f"Alice met Bob in Paris on day {n}", "Noted.")
    with mm.batch("two at once"):
        mm.save_interaction("t", "first", "ok")
        mm.save_interaction("u", "second", "ok")
    mm.update_metadata("s", add_tags=["trip"])
    mm.summarize("s")
    mm.save_interaction("s", "Carol joined in Rome", "Noted.")
    head = mm.head()
    assert head is not None
    mm.repository.set_ref("refs/heads/gitmem/probe", head, None)  # side refs: update-ref
    mm.repository.set_ref("refs/heads/gitmem/probe", None, head)
    mm.delete_session("u")
    mm.check()
    mm.scan_history()
    mm.history("s")
    mm.search("Paris")
    mm.repository.pack()  # housekeeping: repack, gc --auto, commit-graph
    mm.close()


def test_no_hook_or_fsmonitor_in_a_store_runs_during_gitmem_writes(
    store: Path, tmp_path: Path
) -> None:
    MemoryManager.init(store).close()
    markers = tmp_path / "markers"
    _booby_trap(store, markers)
    _exercise(store)
    assert sorted(p.name for p in markers.iterdir()) == []
    # the trap is real: git itself runs it
    git(store, "commit", "--allow-empty", "-qm", "by hand")
    assert {"pre-commit", "post-commit"} <= {p.name for p in markers.iterdir()}


def test_a_clone_brings_no_hooks_and_no_config(store: Path, tmp_path: Path) -> None:
    MemoryManager.init(store).save_interaction("s", "hello", "hi")
    markers = tmp_path / "markers"
    # a hooks folder committed in the working tree: the only way to ship hooks along
    shipped = store / "hooks"
    shipped.mkdir()
    for name in ("post-checkout", "pre-commit"):
        (shipped / name).write_text(f"#!/bin/sh\ntouch '{markers / ('shipped-' + name)}'\n")
        (shipped / name).chmod(0o755)
    git(store, "add", "hooks")
    git(store, "commit", "-qm", "ship hooks")
    _booby_trap(store, markers)
    git(store, "config", "core.hooksPath", "hooks")
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "-q", str(store), str(clone)],
        check=True,
        env=dict(os.environ, GIT_CONFIG_NOSYSTEM="1"),
    )
    assert not (markers / "shipped-post-checkout").exists()
    config = (clone / ".git" / "config").read_text()
    assert "hooksPath" not in config and "fsmonitor" not in config
    assert not any(
        os.access(h, os.X_OK)
        for h in (clone / ".git" / "hooks").iterdir()
        if not h.name.endswith(".sample")
    )
    _exercise(clone)
    assert sorted(p.name for p in markers.iterdir()) == []


def test_a_copied_store_with_a_hooks_path_in_its_config_runs_nothing(
    store: Path, tmp_path: Path
) -> None:
    MemoryManager.init(store).close()
    markers = tmp_path / "markers"
    _booby_trap(store, markers)
    trap = tmp_path / "elsewhere"
    trap.mkdir()
    for name in HOOKS:
        (trap / name).write_text(f"#!/bin/sh\ntouch '{markers / ('path-' + name)}'\n")
        (trap / name).chmod(0o755)
    git(store, "config", "core.hooksPath", str(trap))
    _exercise(store)
    assert sorted(p.name for p in markers.iterdir()) == []


def test_push_and_sync_run_no_hook_of_the_store(store: Path, tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "hello", "hi")
    markers = tmp_path / "markers"
    _booby_trap(store, markers)
    mm.remote_add("origin", f"file://{bare}")
    mm.push()
    mm.save_interaction("s", "again", "ok")
    mm.sync()
    assert git(bare, "rev-parse", "main").strip() == mm.head()
    assert sorted(os.listdir(markers)) == []
