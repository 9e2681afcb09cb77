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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from gitmem.errors import RepositoryError, UnsupportedIndex
from gitmem.format.paths import LAYOUT_FILE, layout_text
from gitmem.store.git import GitCommands, run_git
from gitmem.store.gitindex import GitIndex
from gitmem.store.gitlog import FileChange, LogEntry
from gitmem.store.indexfile import GitIndexFile, split_config
from gitmem.store.locks import WriteLock, git_gc_lock
from gitmem.store.objects import (
    Authors,
    FileEntry,
    Identity,
    ObjectDatabase,
    Tree,
    is_repository,
    open_store,
    signature,
)
from gitmem.store.recovery import Recovery
from gitmem.store.revisions import Refs, Revisions
from gitmem.store.scratch import TempFiles
from gitmem.store.transaction import CommitGuard, Transaction
from gitmem.store.worktree import WorkTree

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


@dataclass
class Housekeeping:
    """When to pack loose objects, off the save path; and when a run packs everything into
    one pack (once the packs grew ``full_growth`` times since the last such run, and such
    runs took at most ``full_share`` of the time)."""

    enabled: bool = True
    every_commits: int = 100
    every_bytes: int = 64 * 1024 * 1024
    full_growth: float = 1.5
    full_share: float = 0.25


class Repository:
    """A gitmem store: a non-bare git repository whose working tree holds the memory files.

    Built from parts, each owning its state: ``runner`` runs git commands, ``objects`` reads
    and writes objects, ``refs`` reads and moves refs, ``revisions`` reads history,
    ``worktree`` writes working files, ``index`` reads and writes ``.git/index``, ``lock``
    is the write lock and ``recovery`` repairs what a dead writer left. A
    :class:`~gitmem.store.transaction.Transaction` writes through them; the methods here
    are the store's interface to the rest of gitmem, most of them one call to a part.
    """

    # Set by the manager: the last look at every commit message and author before it is
    # written (secrets redacted), so no path into a commit can bypass it.
    commit_guard: CommitGuard | None = None

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        identity: Identity | None = None,
        housekeeping: Housekeeping | None = None,
        lock_timeout: float = 30.0,
    ) -> None:
        top = Path(root).resolve()
        gitpython, git_dir = open_store(top)
        self.root = top  # the working tree's top folder
        self.git_dir = git_dir
        self.state_dir = git_dir / "gitmem"
        with contextlib.suppress(OSError):  # a read-only store can still be read
            (self.state_dir / "tmp").mkdir(parents=True, exist_ok=True)
        self.housekeeping = housekeeping or Housekeeping()
        self.authors = Authors(identity or Identity())
        self.temps = TempFiles(self.state_dir / "tmp")
        self.runner = GitCommands(top, git_dir)
        self.objects = ObjectDatabase(gitpython, self.runner, self.temps)
        self.refs = Refs(top, git_dir, self.temps)
        self.revisions = Revisions(self.runner, self.refs, self.objects, self.state_dir)
        self.worktree = WorkTree(top, self.temps)
        self.index = GitIndexFile(self.runner, self.temps)
        self.lock = WriteLock(top, git_dir, self.temps, head=self.refs.head, timeout=lock_timeout)
        self.recovery = Recovery(
            self.lock, self.refs, self.objects, self.worktree, self.index, self.authors
        )
        self.lock.on_acquire = self.recovery.repair
        self._gc_thread: threading.Thread | None = None
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
        if not is_repository(path):
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
        self.lock.close()
        self.objects.close()

    def _check_fork(self) -> None:
        if self.lock.check_fork():  # a forked child: the parent's housekeeping is not ours
            self._gc_thread = None

    # --- writing -------------------------------------------------------------------------

    def _transaction(self) -> Transaction:
        return Transaction(
            self.objects,
            self.refs,
            self.worktree,
            self.index,
            self.lock,
            self.authors,
            guard=self.commit_guard,
        )

    @contextlib.contextmanager
    def transaction(self, what: str = "a write") -> Iterator[Transaction]:
        """Hold the store's write lock; changes made through the transaction are committed
        by ``txn.commit(...)`` (uncommitted changes are dropped when the block ends).
        ``what`` names the holder in the error another thread gets when it waits too long."""
        self._check_fork()
        with self.lock.holding_thread_lock(what), self.lock.file_lock():
            txn = self._transaction()
            try:
                yield txn
            finally:
                self._commits_since_gc += txn.commits
                self.temps.discard()  # temp files of a save that failed
        self._maybe_housekeep()

    def commit_changes(
        self,
        changes: dict[str, bytes | None],
        message: str,
        *,
        base: str | None,
        identity: Identity | None = None,
        when: datetime | None = None,
        merge_parents: Sequence[str] = (),
    ) -> str | None:
        """See :meth:`Transaction.commit_changes` (the write lock must be held)."""
        txn = self._transaction()
        try:
            return txn.commit_changes(
                changes,
                message,
                base=base,
                identity=identity,
                when=when,
                merge_parents=merge_parents,
            )
        finally:
            self._commits_since_gc += txn.commits

    def fast_forward(self, target: str, subject: str = "fast-forward", *, base: str | None) -> None:
        """See :meth:`Transaction.fast_forward` (the write lock must be held)."""
        self._transaction().fast_forward(target, subject, base=base)

    def excluding_git(self) -> contextlib.AbstractContextManager[None]:
        """See :meth:`Transaction.excluding_git`."""
        return self._transaction().excluding_git()

    def unclean_paths(self, paths: Iterable[str]) -> list[str]:
        """Those of ``paths`` whose working file or index entry differs from HEAD."""
        try:
            index: GitIndex | None = self.index.load()
        except UnsupportedIndex:
            index = None
        dirty = []
        for path in paths:
            committed = self.entry(path)
            want = committed[1] if committed else None
            current = self.worktree.working_blob(path)
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
        if ref == self.refs.branch_ref():
            raise RepositoryError(f"{ref} is checked out; use a transaction to commit to it")
        self.objects.staged.clear()
        blobs: dict[str, bytes | None] = {}
        for path, data in changes.items():
            self.worktree.safe_target(path)
            blobs[path] = None if data is None else bytes.fromhex(self.objects.stage("blob", data))
        tree = self.objects.stage_tree(self.objects.commit_tree(parent), blobs)
        message, author = self._transaction().guarded(message, identity)
        commit = self.objects.stage_commit(tree, [parent], signature(author), message)
        self.objects.flush()
        self.refs.cas(ref, commit, self.refs.read(ref))
        return commit

    # --- the store's interface to the rest of gitmem: one call to a part each -----------

    @property
    def identity(self) -> Identity:
        """The author of this thread's commits: the store's, or the one ``acting_as`` set."""
        return self.authors.current()

    @identity.setter
    def identity(self, value: Identity) -> None:
        self.authors.default = value

    def acting_as(self, identity: Identity) -> contextlib.AbstractContextManager[None]:
        """Within the block, this thread's commits are authored by ``identity``."""
        return self.authors.acting_as(identity)

    @property
    def lock_timeout(self) -> float:
        """Seconds a writer waits for the write lock or a git lock."""
        return self.lock.timeout

    @lock_timeout.setter
    def lock_timeout(self, value: float) -> None:
        self.lock.timeout = value

    @property
    def recovered(self) -> list[tuple[str | None, list[str]]]:
        """Saves of dead writers repaired: (commit finished or None when undone, files)."""
        return self.recovery.recovered

    def recover(self) -> bool:
        """See :meth:`Recovery.recover`."""
        return self.recovery.recover()

    def git(self, *args: str) -> str:
        return self.runner.git(*args)

    def run_git(self, *args: str, ok: tuple[int, ...] = (0,)) -> tuple[int, bytes]:
        return self.runner.run_git(*args, ok=ok)

    def config_section(self, section: str) -> list[tuple[str, str]]:
        return self.runner.config_section(section)

    def configured_identity(self) -> tuple[str, str]:
        return self.runner.configured_identity()

    def ensure_config(self, values: dict[str, str]) -> None:
        self.runner.ensure_config(values)

    def stream_blobs(self, shas: Iterable[str]) -> Iterator[tuple[str, bytes | None]]:
        return self.objects.stream_blobs(shas)

    def branch_ref(self) -> str:
        return self.refs.branch_ref()

    def head(self) -> str | None:
        return self.refs.head()

    def set_ref(self, ref: str, new: str | None, old: str | None) -> None:
        self.refs.cas(ref, new, old)

    def has_object(self, hexsha: str, kind: str) -> bool:
        return self.objects.has_object(hexsha, kind)

    def tree(self, hexsha: str) -> Tree:
        return self.objects.tree(hexsha)

    def commit_tree(self, commit: str) -> str:
        return self.objects.commit_tree(commit)

    def parents(self, commit: str) -> list[str]:
        return self.objects.parents(commit)

    def blob(self, hexsha: str) -> bytes:
        return self.objects.blob(hexsha)

    def entry(self, path: str, commit: str | None = None) -> FileEntry | None:
        """(mode, blob id) of ``path`` at ``commit`` (default HEAD), or None."""
        rev = commit or self.head()
        return None if rev is None else self.objects.entry(path, rev)

    def read(self, path: str, commit: str | None = None) -> bytes | None:
        """The committed content of ``path`` at ``commit`` (default HEAD), or None."""
        found = self.entry(path, commit)
        return None if found is None else self.objects.blob(found[1])

    def folder_tree(self, folder: str, commit: str | None = None) -> Tree | None:
        """The tree of ``folder`` at ``commit`` (default HEAD), or None when there is none."""
        rev = commit or self.head()
        return None if rev is None else self.objects.folder_tree(folder, rev)

    def diff_trees(
        self, old: str | None, new: str | None
    ) -> dict[str, tuple[FileEntry | None, FileEntry | None]]:
        return self.objects.diff_trees(old, new)

    def working_blob(self, path: str) -> tuple[bytes, str] | None:
        return self.worktree.working_blob(path)

    def resolve(self, rev: str | datetime) -> str:
        return self.revisions.resolve(rev)

    def is_ancestor(self, commit: str, of: str | None = None) -> bool:
        return self.revisions.is_ancestor(commit, of)

    def log(
        self,
        paths: Sequence[str] | None = None,
        *,
        rev: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        trailers: Mapping[str, str] | None = None,
        files: bool = False,
        full_diff: bool = True,
    ) -> list[LogEntry]:
        """See :meth:`Revisions.log`."""
        return self.revisions.log(
            paths,
            rev=rev,
            since=since,
            until=until,
            limit=limit,
            trailers=trailers,
            files=files,
            full_diff=full_diff,
        )

    def index_history(self) -> str | None:
        return self.revisions.index_history()

    def file_log(self, paths: Sequence[str], rev: str | None = None) -> list[LogEntry]:
        return self.revisions.file_log(paths, rev)

    def diff_tree(self, old: str | None, new: str) -> list[FileChange]:
        return self.revisions.diff_tree(old, new)

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
        due = (
            self._commits_since_gc >= policy.every_commits
            or self.objects.bytes_written >= every_bytes
        )
        if not (policy.enabled and due):
            return
        if self._gc_thread is not None and self._gc_thread.is_alive():
            return
        # a run for the bytes alone only merges packs: the commit-graph and the history
        # cache keep their every-100-commits pace
        everything = self._commits_since_gc >= policy.every_commits
        if everything:
            self._commits_since_gc = 0
        self.objects.bytes_written = 0
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
