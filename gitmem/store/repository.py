"""The repository layer: the only code that writes files, objects, refs and the index.

A save is written in-process: blobs, the changed trees and the commit object go straight
into ``objects/``; then, under git's own ``index.lock`` and branch lock, the working file
(temp, fsync, rename) and its index entry, and the branch is compare-and-swapped against the
commit the save was made from (see ``transaction.py``), so ``git status`` stays clean and a
person's own ``git commit`` neither undoes a save nor is undone by one. Writers are
serialised by ``flock`` on ``.git/gitmem/write.lock`` (released by the kernel when a writer
dies) and a journal lets the next writer finish or undo a half-done save.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import git

from gitmem.errors import RepositoryError, UnsupportedIndex
from gitmem.format.paths import LAYOUT_FILE, layout_text
from gitmem.store.base import Housekeeping as Housekeeping  # importable from here as before
from gitmem.store.base import Identity
from gitmem.store.git import run_git
from gitmem.store.gitindex import Index
from gitmem.store.locks import git_gc_lock
from gitmem.store.objects import commit_body
from gitmem.store.transaction import Transaction, TransactionLayer, signature
from gitmem.store.worktree import split_config

STORE_README = """# gitmem memory store

This repository holds conversation memory written by [gitmem](https://pypi.org/project/gitmem-store/).
Each file under `sessions/` (one sub-folder down) is one conversation session in Markdown;
every save is one commit.
Read it, diff it, blame it; edit by hand if you like (`gitmem check` validates your edits).
"""

GITATTRIBUTES = (
    "sessions/**/*.md merge=gitmem text eol=lf\narchive/**/*.md merge=gitmem text eol=lf\n"
    "namespaces/**/*.md merge=gitmem text eol=lf\nmemory/*.md merge=gitmem text eol=lf\n"
)


class Repository(TransactionLayer):
    """A gitmem store: a non-bare git repository whose working tree holds the memory files.

    The top of a chain of layers, each inheriting the one below (see ``base.py``); this one
    adds creation, the transaction, side refs and housekeeping.
    """

    def _opened(self) -> None:
        super()._opened()
        # a short-lived writer (one CLI save) never reaches the housekeeping threshold by
        # itself: the packs that earlier ones left count towards it
        self._commits_since_gc = self._packs_on_disk()
        self._packed_bytes = int(self._packed_record()[0])
        self.recover()

    # --- creation ------------------------------------------------------------------------

    @classmethod
    def init(
        cls,
        root: str | os.PathLike[str],
        *,
        branch: str = "main",
        identity: Identity | None = None,
        **kwargs: object,
    ) -> Repository:
        """Create a store (or adopt an existing empty repository) with an initial commit."""
        path = Path(root)
        path.mkdir(parents=True, exist_ok=True)
        try:
            git.Repo(path)
        except git.InvalidGitRepositoryError:
            run_git(path, "init", "--quiet", f"--initial-branch={branch}")
        repo = cls(path, identity=identity, **kwargs)  # type: ignore[arg-type]
        if repo.head() is None:
            repo.ensure_config(split_config())  # a small index write per save
            with repo.transaction() as txn:
                txn.write("README.md", STORE_README.encode())
                txn.write(".gitattributes", GITATTRIBUTES.encode())
                txn.write(LAYOUT_FILE, layout_text())  # every new store fans out
                txn.commit("Create gitmem memory store", trailers={"Gitmem-Op": "init"})
        return repo

    def close(self) -> None:
        """Wait for background housekeeping and release the git helper processes."""
        if self._gc_thread is not None:
            self._gc_thread.join()
        if self._lock_handle is not None:
            os.close(self._lock_handle)
            self._lock_handle = None
        self._git.close()

    # --- writing -------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, what: str = "a write") -> Iterator[Transaction]:
        """Hold the store's write lock; changes made through the transaction are committed
        by ``txn.commit(...)`` (uncommitted changes are dropped when the block ends).
        ``what`` names the holder in the error another thread gets when it waits too long."""
        self._check_fork()
        with self._holding_thread_lock(what), self._file_lock():
            try:
                yield Transaction(self)
            finally:
                self._discard_prepared()  # temp files of a save that failed
        self._maybe_housekeep()

    def unclean_paths(self, paths: Iterable[str]) -> list[str]:
        """Those of ``paths`` whose working file or index entry differs from HEAD."""
        try:
            index: Index | None = self._load_index()
        except UnsupportedIndex:
            index = None
        dirty = []
        for path in paths:
            committed = self.entry(path)
            want = committed[1] if committed else None
            current = self.working_blob(path)
            staged = index.entry_sha(path.encode()) if index is not None else None
            # a deleted working file is only restored: nothing of the person's is lost
            if (current[1] if current else want) != want or (
                index is not None and (staged.hex() if staged else None) != want
            ):
                dirty.append(path)
        return dirty

    # --- side refs (e.g. review branches): commits that never touch the working tree -----

    def commit_on_ref(
        self,
        ref: str,
        changes: dict[str, bytes | None],
        message: str,
        *,
        parent: str,
        identity: Identity | None = None,
    ) -> str:
        """Commit ``changes`` over ``parent``'s tree as the new tip of ``ref`` (created or
        replaced); ``ref`` must not be the checked-out branch: working tree and index stay."""
        if ref == self.branch_ref():
            raise RepositoryError(f"{ref} is checked out; use a transaction to commit to it")
        self._staged.clear()
        blobs: dict[str, bytes | None] = {}
        for path, data in changes.items():
            self._safe_target(path)
            blobs[path] = None if data is None else bytes.fromhex(self.stage_object("blob", data))
        tree = self._build_tree(self.commit_tree(parent), blobs)
        message, author = self._guarded(message, identity)
        sig = signature(author)
        commit = self.stage_object("commit", commit_body(tree, [parent], sig, sig, message))
        self.flush_objects()
        self.set_ref(ref, commit, self._read_ref(ref))
        return commit

    # --- housekeeping --------------------------------------------------------------------

    def _packs_on_disk(self) -> int:
        try:
            names = os.listdir(self.git_dir / "objects" / "pack")
        except OSError:
            return 0
        return sum(name.endswith(".idx") for name in names)

    def _maybe_housekeep(self) -> None:
        policy = self.housekeeping
        # when each save writes a lot (a big sessions/ tree), 100 saves of unmerged packs
        # would outweigh the whole packed store: run once they reach a quarter of it
        every_bytes = min(policy.every_bytes, max(1 << 20, self._packed_bytes // 4))
        due = self._commits_since_gc >= policy.every_commits or self._bytes_since_gc >= every_bytes
        if not (policy.enabled and due):
            return
        if self._gc_thread is not None and self._gc_thread.is_alive():
            return
        # a run for the bytes alone only merges packs: the commit-graph and the history
        # cache keep their every-100-commits pace
        everything = self._commits_since_gc >= policy.every_commits
        if everything:
            self._commits_since_gc = 0
        self._bytes_since_gc = 0
        self._packs_since_gc = 0
        work = self.pack if everything else self.merge_packs
        self._gc_thread = threading.Thread(target=work, daemon=True, name="gitmem-gc")
        self._gc_thread.start()

    def pack(self) -> None:
        """Pack loose objects, refresh the commit-graph and the per-file history cache (what
        housekeeping runs).

        Each save writes one small pack; ``repack --geometric=2`` merges them cheaply, but
        every merged pack keeps a full copy of each object chain it starts (the ``sessions/``
        tree above all: 380 KiB at 10,000 sessions), so alone it let ``.git`` reach 3x a fresh
        ``git gc --aggressive``. Once the packs have grown ``full_growth`` times since the
        last full repack (kept in ``.git/gitmem/packed``, shared by every process), one
        ``repack --cruft`` puts every reachable object in one pack with its deltas, which
        bounds the size at about that factor; they take at most ``full_share`` of the time
        (a quarter: one that took 2 s waits 6 s before the next). Unreachable objects (a save
        whose pack is written but whose branch has not moved yet, say) go to a cruft pack,
        never deleted here: pruning stays ``git gc``'s, after its expiry. One process at a
        time packs (``.git/gitmem/housekeeping.lock``); another that finds it busy skips.
        The repacks hold git's own gc lock (``gc.pid``), so a ``git gc`` (a person's, or the
        auto gc of their ``git commit``) never runs beside them: two repacks at once can
        delete a pack the other is still reading.
        """
        # a failure is left for next time: housekeeping only saves space and time
        with self._housekeeping_lock() as mine:
            if not mine:
                return
            with git_gc_lock(self.git_dir) as ours:
                if not ours:  # a `git gc` runs: it does this work
                    return
                self._merge_packs()
            # not detached: it runs under the housekeeping lock, not beside the next run;
            # it takes git's gc lock itself
            run_git(
                self.root,
                "-c",
                "gc.packRefs=false",
                "-c",
                "gc.autoDetach=false",
                "gc",
                "--auto",
                "--quiet",
                ok=None,
            )
            with git_gc_lock(self.git_dir) as ours:
                if ours:
                    run_git(
                        self.root,
                        "commit-graph",
                        "write",
                        "--reachable",
                        "--split",
                        "--changed-paths",
                        ok=None,
                    )
        with contextlib.suppress(RepositoryError):
            self.index_history()

    def merge_packs(self) -> None:
        """Only the packing part of :meth:`pack` (what housekeeping runs when saves wrote
        many bytes before 100 commits)."""
        with self._housekeeping_lock() as mine:
            if not mine:
                return
            with git_gc_lock(self.git_dir) as ours:
                if ours:
                    self._merge_packs()

    def _merge_packs(self) -> None:
        run_git(self.root, "repack", "-d", "-q", "--geometric=2", ok=None)
        self._full_repack_if_grown()

    @contextlib.contextmanager
    def _housekeeping_lock(self) -> Iterator[bool]:
        try:
            handle = os.open(self.state_dir / "housekeeping.lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:  # a read-only store: nothing to pack either
            yield False
            return
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                yield False
                return
            yield True
        finally:
            os.close(handle)  # releases the lock

    def _pack_sizes(self) -> list[int]:
        folder = self.git_dir / "objects" / "pack"
        sizes = []
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                if entry.name.endswith(".pack"):
                    with contextlib.suppress(OSError):
                        sizes.append(entry.stat().st_size)
        return sizes

    def _packed_record(self) -> tuple[float, float, float]:
        """(size of the pack the last full repack wrote, its seconds, when it ended); zeros when
        there was none here (or the record is damaged: the next run does one)."""
        try:
            fields = (self.state_dir / "packed").read_text().split()
            packed, took, ended = (float(field) for field in fields)
        except (OSError, ValueError):
            return 0.0, 0.0, 0.0
        return packed, took, ended

    def _full_repack_if_grown(self) -> None:
        record = self.state_dir / "packed"
        packed, took, ended = self._packed_record()
        if sum(self._pack_sizes()) <= packed * self.housekeeping.full_growth:
            return
        # on a store whose every save writes a big tree (the flat sessions/ folder), the
        # packs grow fast: the background work stays a bounded share of the time
        share = min(max(self.housekeeping.full_share, 0.01), 1.0)
        if time.time() - ended < took * (1 / share - 1):
            return
        began = time.time()
        done = run_git(self.root, "repack", "-d", "-q", "--cruft", ok=None)
        if done.returncode == 0:
            tmp = record.with_name(f"packed.{os.getpid()}.tmp")
            with contextlib.suppress(OSError):
                now = time.time()
                # the pack it wrote is the largest; the small ones are saves made meanwhile
                self._packed_bytes = max(self._pack_sizes(), default=0)
                tmp.write_text(f"{self._packed_bytes} {now - began:.3f} {now:.3f}\n")
                os.replace(tmp, record)
