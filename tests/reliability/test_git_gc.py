"""git's own gc beside gitmem's saves: a person's ``git gc``, or the auto gc that their
``git commit`` starts in the background, repacks while a save is writing its pack.

``git repack -d`` deletes the packs it listed when it started, and it lists them by their
``.pack`` files, while the ``pack-objects`` it runs sees a pack only once its ``.idx`` is
there. A pack whose ``.pack`` came first was listed, never read, then deleted: the save's
commit went missing after its branch had moved to it (``git rev-list`` then failed with
"Could not read <sha>"; seen in CI under the person's-commits test).
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from gitmem.manager import MemoryManager
from gitmem.store.locks import git_gc_lock
from tests.conftest import git
from tests.reliability.conftest import fsck_problems


@pytest.mark.parametrize("mode", ["-A", "--cruft"])
def test_a_repack_while_a_save_writes_its_pack_keeps_the_save(
    store: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "q0", "a0", interaction_id="i0")
    real = os.replace
    published: list[str] = []

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        real(src, dst)
        target = Path(dst)
        if target.parent.name == "pack" and not published:
            published.append(target.suffix)
            # between the pack's two files, as git's gc does it (all into one pack)
            git(store, "repack", "-d", "-q", mode)

    monkeypatch.setattr(os, "replace", replace)
    sha = mm.save_interaction("s", "q1", "a1", interaction_id="i1")
    monkeypatch.undo()
    assert published, "the save wrote no pack"
    assert git(store, "cat-file", "-t", sha).strip() == "commit"
    assert fsck_problems(store) == []
    session = mm.load_memory("s")
    assert session is not None and [t.id for t in session.interactions] == ["i0", "i1"]
    mm.close()


def _packs(store: Path) -> int:
    return sum(1 for p in (store / ".git" / "objects" / "pack").iterdir() if p.suffix == ".pack")


def _store_with_packs(store: Path) -> MemoryManager:
    mm = MemoryManager.init(store)
    for n in range(4):  # a pack per save
        mm.save_interaction("s", f"q{n}", f"a{n}", interaction_id=f"i{n}")
    return mm


def test_a_git_gc_waits_while_gitmem_repacks(store: Path) -> None:
    mm = _store_with_packs(store)
    before = _packs(store)
    git(store, "config", "gc.autoPackLimit", "1")
    with git_gc_lock(store / ".git") as held:
        assert held
        assert (store / ".git" / "gc.pid").read_text() == f"{os.getpid()} {socket.gethostname()}"
        done = subprocess.run(["git", "gc", "-q"], cwd=store, capture_output=True, text=True)
        assert done.returncode != 0 and "already running" in done.stderr
        git(store, "gc", "--auto", "-q")  # the auto gc of a `git commit`: skips
        assert _packs(store) == before
        with git_gc_lock(store / ".git") as again:
            assert not again  # one holder at a time
    assert not (store / ".git" / "gc.pid").exists()
    git(store, "gc", "-q")  # free again
    assert _packs(store) == 1
    mm.close()


def test_gitmem_does_not_repack_beside_a_running_git_gc(store: Path) -> None:
    mm = _store_with_packs(store)
    before = _packs(store)
    gc = subprocess.Popen(["sleep", "60"])  # stands for a `git gc` that holds the lock
    try:
        pidfile = store / ".git" / "gc.pid"
        pidfile.write_text(f"{gc.pid} {socket.gethostname()}")
        mm.repository.pack()
        assert _packs(store) == before
        assert pidfile.read_text() == f"{gc.pid} {socket.gethostname()}"  # theirs, kept
    finally:
        gc.kill()
        gc.wait()
    mm.repository.pack()  # the gc.pid of a process that is gone is stale, as git judges it
    assert _packs(store) < before
    assert not (store / ".git" / "gc.pid").exists()
    assert fsck_problems(store) == []
    mm.close()
