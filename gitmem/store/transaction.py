"""The save path of ``Repository``: one commit on the branch, and the order it is published in.

A save's changes are computed from one commit (its *base*); the branch is compare-and-swapped
against that commit, never against whatever the branch holds when the save gets there. A
person's ``git commit`` that lands meanwhile is kept: if it touched other files the save is
rebuilt on top of it, if it touched the same files :class:`~gitmem.errors.BranchMoved` asks
the caller to compute its change again from the new tip (every writer does so through
:meth:`Transaction.rebuilding`).

Publishing happens while git's own locks are held, so a person's ``git add`` or ``git commit``
runs wholly before it (and the swap then fails: the save is rebuilt) or wholly after it:

1. the journal (in the write lock file) names the ref, both commits and every file;
2. take ``index.lock`` and the branch's lock, as ``git commit`` does; check the branch is
   still at the base;
3. put the working files in place (the replaced ones kept as hard-link backups);
4. append the reflog lines, stage the new blobs in the index;
5. point the branch at the new commit (the very next write after the index);
6. release the locks, drop the backups, clear the journal.
If anything fails before 5, steps 3 and 4 are undone and the save is reported not written.

A writer killed in 2-6 leaves git lock files behind, naming their dead owner: git refuses
to commit until the next gitmem call finishes or undoes the save from the journal (finished,
as its own commit, if only step 5 was left). The index never stages the *old* content of a
file whose new content is committed, so even a person who deletes the stale locks by hand
cannot revert a save with an unrelated ``git commit``; gitmem's pre-commit hook repairs the
save first, so such a commit does not take in an unfinished save either.

:class:`Transaction` does all of this over the parts ``Repository`` holds: the object
database (``objects``), the refs (``refs``), the work tree (``worktree``), the git index
(``index``) and the write lock (``lock``), each named at its call.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import NoReturn, TypeVar

from gitmem.errors import BranchMoved, ConflictError, LockTimeout, RepositoryError, UnsupportedIndex
from gitmem.store.gitindex import GitIndex
from gitmem.store.indexfile import GitIndexFile
from gitmem.store.locks import WriteLock
from gitmem.store.objects import MODE_FILE, Authors, ObjectDatabase, format_message, signature
from gitmem.store.objects import Identity as Identity  # importable from here as before
from gitmem.store.revisions import Refs
from gitmem.store.worktree import WorkTree

T = TypeVar("T")

# how often a save is rebuilt on a branch that keeps moving under it before it gives up
MAX_REBUILDS = 20

# the last look at every commit message and author before it is written
CommitGuard = Callable[[str, Identity], tuple[str, Identity]]

# a file's blob before and after a save: (old blob id, new blob id), None for absent
FileChange = tuple[str | None, str | None]


@dataclass(frozen=True)
class WrittenFile:
    """A file's new content already in the object database (``blob``) and in a temp file
    ready to go into place (``tmp``): what a transaction of many files keeps instead of
    their bytes, so that its memory stays flat (see :meth:`Transaction.write_now`)."""

    blob: str
    tmp: Path

    def data(self) -> bytes:
        return self.tmp.read_bytes()


# a pending change of one file: its content, the content written already, None to delete
Pending = bytes | WrittenFile | None


def content(change: bytes | WrittenFile) -> bytes:
    """The bytes of a pending change that writes a file."""
    return change.data() if isinstance(change, WrittenFile) else change


@dataclass
class Transaction:
    """Reads and writes under the store's write lock; ``commit`` makes one commit.

    Everything read through the transaction is read at :meth:`head`, and ``commit`` swaps
    the branch against that same commit (see the module docs). ``commit_changes`` and
    ``fast_forward`` are the two ways the checked-out branch moves.
    """

    objects: ObjectDatabase
    refs: Refs
    worktree: WorkTree
    index: GitIndexFile
    lock: WriteLock
    authors: Authors
    guard: CommitGuard | None = None
    pending: dict[str, Pending] = field(default_factory=dict)
    # secrets replaced in this commit's content, by kind: recorded as a trailer
    redacted: dict[str, int] = field(default_factory=dict)
    # the commit this transaction's reads come from; only a person's git command can move
    # the branch while the lock is held, and commit_changes catches that
    _head: str | None = None
    _head_known: bool = False
    # commits made through this transaction (housekeeping counts them)
    commits: int = 0

    def head(self) -> str | None:
        if not self._head_known:
            self._head, self._head_known = self.refs.head(), True
        return self._head

    def restart(self) -> None:
        """Drop pending changes and read from the branch's current tip again (after
        BranchMoved, to compute the change anew)."""
        self.pending, self.redacted = {}, {}
        self._head_known = False

    def rebuilding(self, work: Callable[[], T], *, again: Callable[[], None] | None = None) -> T:
        """Run ``work`` (it reads through this transaction and commits) until a commit
        lands: each time a person's commit to the same files moved the branch meanwhile
        (BranchMoved, nothing written), read from the new tip and compute it again.

        ``again`` runs before each new attempt (a batch replays its changes there). From
        the first retry on, git's ``index.lock`` is held, so a person committing in a loop
        cannot starve the change; after MAX_REBUILDS attempts BranchMoved is raised.
        """
        with contextlib.ExitStack() as exclusive:
            attempt = 1
            while True:
                try:
                    return work()
                except BranchMoved:
                    if attempt == MAX_REBUILDS:
                        raise
                    if attempt == 1:  # keep the person's git out until this one is done
                        exclusive.enter_context(self.excluding_git())
                    attempt += 1
                    self.restart()
                    if again is not None:
                        again()

    def read(self, path: str) -> bytes | None:
        """Content of ``path`` as this transaction sees it (pending changes, then HEAD)."""
        if path in self.pending:
            change = self.pending[path]
            return None if change is None else content(change)
        head = self.head()
        found = self.objects.entry(path, head) if head else None
        return None if found is None else self.objects.blob(found[1])

    def hand_edit(self, path: str) -> bytes | None:
        """The working-tree content of ``path`` if a person changed it since HEAD, else None."""
        if path in self.pending:
            return None
        head = self.head()
        committed = self.objects.entry(path, head) if head else None
        current = self.worktree.working_blob(path)
        if current is None:
            return None  # a deleted working file is restored from HEAD, nothing is lost
        if committed is not None and committed[1] == current[1]:
            return None
        return current[0]

    def write(self, path: str, data: bytes) -> None:
        self.pending[path] = data

    def write_now(self, path: str, data: bytes) -> None:
        """:meth:`write`, with the blob written into the object database and the working
        file's temp file made now: the transaction keeps their names, not ``data`` (a batch
        of a whole import stays flat). An object not committed in the end is garbage that
        ``git gc`` prunes; the temp file goes when the transaction ends."""
        self.worktree.safe_target(path)
        blob = self.objects.write_object("blob", data)
        self.pending[path] = WrittenFile(blob, self.worktree.prepare_one(data))

    def delete(self, path: str) -> None:
        self.pending[path] = None

    def commit(
        self,
        subject: str,
        *,
        body: str = "",
        trailers: dict[str, str] | None = None,
        identity: Identity | None = None,
        when: datetime | None = None,
    ) -> str | None:
        """Commit the pending changes; None if they change nothing. Raises BranchMoved
        (nothing written) if a person's commit changed the same files since :meth:`head`."""
        if not self.pending:
            return None
        changes, self.pending = self.pending, {}
        if self.redacted:
            counts = ", ".join(f"{kind}={n}" for kind, n in sorted(self.redacted.items()))
            trailers = {**(trailers or {}), "Gitmem-Redacted": counts}
            self.redacted = {}
        message = format_message(subject, body, trailers)
        with self.lock.os_errors("write the commit"):
            sha = self.commit_changes(
                changes, message, base=self.head(), identity=identity, when=when
            )
        # the next read starts from this commit (or from the tip, when nothing changed)
        self._head, self._head_known = sha, sha is not None
        return sha

    # --- moving the branch ---------------------------------------------------------------

    def guarded(self, message: str, identity: Identity | None) -> tuple[str, Identity]:
        """``message`` and its author as the commit guard lets them be written."""
        author = identity or self.authors.current()
        return (message, author) if self.guard is None else self.guard(message, author)

    def commit_changes(
        self,
        changes: Mapping[str, Pending],
        message: str,
        *,
        base: str | None,
        identity: Identity | None = None,
        when: datetime | None = None,
        merge_parents: Sequence[str] = (),
    ) -> str | None:
        """Commit ``changes`` (path -> content, None deletes), computed from commit ``base``,
        as one commit on the branch.

        Must be called with the write lock held. Returns the new commit id, or None when
        nothing changed. If the branch moved past ``base`` (a person's git command), the
        commit is built on the new tip when the new commits touched none of ``changes``'
        files, and BranchMoved is raised when they did: the caller computes its change again
        from the tip. With ``merge_parents`` the commit is a merge of the branch and those
        commits (written even if the tree does not change).
        """
        ref = self.refs.branch_ref()
        self.objects.staged.clear()
        blob_ids: dict[str, bytes | None] = {}
        hex_ids: dict[str, str | None] = {}
        for path, data in changes.items():
            self.worktree.safe_target(path)
            if data is None:
                blob_ids[path], hex_ids[path] = None, None
            elif isinstance(data, WrittenFile):  # in the object database already
                blob_ids[path], hex_ids[path] = bytes.fromhex(data.blob), data.blob
            else:
                hexsha = self.objects.stage_blob(data)
                blob_ids[path], hex_ids[path] = bytes.fromhex(hexsha), hexsha
        message, author = self.guarded(message, identity)
        sig = signature(author, when)
        subject = message.split("\n", 1)[0]
        prepared = self.worktree.prepare(
            {p: d.tmp if isinstance(d, WrittenFile) else d for p, d in changes.items()}
        )
        for _attempt in range(MAX_REBUILDS):
            old = self.refs.read(ref)
            if old != base:
                self._check_moved(ref, base, old, changes)
            base_tree = self.objects.commit_tree(old) if old else None
            previous: dict[str, str | None] = {}
            for path in changes:
                found = self.objects.entry(path, old) if old else None
                previous[path] = found[1] if found else None
            tree = self.objects.stage_tree(base_tree, blob_ids)
            if tree == base_tree and not merge_parents:
                self.objects.staged.clear()
                return None
            parents = [old, *merge_parents] if old else list(merge_parents)
            commit = self.objects.stage_commit(tree, parents, sig, message)
            self.objects.flush()
            files = {p: (previous[p], hex_ids[p]) for p in changes}
            if self._publish(ref, old, commit, files, prepared, subject):
                break
            # the branch moved between reading it and the swap: look again
            for data in changes.values():
                if isinstance(data, bytes):
                    self.objects.stage("blob", data)
        else:
            raise ConflictError(
                f"{self.refs.root}: the branch kept moving; the save was not written"
            )
        self.commits += 1
        return commit

    def _check_moved(
        self, ref: str, base: str | None, tip: str | None, changes: Mapping[str, Pending]
    ) -> None:
        """Raise BranchMoved if the commits from ``base`` to ``tip`` touched ``changes``."""
        if tip is None:
            raise ConflictError(
                f"{self.refs.root}: {ref} was deleted during the save; nothing was written"
            )
        touched = self.objects.diff_trees(base, tip)
        overlap = sorted(p for p in changes if p in touched)
        if overlap:
            raise BranchMoved(
                f"{', '.join(overlap[:3])} changed in commit {tip[:12]} (made by another git "
                "command during the save); nothing was written, try again",
                base=base,
                tip=tip,
                paths=overlap,
            )

    def _publish(
        self,
        ref: str,
        old: str | None,
        new: str,
        files: dict[str, FileChange],
        prepared: dict[str, Path | None],
        subject: str,
    ) -> bool:
        """Move ``ref`` from ``old`` to ``new`` with the working files and index entries of
        ``files`` (path -> (old blob, new blob)); False if the branch was not at ``old``.
        Steps and crash states: see the module docs."""
        journal = {
            "ref": ref,
            "old": old,
            "new": new,
            "files": {p: [a, b] for p, (a, b) in files.items()},
        }
        self.lock.write_journal(json.dumps(journal).encode())
        line = self.refs.reflog_line(old, new, subject, self.authors.current())
        try:
            try:
                self.index.load()
            except UnsupportedIndex:
                moved = self._publish_with_git(ref, old, new, files, prepared, line)
            else:
                moved = self._publish_locked(ref, old, new, files, prepared, line)
        except LockTimeout:
            # a person's git holds a lock; they are all taken before anything is touched
            self.lock.write_journal(b"")
            raise
        self.lock.write_journal(b"")
        return moved

    def _publish_locked(
        self,
        ref: str,
        old: str | None,
        new: str,
        files: dict[str, FileChange],
        prepared: dict[str, Path | None],
        reflog_line: bytes,
    ) -> bool:
        target = self.refs.git_dir / ref
        target.parent.mkdir(parents=True, exist_ok=True)
        # git takes index.lock before the branch's lock too: a person's git fails at once
        with self.lock.holding_git_lock(self.index.path), self.lock.holding_git_lock(target):
            if self.refs.read(ref) != old:
                return False
            index = self.index.load()  # as it is now that nobody else can write it
            undo = self.worktree.swap_in(prepared)
            saved = {p: index.stages(p.encode()) for p in files}
            logged: list[tuple[Path, int]] = []
            moved = False
            try:
                # the reflog first, as git does: if it cannot be written the ref does not move
                logged = self.refs.append_reflogs(ref, reflog_line)
                self.index.stage_entries(index, {p: b for p, (_a, b) in files.items()})
                self.index.write(index)
                self.refs.move(ref, new)  # nothing in between: the index is never behind
                moved = True
            finally:
                # (an interrupt can land between the write and ``moved = True``)
                if not moved and self.refs.read(ref) != new:
                    self._unpublish(index, saved, undo, logged)
        return True

    def _unpublish(
        self,
        index: GitIndex,
        saved: dict[str, list[bytes]],
        undo: list[tuple[Path, Path | None]],
        logged: list[tuple[Path, int]],
    ) -> None:
        """Put back the index entries, working files and reflogs of a publish that failed
        before the branch moved (if this fails too, the journal stays and the next writer
        brings them to HEAD)."""
        self.refs.unlog(logged)
        for path, chunks in saved.items():
            index.restore(path.encode(), chunks)
        self.index.write(index)
        self.worktree.swap_back(undo)

    def _publish_with_git(
        self,
        ref: str,
        old: str | None,
        new: str,
        files: dict[str, FileChange],
        prepared: dict[str, Path | None],
        reflog_line: bytes,
    ) -> bool:
        """:meth:`_publish` for an index this writer cannot edit (version 4,
        sparse): git edits it, taking ``index.lock`` itself for each step (rare, slower)."""
        target = self.refs.git_dir / ref
        target.parent.mkdir(parents=True, exist_ok=True)
        with self.lock.holding_git_lock(target):
            if self.refs.read(ref) != old:
                return False
            undo = self.worktree.swap_in(prepared)
            logged: list[tuple[Path, int]] = []
            moved = False
            try:
                logged = self.refs.append_reflogs(ref, reflog_line)
                self.index.update_with_git({p: b for p, (_a, b) in files.items()})
                self.refs.move(ref, new)
                moved = True
            finally:
                if not moved and self.refs.read(ref) != new:
                    self.refs.unlog(logged)
                    self.index.update_with_git({p: a for p, (a, _b) in files.items()})
                    self.worktree.swap_back(undo)
        return True

    @contextlib.contextmanager
    def excluding_git(self) -> Iterator[None]:
        """Hold git's ``index.lock`` for the block, so that a person's ``git add`` or
        ``git commit -a`` cannot land meanwhile (they fail and are run again): a save that
        had to be rebuilt because a person kept committing is then sure to get through."""
        try:
            self.index.load()
        except UnsupportedIndex:  # git edits such an index itself and needs the lock then
            yield
            return
        with self.lock.holding_git_lock(self.index.path):
            yield

    def fast_forward(self, target: str, subject: str = "fast-forward", *, base: str | None) -> None:
        """Move the branch from ``base`` to its descendant ``target`` and bring the changed
        working files and index entries along. Must be called with the write lock held.
        Raises BranchMoved (nothing written) if a person's commit moved the branch past
        ``base``: it is no fast-forward any more, the caller merges from the new tip."""
        ref = self.refs.branch_ref()
        old = self.refs.read(ref)
        if old != base:
            self._moved_on(base, old)
        changes = self.objects.diff_trees(old, target)
        for path, (_before, after) in changes.items():
            self.worktree.safe_target(path)
            if after is not None and after[0] != MODE_FILE:
                raise RepositoryError(
                    f"{path} at {target[:12]} is not a regular file (mode {after[0].decode()}); "
                    "gitmem stores hold regular files only, merge this with git"
                )
        prepared = self.worktree.prepare(
            {p: None if a is None else self.objects.blob(a[1]) for p, (_b, a) in changes.items()}
        )
        files = {p: (b[1] if b else None, a[1] if a else None) for p, (b, a) in changes.items()}
        if not self._publish(ref, old, target, files, prepared, subject):
            self._moved_on(base, self.refs.read(ref))

    def _moved_on(self, base: str | None, tip: str | None) -> NoReturn:
        if tip is None:
            raise ConflictError(f"{self.refs.root}: the branch was deleted during the fast-forward")
        raise BranchMoved(
            f"the branch moved to {tip[:12]} (a commit made by another git command) during "
            "the fast-forward; nothing was written, try again",
            base=base,
            tip=tip,
            paths=sorted(self.objects.diff_trees(base, tip)),
        )
