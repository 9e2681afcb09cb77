"""Recovery details: forked writers, dead owners' lock files, repair on open, packs left
by short-lived writers. Each of these failed before the repository layer handled it."""

from __future__ import annotations

import multiprocessing
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gitmem.errors import LockTimeout
from gitmem.manager import MemoryManager
from gitmem.store.recovery import KEEP_MARK
from gitmem.store.repository import Housekeeping, Repository
from tests.conftest import git
from tests.reliability.conftest import ROOT, fsck_problems

_FORKED: MemoryManager | None = None


def _forked_writer(worker: int, count: int) -> None:
    assert _FORKED is not None
    for n in range(count):
        _FORKED.save_interaction("shared", f"from {worker}", "ok", interaction_id=f"f{worker}-{n}")


def test_children_forked_from_an_open_manager_are_serialised(store: Path) -> None:
    global _FORKED
    _FORKED = MemoryManager.init(store)
    _FORKED.save_interaction("shared", "parent", "ok", interaction_id="parent")
    assert _FORKED.load_memory("shared") is not None  # the git pipes are open
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_forked_writer, args=(w, 10)) for w in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    session = MemoryManager(store).load_memory("shared")
    assert session is not None and len(session.interactions) == 41
    assert git(store, "rev-list", "--count", "HEAD").strip() == "42"
    _FORKED.save_interaction("shared", "parent again", "ok")  # the parent still works
    assert git(store, "status", "--porcelain") == ""
    assert fsck_problems(store) == []
    _FORKED.close()
    _FORKED = None


def _forked_reader() -> None:
    assert _FORKED is not None
    assert _FORKED.load_memory("shared") is not None
    # the read took the child's own cat-file pipes: the parent's are shared with every
    # sibling, and two children reading through them take each other's answers (or hang)
    sys.exit(0 if _FORKED.repository.objects._pid == os.getpid() else 3)


def test_a_forked_child_reads_through_its_own_git_pipes(store: Path) -> None:
    global _FORKED
    _FORKED = MemoryManager.init(store)
    _FORKED.save_interaction("shared", "parent", "ok")
    assert _FORKED.load_memory("shared") is not None  # the parent's pipes are open
    _FORKED._store._sessions.clear()  # the child must read the objects, not the caches
    _FORKED.repository.objects.forget_trees()
    child = multiprocessing.get_context("fork").Process(target=_forked_reader)
    child.start()
    child.join(60)
    assert child.exitcode == 0
    _FORKED.close()
    _FORKED = None


def _dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


def test_a_git_lock_left_by_a_dead_gitmem_writer_is_cleared_at_once(store: Path) -> None:
    MemoryManager.init(store).close()
    lock = store / ".git" / "refs" / "heads" / "main.lock"
    lock.write_text(f"gitmem pid={_dead_pid()} host={socket.gethostname()}\n")
    # only a lock naming its gitmem owner, whose process is gone, is ever removed
    mm = MemoryManager(store, lock_timeout=1)
    assert mm.save_interaction("s", "q", "a")
    assert not lock.exists()
    mm.close()


def test_a_git_lock_of_a_live_process_is_respected_and_named(store: Path) -> None:
    MemoryManager.init(store).close()
    lock = store / ".git" / "index.lock"
    lock.write_text(f"gitmem pid={os.getpid()} host={socket.gethostname()}\n")
    mm = MemoryManager(store, lock_timeout=0.3)
    with pytest.raises(
        LockTimeout,
        match=r"index\.lock exists for \d+s: another gitmem "
        rf"process \(pid {os.getpid()} on {socket.gethostname()}\)",
    ):
        mm.save_interaction("s", "q", "a")
    lock.unlink()
    assert mm.save_interaction("s", "q", "a")
    assert git(store, "status", "--porcelain") == ""
    mm.close()


def test_lock_timeout_names_the_holder_and_its_age(store: Path) -> None:
    MemoryManager.init(store).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom gitmem.store.repository import Repository\n"
            "r = Repository(sys.argv[1])\nwith r.transaction():\n"
            "    print('held', flush=True); time.sleep(30)\n",
            str(store),
        ],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        mm = MemoryManager(store, lock_timeout=0.3)
        with pytest.raises(LockTimeout) as caught:
            mm.save_interaction("s", "q", "a")
        message = str(caught.value)
        assert f"pid {holder.pid} on {socket.gethostname()}" in message
        assert "released when that process ends" in message
    finally:
        holder.kill()
        holder.wait()
    assert mm.save_interaction("s", "q", "a")  # the kernel dropped the dead holder's lock
    mm.close()


def _killed_save(store: Path, kill_at: str) -> None:
    code = (
        "import sys\nfrom gitmem.manager import MemoryManager\n"
        "from tests.reliability.workers import arm\n"
        f"mm = MemoryManager(sys.argv[1])\narm({kill_at!r})\n"
        "mm.save_interaction('s', 'second', 'ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(store)],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
    )
    assert done.returncode == -9


def test_opening_the_store_finishes_a_dead_writers_save(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "first", "ok")
    mm.close()
    _killed_save(store, "Refs.move:after:1")
    # the branch, file and index are right; git's locks name the dead writer
    assert git(store, "status", "--porcelain") == ""
    assert (store / ".git" / "index.lock").read_text().startswith("gitmem pid=")
    assert git(store, "add", "sessions/a0/s.md", check=False) == ""  # git refuses meanwhile
    # a read-only call is enough: opening the store clears the dead writer's locks
    reader = MemoryManager(store)
    session = reader.load_memory("s")
    assert session is not None and len(session.interactions) == 2
    assert not (store / ".git" / "index.lock").exists()
    assert not (store / ".git" / "refs" / "heads" / "main.lock").exists()
    assert git(store, "status", "--porcelain") == ""
    assert "second" in (store / "sessions" / "a0" / "s.md").read_text()
    reader.close()


def test_opening_the_store_undoes_a_dead_writers_unfinished_save(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "first", "ok")
    mm.close()
    _killed_save(store, "GitIndexFile.write:before:1")
    # the new file is in place, not staged, the branch did not move
    assert git(store, "status", "--porcelain") == " M sessions/a0/s.md\n"
    reader = MemoryManager(store)
    session = reader.load_memory("s")
    assert session is not None and len(session.interactions) == 1
    assert git(store, "status", "--porcelain") == ""
    assert "second" not in (store / "sessions" / "a0" / "s.md").read_text()
    reader.close()


def test_packs_left_by_short_lived_writers_are_merged(store: Path) -> None:
    policy = Housekeeping(every_commits=6)
    Repository.init(store, housekeeping=policy).close()
    for n in range(12):  # one save per process, like the CLI
        repo = Repository(store, housekeeping=policy)
        with repo.transaction() as txn:
            txn.write(f"sessions/s{n}.md", f"v{n}\n".encode())
            txn.commit(f"save {n}")
        repo.close()  # waits for housekeeping, if this writer started it
    packs = [p for p in (store / ".git" / "objects" / "pack").iterdir() if p.suffix == ".idx"]
    assert len(packs) < 6
    assert fsck_problems(store) == []
    assert git(store, "rev-list", "--count", "HEAD").strip() == "13"


def test_temp_files_of_a_dead_writer_are_swept(store: Path) -> None:
    Repository.init(store).close()
    tmp = store / ".git" / "gitmem" / "tmp"
    leftovers = [tmp / "99999-1-0.tmp", tmp / "pack-99999-1"]
    for item in leftovers:
        item.write_bytes(b"half a file")
        old = time.time() - 3600
        os.utime(item, (old, old))
    fresh = tmp / "99999-2-0.tmp"  # young: might belong to a live writer elsewhere
    fresh.write_bytes(b"in use")
    packs = store / ".git" / "objects" / "pack"
    # the .keep of a pack a killed save was writing (git would never repack that pack),
    # and one a person keeps on purpose
    ours, theirs = packs / f"pack-{'1' * 40}.keep", packs / f"pack-{'2' * 40}.keep"
    ours.write_bytes(KEEP_MARK + b" pid=99999\n")
    theirs.write_bytes(b"keep: the release of 2024\n")
    for item in (ours, theirs):
        os.utime(item, (time.time() - 3600,) * 2)
    Repository(store).close()
    assert not any(item.exists() for item in [*leftovers, ours])
    assert fresh.exists() and theirs.exists()
