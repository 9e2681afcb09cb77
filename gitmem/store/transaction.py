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
``Repository`` inherits :class:`TransactionLayer`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from gitmem.errors import BranchMoved, ConflictError, LockTimeout, RepositoryError, UnsupportedIndex
from gitmem.store.base import Identity as Identity  # importable from here as before
from gitmem.store.gitindex import Index
from gitmem.store.locks import naming
from gitmem.store.objects import (
    MODE_FILE,
    MODE_TREE,
    Signature,
    Tree,
    commit_body,
    encode_pack,
    format_message,
    loose_object,
    object_id,
)
from gitmem.store.recovery import KEEP_MARK, RecoveryLayer

T = TypeVar("T")

log = logging.getLogger("gitmem")

# how often a save is rebuilt on a branch that keeps moving under it before it gives up
MAX_REBUILDS = 20


def signature(identity: Identity, when: datetime | None = None) -> Signature:
    """Author/committer line data for ``identity`` at ``when`` (default now, local zone)."""
    moment = (when or datetime.now()).astimezone()
    offset = moment.utcoffset()
    minutes = int(offset.total_seconds() // 60) if offset is not None else 0
    return Signature(identity.name, identity.email, int(moment.timestamp()), minutes)


class TransactionLayer(RecoveryLayer):
    """``commit_changes`` and ``fast_forward``: the two ways the checked-out branch moves,
    and the objects, ref and reflog lines they write."""

    # Set by the manager: the last look at every commit message and author before it is
    # written (secrets redacted), so no path into a commit can bypass it.
    commit_guard: Callable[[str, Identity], tuple[str, Identity]] | None = None

    def _guarded(self, message: str, identity: Identity | None) -> tuple[str, Identity]:
        author = identity or self.identity
        guard = self.commit_guard
        return (message, author) if guard is None else guard(message, author)

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
        """Commit ``changes`` (path -> content, None deletes), computed from commit ``base``,
        as one commit on the branch.

        Must be called with the write lock held (through a Transaction). Returns the new
        commit id, or None when nothing changed. If the branch moved past ``base`` (a
        person's git command), the commit is built on the new tip when the new commits
        touched none of ``changes``' files, and BranchMoved is raised when they did: the
        caller computes its change again from the tip. With ``merge_parents`` the commit is
        a merge of the branch and those commits (written even if the tree does not change).
        """
        ref = self.branch_ref()
        self._staged.clear()
        blob_ids: dict[str, bytes | None] = {}
        hex_ids: dict[str, str | None] = {}
        for path, data in changes.items():
            self._safe_target(path)
            if data is None:
                blob_ids[path], hex_ids[path] = None, None
            else:
                hexsha = self.stage_object("blob", data)
                self._remember_blob(hexsha, data)
                blob_ids[path], hex_ids[path] = bytes.fromhex(hexsha), hexsha
        message, author = self._guarded(message, identity)
        sig = signature(author, when)
        subject = message.split("\n", 1)[0]
        prepared = self._prepare_working_files(changes)
        for _attempt in range(MAX_REBUILDS):
            old = self._read_ref(ref)
            if old != base:
                self._check_moved(ref, base, old, changes)
            base_tree = self.commit_tree(old) if old else None
            previous: dict[str, str | None] = {}
            for path in changes:
                found = self.entry(path, old) if old else None
                previous[path] = found[1] if found else None
            tree = self._build_tree(base_tree, blob_ids)
            if tree == base_tree and not merge_parents:
                self._staged.clear()
                return None
            parents = [old, *merge_parents] if old else list(merge_parents)
            commit = self.stage_object("commit", commit_body(tree, parents, sig, sig, message))
            self._commit_trees[commit] = tree
            self.flush_objects()
            files = {p: (previous[p], hex_ids[p]) for p in changes}
            if self._publish(ref, old, commit, files, prepared, subject):
                break
            # the branch moved between reading it and the swap: look again
            for data in changes.values():
                if data is not None:
                    self.stage_object("blob", data)
        else:
            raise ConflictError(f"{self.root}: the branch kept moving; the save was not written")
        self._commits_since_gc += 1
        return commit

    def _check_moved(
        self, ref: str, base: str | None, tip: str | None, changes: dict[str, bytes | None]
    ) -> None:
        """Raise BranchMoved if the commits from ``base`` to ``tip`` touched ``changes``."""
        if tip is None:
            raise ConflictError(
                f"{self.root}: {ref} was deleted during the save; nothing was written"
            )
        touched = self.diff_trees(base, tip)
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
        files: dict[str, tuple[str | None, str | None]],
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
        self._write_lock_file(json.dumps(journal).encode())
        try:
            try:
                self._load_index()
            except UnsupportedIndex:
                moved = self._publish_with_git(ref, old, new, files, prepared, subject)
            else:
                moved = self._publish_locked(ref, old, new, files, prepared, subject)
        except LockTimeout:
            # a person's git holds a lock; they are all taken before anything is touched
            self._write_lock_file(b"")
            raise
        self._write_lock_file(b"")
        return moved

    def _publish_locked(
        self,
        ref: str,
        old: str | None,
        new: str,
        files: dict[str, tuple[str | None, str | None]],
        prepared: dict[str, Path | None],
        subject: str,
    ) -> bool:
        target = self.git_dir / ref
        target.parent.mkdir(parents=True, exist_ok=True)
        # git takes index.lock before the branch's lock too: a person's git fails at once
        with self._holding_git_lock(self.git_dir / "index"), self._holding_git_lock(target):
            if self._read_ref(ref) != old:
                return False
            index = self._load_index()  # as it is now that nobody else can write it
            undo = self._swap_in(prepared)
            saved = {p: index.stages(p.encode()) for p in files}
            logged: list[tuple[Path, int]] = []
            moved = False
            try:
                # the reflog first, as git does: if it cannot be written the ref does not move
                logged = self._append_reflogs(ref, self._reflog_line(old, new, subject))
                self._staged_entries(index, {p: b for p, (_a, b) in files.items()})
                self._write_index(index)
                self._move_ref(ref, new)  # nothing in between: the index is never behind
                moved = True
            finally:
                # (an interrupt can land between the write and ``moved = True``)
                if not moved and self._read_ref(ref) != new:
                    self._unpublish(index, saved, undo, logged)
        return True

    def _unpublish(
        self,
        index: Index,
        saved: dict[str, list[bytes]],
        undo: list[tuple[Path, Path | None]],
        logged: list[tuple[Path, int]],
    ) -> None:
        """Put back the index entries, working files and reflogs of a publish that failed
        before the branch moved (if this fails too, the journal stays and the next writer
        brings them to HEAD)."""
        self._unlog(logged)
        for path, chunks in saved.items():
            index.restore(path.encode(), chunks)
        self._write_index(index)
        self._swap_back(undo)

    def _publish_with_git(
        self,
        ref: str,
        old: str | None,
        new: str,
        files: dict[str, tuple[str | None, str | None]],
        prepared: dict[str, Path | None],
        subject: str,
    ) -> bool:
        """:meth:`_publish` for an index this writer cannot edit (version 4,
        sparse): git edits it, taking ``index.lock`` itself for each step (rare, slower)."""
        target = self.git_dir / ref
        target.parent.mkdir(parents=True, exist_ok=True)
        with self._holding_git_lock(target):
            if self._read_ref(ref) != old:
                return False
            undo = self._swap_in(prepared)
            logged: list[tuple[Path, int]] = []
            moved = False
            try:
                logged = self._append_reflogs(ref, self._reflog_line(old, new, subject))
                self._update_index_with_git({p: b for p, (_a, b) in files.items()})
                self._move_ref(ref, new)
                moved = True
            finally:
                if not moved and self._read_ref(ref) != new:
                    self._unlog(logged)
                    self._update_index_with_git({p: a for p, (a, _b) in files.items()})
                    self._swap_back(undo)
        return True

    @contextlib.contextmanager
    def excluding_git(self) -> Iterator[None]:
        """Hold git's ``index.lock`` for the block, so that a person's ``git add`` or
        ``git commit -a`` cannot land meanwhile (they fail and are run again): a save that
        had to be rebuilt because a person kept committing is then sure to get through."""
        try:
            self._load_index()
        except UnsupportedIndex:  # git edits such an index itself and needs the lock then
            yield
            return
        with self._holding_git_lock(self.git_dir / "index"):
            yield

    def fast_forward(self, target: str, subject: str = "fast-forward", *, base: str | None) -> None:
        """Move the branch from ``base`` to its descendant ``target`` and bring the changed
        working files and index entries along. Must be called with the write lock held.
        Raises BranchMoved (nothing written) if a person's commit moved the branch past
        ``base``: it is no fast-forward any more, the caller merges from the new tip."""
        ref = self.branch_ref()
        old = self._read_ref(ref)
        if old != base:
            self._moved_on(base, old)
        changes = self.diff_trees(old, target)
        for path, (_before, after) in changes.items():
            self._safe_target(path)
            if after is not None and after[0] != MODE_FILE:
                raise RepositoryError(
                    f"{path} at {target[:12]} is not a regular file (mode {after[0].decode()}); "
                    "gitmem stores hold regular files only, merge this with git"
                )
        prepared = self._prepare_working_files(
            {p: None if a is None else self.blob(a[1]) for p, (_b, a) in changes.items()}
        )
        files = {p: (b[1] if b else None, a[1] if a else None) for p, (b, a) in changes.items()}
        if not self._publish(ref, old, target, files, prepared, subject):
            self._moved_on(base, self._read_ref(ref))

    def _moved_on(self, base: str | None, tip: str | None) -> NoReturn:
        if tip is None:
            raise ConflictError(f"{self.root}: the branch was deleted during the fast-forward")
        raise BranchMoved(
            f"the branch moved to {tip[:12]} (a commit made by another git command) during "
            "the fast-forward; nothing was written, try again",
            base=base,
            tip=tip,
            paths=sorted(self.diff_trees(base, tip)),
        )

    def _finish_publish(self, record: dict[str, Any]) -> str | None:
        """Move the branch to the dead writer's commit if all that was left of its save was
        that last step (its index entries are written, the branch is still at the old
        commit): the save then keeps its own commit and trailers, where undoing it would
        drop it. Returns the commit, or None when the save is undone instead."""
        ref, old, new = record.get("ref"), record.get("old"), record.get("new")
        files: dict[str, list[str | None]] = record.get("files") or {}
        if not (isinstance(ref, str) and isinstance(new, str) and files):
            return None
        if self._read_ref(ref) != old or not self.has_object(new, "commit"):
            return None
        if self._index_torn():
            return None
        try:
            index = self._load_index()
        except UnsupportedIndex:
            return None
        for path, (_before, after) in files.items():
            staged = index.entry_sha(path.encode())
            if (staged.hex() if staged is not None else None) != after:
                return None  # it died before its index write: undo it
        message = self._read_object(new, "commit").partition(b"\n\n")[2]
        subject = message.split(b"\n", 1)[0].decode(errors="replace")
        with self._holding_git_lock(self.git_dir / ref):
            if self._read_ref(ref) != old:
                return None
            self._append_reflogs(ref, self._reflog_line(old, new, subject))
            self._move_ref(ref, new)
        log.warning(
            "%s: finished a save whose writer died before moving %s (commit %s)",
            self.root,
            ref,
            new[:12],
        )
        return new

    # --- objects, the branch and its reflog (the steps of a publish) ---------------------

    def write_object(self, kind: str, data: bytes) -> str:
        """Write a loose object (no-op if it exists) and return its id."""
        hexsha, compressed = loose_object(kind, data)
        folder = self.git_dir / "objects" / hexsha[:2]
        target = folder / hexsha[2:]
        if target.exists():
            return hexsha
        folder.mkdir(exist_ok=True)
        tmp = folder / f"tmp_obj_{os.getpid()}_{threading.get_ident()}"
        with naming(tmp), open(tmp, "wb") as handle:
            handle.write(compressed)
        os.chmod(tmp, 0o444)
        os.replace(tmp, target)
        self._bytes_since_gc += len(compressed)
        return hexsha

    def stage_object(self, kind: str, data: bytes) -> str:
        """Queue an object for the next :meth:`flush_objects`; returns its id."""
        hexsha = object_id(kind, data)
        self._staged.append((kind, data, hexsha))
        return hexsha

    def flush_objects(self) -> None:
        """Write the queued objects: one pack (two files) rather than a file per object."""
        staged, self._staged = self._staged, []
        if not staged:
            return
        if len(staged) == 1:
            self.write_object(*staged[0][:2])
            return
        name, pack, index = encode_pack(staged)
        folder = self.git_dir / "objects" / "pack"
        folder.mkdir(parents=True, exist_ok=True)
        tmp = self.state_dir / "tmp" / f"pack-{os.getpid()}-{threading.get_ident()}"
        self._prepared.append(tmp)  # removed if the write fails
        # git's protocol for a pack on its way in (index-pack --keep): a .keep first, then
        # the .pack, the .idx last (it publishes), then the .keep goes. `git repack -d` (a
        # person's gc, or their `git commit`'s auto gc) lists packs by their .pack and
        # deletes them after, so a .pack not yet readable would go with the save's commit
        # in it; `git gc` deletes an .idx without its .pack as garbage, so .idx first fails too
        keep: Path | None = None
        try:
            fd = os.open(folder / f"pack-{name}.keep", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:  # the same pack being written again: that keep holds it
            pass
        else:
            keep = folder / f"pack-{name}.keep"
            self._prepared.append(keep)
            os.write(fd, KEEP_MARK + f" pid={os.getpid()}\n".encode())
            os.close(fd)
        for data, suffix in ((pack, ".pack"), (index, ".idx")):
            with naming(tmp), open(tmp, "wb") as handle:
                handle.write(data)
            os.chmod(tmp, 0o444)
            os.replace(tmp, folder / f"pack-{name}{suffix}")
        self._prepared.remove(tmp)
        if keep is not None:
            self._prepared.remove(keep)
            keep.unlink()
        self._bytes_since_gc += len(pack)
        self._packs_since_gc += 1

    def _build_tree(self, base: str | None, changes: dict[str, bytes | None]) -> str:
        """Write the trees for ``changes`` (path -> blob id or None to delete) over ``base``."""
        tree = self.tree(base).copy() if base else Tree.empty()
        groups: dict[str, dict[str, bytes | None]] = {}
        for path, sha in changes.items():
            head, sep, rest = path.partition("/")
            if sep:
                groups.setdefault(head, {})[rest] = sha
            elif sha is None:
                if path.encode() in tree.entries:
                    tree.remove(path.encode())
            else:
                tree.set(path.encode(), MODE_FILE, sha)
        for name, sub_changes in groups.items():
            found = tree.entries.get(name.encode())
            sub_base = found[1].hex() if found and found[0] == MODE_TREE else None
            sub = self._build_tree(sub_base, sub_changes)
            if self.tree(sub).entries:
                tree.set(name.encode(), MODE_TREE, bytes.fromhex(sub))
            elif name.encode() in tree.entries:
                tree.remove(name.encode())
        hexsha = self.stage_object("tree", tree.serialize())
        self._remember_tree(hexsha, tree)
        return hexsha

    def _reflog_line(self, old: str | None, new: str, subject: str) -> bytes:
        who = signature(self.identity).encode().decode()
        return f"{old or '0' * 40} {new} {who}\tcommit: {subject}\n".encode()

    def _move_ref(self, ref: str, new: str) -> None:
        """Point ``ref`` at ``new``; the caller holds its git lock and checked the old value."""
        self.ref_updates += 1
        self._overwrite(self.git_dir / ref, (new + "\n").encode())

    def _append_reflogs(self, ref: str, line: bytes) -> list[tuple[Path, int]]:
        """Append ``line`` to the reflogs of ``ref`` and HEAD; returns (file, size before)
        for :meth:`_unlog`."""
        written: list[tuple[Path, int]] = []
        try:
            for reflog in (self.git_dir / "logs" / ref, self.git_dir / "logs" / "HEAD"):
                reflog.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(reflog, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    written.append((reflog, os.fstat(fd).st_size))
                    if os.write(fd, line) != len(line):
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(reflog))
                finally:
                    os.close(fd)
        except OSError:
            self._unlog(written)  # no half line is left behind
            raise
        return written

    def _unlog(self, written: list[tuple[Path, int]]) -> None:
        for reflog, size in written:
            with contextlib.suppress(OSError):
                os.truncate(reflog, size)


@dataclass
class Transaction:
    """Reads and writes under the store's write lock; ``commit`` makes one commit.

    Everything read through the transaction is read at :meth:`head`, and ``commit`` swaps
    the branch against that same commit (see the module docs).
    """

    repo: TransactionLayer  # the Repository this transaction writes to
    pending: dict[str, bytes | None] = field(default_factory=dict)
    # secrets replaced in this commit's content, by kind: recorded as a trailer
    redacted: dict[str, int] = field(default_factory=dict)
    # the commit this transaction's reads come from; only a person's git command can move
    # the branch while the lock is held, and commit_changes catches that
    _head: str | None = None
    _head_known: bool = False

    def head(self) -> str | None:
        if not self._head_known:
            self._head, self._head_known = self.repo.head(), True
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
                        exclusive.enter_context(self.repo.excluding_git())
                    attempt += 1
                    self.restart()
                    if again is not None:
                        again()

    def read(self, path: str) -> bytes | None:
        """Content of ``path`` as this transaction sees it (pending changes, then HEAD)."""
        if path in self.pending:
            return self.pending[path]
        return self.repo.read(path, self.head())

    def hand_edit(self, path: str) -> bytes | None:
        """The working-tree content of ``path`` if a person changed it since HEAD, else None."""
        if path in self.pending:
            return None
        committed = self.repo.entry(path, self.head())
        current = self.repo.working_blob(path)
        if current is None:
            return None  # a deleted working file is restored from HEAD, nothing is lost
        if committed is not None and committed[1] == current[1]:
            return None
        return current[0]

    def write(self, path: str, data: bytes) -> None:
        self.pending[path] = data

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
        with self.repo._os_errors("write the commit"):
            sha = self.repo.commit_changes(
                changes, message, base=self.head(), identity=identity, when=when
            )
        # the next read starts from this commit (or from the tip, when nothing changed)
        self._head, self._head_known = sha, sha is not None
        return sha
