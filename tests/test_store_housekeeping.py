"""Housekeeping keeps ``.git`` small as a store grows, and never loses an object: what it
packs, when it packs everything, and what happens around a person's own ``git gc``
(the size curve over thousands of saves is in benchmarks/bench_repack.py)."""

from __future__ import annotations

import fcntl
import os
import random
import subprocess
from pathlib import Path

from gitmem.store.repository import Housekeeping, Repository
from tests.conftest import git

SEED_FILES = 2000  # a sessions/ tree of ~80 KiB: each save writes a new one


def _objects_bytes(git_dir: Path) -> int:
    return sum(
        os.path.getsize(os.path.join(top, name))
        for top, _dirs, names in os.walk(git_dir / "objects")
        for name in names
    )


def _packs(store: Path) -> list[Path]:
    return sorted((store / ".git" / "objects" / "pack").glob("*.pack"))


def _seeded(store: Path, policy: Housekeeping) -> Repository:
    repo = Repository.init(store, housekeeping=policy)
    with repo.transaction() as txn:
        for n in range(SEED_FILES):
            txn.write(f"sessions/s{n:04d}.md", f"# Session s{n}\n\nfirst turn {n}\n".encode())
        txn.commit("Seed", trailers={"Gitmem-Op": "import"})
    return repo


def _save_turns(repo: Repository, rng: random.Random, saves: int, start: int = 0) -> None:
    for i in range(start, start + saves):
        path = f"sessions/s{rng.randrange(SEED_FILES):04d}.md"
        with repo.transaction() as txn:
            old = (repo.root / path).read_bytes()
            txn.write(path, old + f"turn {i} {rng.random()}\n".encode())
            txn.commit(f"Save turn {i}", trailers={"Gitmem-Op": "save"})


def _aggressive_bytes(store: Path, tmp: Path) -> int:
    clone = tmp / "aggressive.git"
    subprocess.run(
        ["git", "clone", "-q", "--bare", "--no-local", str(store), str(clone)], check=True
    )
    git(clone, "gc", "-q", "--aggressive", "--prune=now")
    return _objects_bytes(clone)


def _fsck_clean(store: Path) -> None:
    done = subprocess.run(
        ["git", "fsck", "--full", "--strict", "--no-progress"],
        cwd=store,
        capture_output=True,
        text=True,
    )
    problems = [
        line
        for line in (done.stdout + done.stderr).splitlines()
        if line.strip() and not line.startswith("dangling ")
    ]
    assert done.returncode == 0 and problems == [], problems


def test_repeated_housekeeping_keeps_git_near_a_fresh_aggressive_gc(tmp_path: Path) -> None:
    # housekeeping every 10 saves, as a store does every 100: the merged packs each kept a
    # full copy of the sessions/ tree, so .git grew to 1.7-1.9x (3x at 10,000 sessions);
    # full_share=1.0: no pause between full repacks, whatever the machine's speed
    store = tmp_path / "memory"
    repo = _seeded(store, Housekeeping(enabled=False))
    rng = random.Random(12)
    for round_ in range(20):
        _save_turns(repo, rng, 10, start=round_ * 10)
        repo.pack()
    repo.close()
    ratio = _objects_bytes(store / ".git") / _aggressive_bytes(store, tmp_path)
    assert ratio <= 1.45, ratio
    packed = (store / ".git" / "gitmem" / "packed").read_text().split()  # shared by processes
    assert int(packed[0]) > 0
    _fsck_clean(store)
    assert git(store, "rev-list", "--count", "HEAD").strip() == "202"
    assert git(store, "status", "--porcelain") == ""


def test_housekeeping_keeps_unreachable_objects_and_survives_a_persons_gc(tmp_path: Path) -> None:
    store = tmp_path / "memory"
    repo = _seeded(store, Housekeeping(enabled=False))
    rng = random.Random(3)
    _save_turns(repo, rng, 15)
    # what a save in flight has written before its branch moves: objects nothing reaches yet
    pending = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"],
        cwd=store,
        check=True,
        input="a save in flight\n",
        capture_output=True,
        text=True,
    ).stdout
    repo.pack()  # the first run repacks everything
    assert git(store, "cat-file", "-p", pending.strip()) == "a save in flight\n"
    git(store, "gc", "--quiet")  # a person's own gc between two runs
    (store / ".git" / "gitmem" / "packed").write_text("not a number\n")  # damaged: redone
    _save_turns(repo, rng, 15, start=15)
    repo.pack()
    assert git(store, "cat-file", "-p", pending.strip()) == "a save in flight\n"
    assert len([p for p in _packs(store) if not p.with_suffix(".mtimes").exists()]) == 1
    _fsck_clean(store)
    assert git(store, "rev-list", "--count", "HEAD").strip() == "32"
    repo.close()


def test_one_process_packs_at_a_time(tmp_path: Path) -> None:
    store = tmp_path / "memory"
    repo = _seeded(store, Housekeeping(enabled=False, full_share=1.0))
    _save_turns(repo, random.Random(5), 5)
    before = _packs(store)
    assert len(before) > 1
    # another process holds the housekeeping lock: this run skips its turn
    handle = os.open(store / ".git" / "gitmem" / "housekeeping.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        repo.pack()
        assert _packs(store) == before
    finally:
        os.close(handle)
    repo.pack()
    assert len(_packs(store)) == 1
    _fsck_clean(store)
    repo.close()


def test_saves_that_write_a_lot_are_packed_before_a_hundred_commits(tmp_path: Path) -> None:
    # 100 saves of a big sessions/ tree (380 KiB each at 10,000 sessions) waited unmerged
    # for the 100-commit mark, outweighing the packed store many times over
    store = tmp_path / "memory"
    policy = Housekeeping(every_commits=1000)
    repo = Repository.init(store, housekeeping=policy)
    for n in range(6):  # 6 x 300 KiB that no delta or zlib can shrink
        with repo.transaction() as txn:
            txn.write(f"sessions/big{n}.md", os.urandom(300 * 1024))
            txn.commit(f"Save big {n}", trailers={"Gitmem-Op": "save"})
    repo.close()  # waits for the background run
    assert len(_packs(store)) <= 3  # not one per save
    assert (store / ".git" / "gitmem" / "packed").exists()
    _fsck_clean(store)
