"""git's own gc beside gitmem's saves: a person's ``git gc``, or the auto gc that their
``git commit`` starts in the background, runs while a save is writing its pack.

``git repack -d`` deletes the packs it listed when it started, and it lists them by their
``.pack`` files, while the ``pack-objects`` it runs reads a pack only once its ``.idx`` is
there: a save's ``.pack`` written before its ``.idx`` was listed, never read, then deleted, and
the save's commit went missing after its branch had moved to it (``git rev-list`` then failed
with "Could not read <sha>"; seen in CI under the person's-commits test). ``git gc`` deletes an
``.idx`` without its ``.pack`` as garbage, so the other order fails as well. A save now writes
its pack as git's ``index-pack --keep`` does: a ``.keep`` first, removed once both files are in.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gitmem.manager import MemoryManager
from gitmem.store.locks import git_gc_lock
from gitmem.store.repository import Housekeeping
from tests.conftest import git
from tests.reliability.conftest import SIZES, fsck_problems

GIT_GC = {
    "repack -A": ["repack", "-d", "-q", "-A"],
    "repack --cruft": ["repack", "-d", "-q", "--cruft"],
    "gc": ["-c", "gc.pruneExpire=now", "gc", "-q"],  # also deletes pack garbage
}


@pytest.mark.parametrize("command", GIT_GC)
def test_a_git_gc_while_a_save_writes_its_pack_keeps_the_save(
    store: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "q0", "a0", interaction_id="i0")
    real = os.replace
    written: list[str] = []

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        real(src, dst)
        target = Path(dst)
        if target.parent.name == "pack" and len(written) < 2:
            written.append(target.suffix)
            # after each of the pack's two files: the moments a gc can come in between. It
            # may fail (`repack --cruft` cannot read a kept pack without its .idx, as during
            # a push to a repository); it must not delete anything the save needs
            git(store, *GIT_GC[command], check=False)

    monkeypatch.setattr(os, "replace", replace)
    sha = mm.save_interaction("s", "q1", "a1", interaction_id="i1")
    monkeypatch.undo()
    assert len(written) == 2, "the save wrote no pack"
    assert git(store, "cat-file", "-t", sha).strip() == "commit"
    assert fsck_problems(store) == []
    assert not list((store / ".git" / "objects" / "pack").glob("*.keep"))
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


@pytest.mark.parametrize("size", SIZES)
def test_saves_housekeeping_and_git_auto_gc_together_lose_nothing(
    store: Path, size: str, figures: dict[str, Any]
) -> None:
    """A saver with frequent housekeeping, and a person whose every `git commit` starts
    git's auto gc (made eager here): before the fix, a quarter to half of such runs lost
    a commit."""
    seconds = {"ci": 4.0, "full": 30.0}[size]
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "q0", "a0", interaction_id="i0")
    mm.close()
    git(store, "config", "gc.autoPackLimit", "4")
    git(store, "config", "gc.auto", "20")
    stop = time.monotonic() + seconds
    acked: list[str] = []

    def save() -> None:
        eager = Housekeeping(every_commits=5, full_growth=1.1, full_share=1.0)
        saver = MemoryManager(store, agent="saver", lock_timeout=120, housekeeping=eager)
        while time.monotonic() < stop:
            iid = f"i{len(acked) + 1}"
            saver.save_interaction("s", f"q {iid}", f"a {iid}", interaction_id=iid)
            acked.append(iid)
        saver.close()

    thread = threading.Thread(target=save)
    thread.start()
    attempts = accepted = 0
    while thread.is_alive():
        attempts += 1
        (store / "notes.txt").write_text(f"note {attempts}\n")
        git(store, "add", "notes.txt", check=False)
        done = subprocess.run(
            ["git", "commit", "-q", "-m", f"note {attempts}"], cwd=store, capture_output=True
        )
        accepted += done.returncode == 0
    thread.join()
    deadline = time.monotonic() + 60  # the last auto gc runs detached: let it finish
    while (store / ".git" / "gc.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    reader = MemoryManager(store)
    session = reader.load_memory("s")
    assert session is not None
    missing = sorted(set(acked) - {turn.id for turn in session.interactions})
    reader.close()
    figures.update(
        seconds=seconds, saves=len(acked), persons_commits=accepted, person_attempts=attempts
    )
    assert fsck_problems(store) == []
    assert not missing, f"acknowledged saves missing at HEAD: {missing[:5]}"
    assert len(acked) > 5 and accepted > 5
