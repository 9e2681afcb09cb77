"""The repository layer, checked with the real git binary on real repositories."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gitmem.errors import BranchMoved, LockTimeout, RepositoryError
from gitmem.store.repository import Repository
from gitmem.store.transaction import Identity
from tests.conftest import git


def _save(repo: Repository, path: str, data: bytes, subject: str = "Save") -> str | None:
    with repo.transaction() as txn:
        txn.write(path, data)
        return txn.commit(subject, trailers={"Gitmem-Op": "save"})


def test_init_makes_one_commit_and_a_clean_tree(store: Path) -> None:
    repo = Repository.init(store)
    assert git(store, "rev-list", "--count", "HEAD").strip() == "1"
    assert git(store, "status", "--porcelain") == ""
    assert "Gitmem-Op: init" in git(store, "log", "--format=%(trailers)")
    git(store, "fsck", "--strict")
    # opening again does not add a commit
    Repository.init(store)
    assert git(store, "rev-list", "--count", "HEAD").strip() == "1"
    repo.close()


def test_each_save_is_exactly_one_commit_with_a_clean_status(store: Path) -> None:
    repo = Repository.init(store, identity=Identity("agent-7", "a7@example.com"))
    first = _save(repo, "sessions/a.md", b"one\n")
    second = _save(repo, "sessions/b.md", b"two\n")
    assert first and second and first != second
    assert git(store, "rev-parse", "HEAD").strip() == second
    assert git(store, "rev-list", "--count", "HEAD").strip() == "3"
    assert git(store, "status", "--porcelain") == ""
    assert git(store, "show", "HEAD:sessions/a.md") == "one\n"
    assert (store / "sessions" / "b.md").read_bytes() == b"two\n"
    assert git(store, "log", "-1", "--format=%an <%ae>") == "agent-7 <a7@example.com>\n"
    git(store, "fsck", "--strict")
    # the reflog records the save, like git commit would
    assert second in git(store, "reflog", "--format=%H")


def test_unchanged_content_makes_no_commit(store: Path) -> None:
    repo = Repository.init(store)
    assert _save(repo, "sessions/a.md", b"same\n")
    head = repo.head()
    assert _save(repo, "sessions/a.md", b"same\n") is None
    assert repo.head() == head


def test_a_persons_git_commit_cannot_undo_a_save(store: Path) -> None:
    repo = Repository.init(store)
    _save(repo, "sessions/a.md", b"v1\n")
    _save(repo, "sessions/a.md", b"v2\n")
    (store / "notes.txt").write_text("mine\n")
    git(store, "add", "notes.txt")
    git(store, "commit", "-q", "-m", "Add my notes")
    assert git(store, "show", "HEAD:sessions/a.md") == "v2\n"
    assert git(store, "status", "--porcelain") == ""
    # and gitmem keeps the person's commit when it saves again
    _save(repo, "sessions/a.md", b"v3\n")
    assert git(store, "show", "HEAD:notes.txt") == "mine\n"
    assert git(store, "status", "--porcelain") == ""


def test_a_persons_staged_change_survives_a_save(store: Path) -> None:
    repo = Repository.init(store)
    (store / "notes.txt").write_text("staged\n")
    git(store, "add", "notes.txt")
    _save(repo, "sessions/a.md", b"v1\n")
    assert git(store, "status", "--porcelain") == "A  notes.txt\n"


def test_delete_removes_the_file_and_the_entry(store: Path) -> None:
    repo = Repository.init(store)
    _save(repo, "sessions/a.md", b"v1\n")
    with repo.transaction() as txn:
        txn.delete("sessions/a.md")
        assert txn.commit("Delete", trailers={"Gitmem-Op": "delete"})
    assert not (store / "sessions" / "a.md").exists()
    assert git(store, "status", "--porcelain") == ""
    assert git(store, "ls-tree", "-r", "--name-only", "HEAD").split() == [
        ".gitattributes",
        ".gitmem-layout",
        "README.md",
    ]


def test_symlinked_folder_pointing_outside_is_refused(store: Path, tmp_path: Path) -> None:
    repo = Repository.init(store)
    outside = tmp_path / "outside"
    outside.mkdir()
    (store / "sessions").symlink_to(outside)
    before = repo.head()
    with pytest.raises(RepositoryError, match="symlink"):
        _save(repo, "sessions/a.md", b"x\n")
    assert list(outside.iterdir()) == []
    assert repo.head() == before


def test_symlinked_file_is_refused(store: Path, tmp_path: Path) -> None:
    repo = Repository.init(store)
    (store / "sessions").mkdir()
    target = tmp_path / "victim.txt"
    target.write_text("keep\n")
    (store / "sessions" / "a.md").symlink_to(target)
    with pytest.raises(RepositoryError, match="symlink"):
        _save(repo, "sessions/a.md", b"x\n")
    assert target.read_text() == "keep\n"


def test_detached_head_is_refused_clearly(store: Path) -> None:
    repo = Repository.init(store)
    git(store, "checkout", "-q", "--detach")
    with pytest.raises(RepositoryError, match="detached"):
        _save(repo, "sessions/a.md", b"x\n")


def test_not_a_repository(tmp_path: Path) -> None:
    with pytest.raises(RepositoryError, match="not a gitmem store"):
        Repository(tmp_path)


def test_refs_in_packed_refs_are_read(store: Path) -> None:
    repo = Repository.init(store)
    _save(repo, "sessions/a.md", b"v1\n")
    git(store, "pack-refs", "--all")
    assert not (store / ".git" / "refs" / "heads" / "main").exists()
    head = repo.head()
    assert _save(repo, "sessions/a.md", b"v2\n")
    assert git(store, "rev-parse", "HEAD~1").strip() == head
    git(store, "fsck", "--strict")


def _racing(repo: Repository, person: Callable[[], None]) -> None:
    """Run ``person`` (a person's git commands) just before the save publishes its commit
    (publishing starts by writing the journal)."""
    real: Callable[[bytes], None] = repo.lock.write_journal

    def racing(journal: bytes) -> None:
        if journal:
            person()
        real(journal)

    repo.lock.write_journal = racing  # type: ignore[method-assign]


def test_lost_race_against_an_unrelated_commit_is_retried(store: Path) -> None:
    repo = Repository.init(store)
    _save(repo, "sessions/a.md", b"v1\n")
    raced = []

    def person() -> None:
        if not raced:
            raced.append(True)
            (store / "other.txt").write_text("x\n")
            git(store, "add", "other.txt")
            git(store, "commit", "-q", "-m", "Concurrent commit")

    _racing(repo, person)
    assert _save(repo, "sessions/a.md", b"v2\n")
    assert git(store, "log", "--format=%s", "-2").splitlines() == ["Save", "Concurrent commit"]
    assert git(store, "status", "--porcelain") == ""


def test_lost_race_on_the_same_file_is_a_conflict(store: Path) -> None:
    repo = Repository.init(store)
    _save(repo, "sessions/a.md", b"v1\n")

    def person() -> None:
        if git(store, "show", "HEAD:sessions/a.md") == "v1\n":
            (store / "sessions" / "a.md").write_text("theirs\n")
            git(store, "commit", "-q", "-am", "Their edit")

    _racing(repo, person)
    with pytest.raises(BranchMoved, match=r"sessions/a\.md"):
        _save(repo, "sessions/a.md", b"mine\n")
    assert git(store, "show", "HEAD:sessions/a.md") == "theirs\n"
    assert (store / "sessions" / "a.md").read_text() == "theirs\n"
    assert git(store, "status", "--porcelain") == ""


def test_a_commit_that_lands_before_the_save_reads_the_branch_is_kept(store: Path) -> None:
    # the save's content was made from v1; a person's commit lands before the save moves
    # the branch: the swap is against v1's commit, so the person's change is never replaced
    repo = Repository.init(store)
    _save(repo, "sessions/a.md", b"v1\n")
    with repo.transaction() as txn:
        assert txn.read("sessions/a.md") == b"v1\n"
        (store / "sessions" / "a.md").write_text("theirs\n")
        git(store, "commit", "-q", "-am", "Their edit")
        txn.write("sessions/a.md", b"v1 and mine\n")
        with pytest.raises(BranchMoved) as caught:
            txn.commit("Save")
        assert caught.value.paths == ["sessions/a.md"]
    assert git(store, "show", "HEAD:sessions/a.md") == "theirs\n"
    assert git(store, "log", "--format=%s", "-1").strip() == "Their edit"


def test_an_old_git_lock_of_unknown_owner_is_never_removed(store: Path) -> None:
    # it may be a person's `git commit` waiting in an editor: its age proves nothing
    repo = Repository.init(store)
    repo.lock_timeout = 0.2
    lock = store / ".git" / "refs" / "heads" / "main.lock"
    lock.write_text("held by some git command\n")
    old = time.time() - 3600
    os.utime(lock, (old, old))
    head = repo.head()
    with pytest.raises(LockTimeout, match=r"main\.lock exists for 3600s: another git command"):
        _save(repo, "sessions/a.md", b"v1\n")
    assert lock.read_text() == "held by some git command\n"
    assert repo.head() == head and not (store / "sessions" / "a.md").exists()
    lock.unlink()  # what the message says to do once no git command runs
    assert _save(repo, "sessions/a.md", b"v1\n")


def test_journal_finishes_a_save_that_died_after_the_ref_moved(store: Path) -> None:
    repo = Repository.init(store)
    _save(repo, "sessions/a.md", b"v1\n")
    # a writer interrupted right after it moved the ref: file and index are there already
    real_move = repo.refs.move

    def die(ref: str, new: str) -> None:
        real_move(ref, new)
        raise KeyboardInterrupt

    repo.refs.move = die  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        _save(repo, "sessions/a.md", b"v2\n")
    repo.refs.move = real_move  # type: ignore[method-assign]
    assert git(store, "show", "HEAD:sessions/a.md") == "v2\n"
    assert b'"files"' in (store / ".git" / "gitmem" / "write.lock").read_bytes()
    assert git(store, "status", "--porcelain") == ""
    fresh = Repository(store)
    with fresh.transaction():
        pass
    assert (store / "sessions" / "a.md").read_bytes() == b"v2\n"
    assert git(store, "status", "--porcelain") == ""


def test_journal_undoes_a_save_that_died_before_the_ref_moved(store: Path) -> None:
    repo = Repository.init(store)
    _save(repo, "sessions/a.md", b"v1\n")
    head = repo.head()
    lock = store / ".git" / "gitmem" / "write.lock"
    (store / "sessions" / "a.md").write_bytes(b"half\n")
    from gitmem.store.objects import object_id

    journal = {
        "files": {"sessions/a.md": [object_id("blob", b"v1\n"), object_id("blob", b"half\n")]}
    }
    lock.write_text("pid=1 host=dead\n" + json.dumps(journal))
    with Repository(store).transaction():
        pass
    assert repo.head() == head
    assert (store / "sessions" / "a.md").read_bytes() == b"v1\n"
    assert git(store, "status", "--porcelain") == ""


def _worker(store: str, worker: int, count: int) -> None:
    repo = Repository(store, identity=Identity(f"w{worker}", f"w{worker}@example.com"))
    for n in range(count):
        _save(repo, f"sessions/w{worker}-{n}.md", f"{worker} {n}\n".encode())
        with repo.transaction() as txn:
            old = txn.read("sessions/shared.md") or b""
            txn.write("sessions/shared.md", old + f"{worker} {n}\n".encode())
            txn.commit("Append shared")
    repo.close()


def test_concurrent_processes_and_threads_lose_nothing(store: Path) -> None:
    Repository.init(store).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(str(store), w, 10)) for w in range(3)]
    threads = [threading.Thread(target=_worker, args=(str(store), 10 + w, 10)) for w in range(3)]
    for item in [*procs, *threads]:
        item.start()
    for item in [*procs, *threads]:
        item.join()
    assert all(p.exitcode == 0 for p in procs)
    assert git(store, "rev-list", "--count", "HEAD").strip() == str(1 + 6 * 20)
    shared = git(store, "show", "HEAD:sessions/shared.md").splitlines()
    assert sorted(shared) == sorted(f"{w} {n}" for w in [0, 1, 2, 10, 11, 12] for n in range(10))
    assert git(store, "status", "--porcelain") == ""
    git(store, "fsck", "--strict")


def test_housekeeping_packs_loose_objects(store: Path) -> None:
    from gitmem.store.repository import Housekeeping

    repo = Repository.init(store, housekeeping=Housekeeping(every_commits=8))
    for n in range(8):
        _save(repo, "sessions/a.md", f"v{n}\n".encode())
    repo.close()  # waits for the background pack
    counts = dict(line.split(": ") for line in git(store, "count-objects", "-v").splitlines())
    assert int(counts["packs"]) < 4  # eight saves wrote eight small packs; they were merged
    assert int(counts["count"]) == 0  # no loose objects left
    git(store, "fsck", "--strict")
    assert len(git(store, "rev-list", "HEAD").split()) == 9


def test_an_index_that_git_must_edit_itself_follows_each_save(store: Path) -> None:
    repo = Repository.init(store)
    _save(repo, "sessions/a.md", b"v1\n")
    git(store, "update-index", "--index-version", "4")  # not written in-process
    assert _save(repo, "sessions/a.md", b"v2\n")
    assert _save(repo, "sessions/b.md", b"new\n")
    assert git(store, "show", ":sessions/a.md") == "v2\n"
    assert git(store, "status", "--porcelain") == ""
    assert (store / ".git" / "index").read_bytes()[4:8] == b"\0\0\0\x04"  # still git's
    assert not (store / ".git" / "index.lock").exists()


READERS = """
import json, sys, threading
from gitmem.store.repository import Repository
from gitmem.errors import RepositoryError
repo, want = Repository(sys.argv[1]), json.loads(sys.argv[2])
blobs, problems = sorted(want), []

def read(offset):
    for n in range(200):
        sha = blobs[(n + offset) % len(blobs)]
        try:
            if repo.objects.read_object(sha, "blob").decode() != want[sha]:
                problems.append("wrong content for " + sha)
            if not repo.has_object(sha, "blob"):
                problems.append(sha + " reported missing")
        except RepositoryError as exc:
            problems.append(str(exc))

threads = [threading.Thread(target=read, args=(k,)) for k in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps(problems))
"""


def test_threads_reading_objects_through_one_repository_get_their_own(store: Path) -> None:
    # git cat-file --batch is one pipe per repository: two threads reading at once took
    # each other's answers (wrong blob content, "Failed to parse header") or hung; a sync
    # thread and a saving thread on one manager do exactly that. In a subprocess, so that a
    # hang fails the test instead of blocking the suite.
    repo = Repository.init(store)
    for n in range(16):
        _save(repo, f"sessions/s{n}.md", f"content of file {n}\n".encode() * (n * 40 + 1))
    listing = git(store, "ls-tree", "HEAD", "sessions/").splitlines()
    want = {line.split()[2]: git(store, "cat-file", "blob", line.split()[2]) for line in listing}
    try:
        done = subprocess.run(
            [sys.executable, "-c", READERS, str(store), json.dumps(want)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("a reader hung on the cat-file pipe")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
