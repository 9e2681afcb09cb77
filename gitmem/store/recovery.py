"""Recovery for ``Repository``: finishing or undoing a save whose writer died.

A writer can be killed at any instruction. What it may leave behind, and what repairs it:

- a journal in ``.git/gitmem/write.lock`` (written before any file, index entry or ref is
  touched): a save that had only its branch left to move is finished (the branch moved
  to its commit); else the files it names, and their index entries, are brought to HEAD by the next
  writer, or by the next process that opens the store when no writer holds the lock, and
  the git locks it held (``index.lock``, the branch's) are removed so git works again;
- a half-rewritten ``.git/index`` (the index is overwritten in place; a kill can cut a
  multi-page write short), or a split index whose shared index is gone: rebuilt from HEAD
  and the working tree;
- git ``.lock`` files naming a gitmem process that is gone: cleared at once (see
  ``WriteLock``); any other lock may be a person's live git command and is
  never removed, only waited for; temp files older than a minute: swept.

:class:`Recovery` does it, called by the write lock each time it is taken.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path
from stat import S_ISREG
from typing import Any

from gitmem.errors import RepositoryError, UnsupportedIndex
from gitmem.store.gitindex import GitIndex, stat_fields
from gitmem.store.indexfile import GitIndexFile
from gitmem.store.locks import WriteLock, owner_is_dead
from gitmem.store.objects import KEEP_MARK, Authors, ObjectDatabase, object_id
from gitmem.store.revisions import Refs
from gitmem.store.worktree import WorkTree

log = logging.getLogger("gitmem")


class Recovery:
    """Crash recovery (see the module docs)."""

    def __init__(
        self,
        lock: WriteLock,
        refs: Refs,
        objects: ObjectDatabase,
        worktree: WorkTree,
        index: GitIndexFile,
        authors: Authors,
    ) -> None:
        self.root = worktree.root
        self.git_dir = refs.git_dir
        self.lock = lock
        self.refs = refs
        self.objects = objects
        self.worktree = worktree
        self.index = index
        self.authors = authors  # named in the reflog line of a save it finishes
        # saves of dead writers this object repaired: (commit it finished, or None when it
        # undid the save; the files); replaced, never appended to in place
        self.recovered: list[tuple[str | None, list[str]]] = []

    def recover(self) -> bool:
        """Finish or undo a save whose writer died half-way, if no writer holds the lock.

        Runs when a store is opened (and at every lock), so the working tree and index
        match HEAD again after any gitmem call. Returns True if it had the lock to check.
        """
        try:
            raw = self.lock.path.read_bytes()
        except OSError:
            return False
        stale = self.stale_temps()
        if not raw.partition(b"\n")[2].strip() and not stale:
            return False  # nothing was left half-done
        self.lock.check_fork()
        if not self.lock.thread_lock.acquire(blocking=False):
            return False
        try:
            if self.lock.held():
                return False
            with self.lock.flock(wait=False) as got:
                for item in self.stale_temps() if got else ():
                    with contextlib.suppress(OSError):
                        item.unlink()
                return got
        except (OSError, RepositoryError) as exc:
            log.warning("%s: recovery postponed to the next save: %s", self.root, exc)
            return False
        finally:
            self.lock.thread_lock.release()

    def stale_temps(self) -> list[Path]:
        """Temp files a dead writer left (a live one keeps them for milliseconds), and the
        .keep of a pack it was writing (else git would never repack that pack)."""
        names: list[Path] = []
        with contextlib.suppress(OSError):
            names += self.lock.temps.folder.iterdir()
        with contextlib.suppress(OSError):
            names += (
                p for p in (self.git_dir / "objects" / "pack").iterdir() if p.suffix == ".keep"
            )
        cutoff = time.time() - 60
        stale = []
        for item in names:
            ours = item.name.endswith(".tmp") or item.name.startswith("pack-")
            with contextlib.suppress(OSError):
                if item.suffix == ".keep":
                    ours = item.read_bytes().startswith(KEEP_MARK)
                if ours and item.lstat().st_mtime < cutoff:
                    stale.append(item)
        return stale

    def repair(self) -> None:
        """Finish or undo a save whose writer died after it wrote its journal.

        The files the journal names are brought to HEAD (unless a person edited one
        since), and so are their index entries: the writer may have died between a file
        and its entry. An index it left half-rewritten is rebuilt from HEAD, and git lock
        files it left (``index.lock``, the branch's) are removed, so git works again.
        """
        record = self.lock.read_journal()
        if record is None:
            return
        ref = record.get("ref")
        for target in (self.git_dir / "index", self.git_dir / str(ref or "HEAD")):
            lock = target.with_name(target.name + ".lock")
            if owner_is_dead(lock):
                with contextlib.suppress(FileNotFoundError):
                    lock.unlink()
        finished = self.finish_publish(record)
        undone = False
        head = self.refs.head()
        wanted: dict[str, str | None] = {}
        written: dict[str, tuple[str | None, str | None]] = {}
        for path, (old, new) in record.get("files", {}).items():
            want = self.objects.entry(path, head) if head else None
            want_sha = want[1] if want else None
            wanted[path] = want_sha
            written[path] = (old, new)
            current = self.worktree.working_blob(path)
            current_sha = current[1] if current else None
            if current_sha != want_sha and current_sha in (old, new):
                self.worktree.write(path, None if want_sha is None else self.objects.blob(want_sha))
                undone = True
            # else: right already, or edited by a person since: leave it alone
        if self.index.torn():
            self.rebuild_index(head)
        elif wanted:
            undone = self.restage(wanted, written) or undone
        if finished is not None or undone:  # the pre-commit hook asks what was repaired
            self.recovered = [*self.recovered, (finished, sorted(wanted))]
        self.lock.write_journal(b"")

    def finish_publish(self, record: dict[str, Any]) -> str | None:
        """Move the branch to the dead writer's commit if all that was left of its save was
        that last step (its index entries are written, the branch is still at the old
        commit): the save then keeps its own commit and trailers, where undoing it would
        drop it. Returns the commit, or None when the save is undone instead."""
        ref, old, new = record.get("ref"), record.get("old"), record.get("new")
        files: dict[str, list[str | None]] = record.get("files") or {}
        if not (isinstance(ref, str) and isinstance(new, str) and files):
            return None
        if self.refs.read(ref) != old or not self.objects.has_object(new, "commit"):
            return None
        if self.index.torn():
            return None
        try:
            index = self.index.load()
        except UnsupportedIndex:
            return None
        for path, (_before, after) in files.items():
            if self.index.entry_hex(index, path) != after:
                return None  # it died before its index write: undo it
        message = self.objects.read_object(new, "commit").partition(b"\n\n")[2]
        subject = message.split(b"\n", 1)[0].decode(errors="replace")
        with self.lock.holding_git_lock(self.git_dir / ref):
            if self.refs.read(ref) != old:
                return None
            line = self.refs.reflog_line(old, new, subject, self.authors.current())
            self.refs.append_reflogs(ref, line)
            self.refs.move(ref, new)
        log.warning(
            "%s: finished a save whose writer died before moving %s (commit %s)",
            self.root,
            ref,
            new[:12],
        )
        return new

    def restage(
        self, wanted: dict[str, str | None], written: dict[str, tuple[str | None, str | None]]
    ) -> bool:
        """Point the index entries a dead writer may have left at HEAD's blobs (``wanted``);
        an entry a person staged since (neither the old nor the new blob) stays. Returns
        whether any entry changed."""
        try:
            seen = self.index.load()
        except UnsupportedIndex:
            present = {
                p for p, sha in wanted.items() if sha is None or self.worktree.working_blob(p)
            }
            self.index.update_with_git({p: wanted[p] for p in present})  # git sets them
            return True
        if all(
            self.index.entry_hex(seen, p) == sha or self.index.entry_hex(seen, p) not in written[p]
            for p, sha in wanted.items()
        ):
            return False  # no lock then: a `git commit` whose hook runs this holds it
        with self.lock.holding_git_lock(self.index.path):
            index = self.index.load()
            changed = False
            for path, sha in wanted.items():
                staged = index.entry_sha(path.encode())
                staged_hex = staged.hex() if staged is not None else None
                if staged_hex == sha or staged_hex not in written[path]:
                    continue
                changed = True
                if sha is None:
                    index.remove(path.encode())
                    continue
                current = self.worktree.working_blob(path)
                if current is not None and current[1] == sha:
                    self.index.stage_entries(index, {path: sha})
                else:  # stat data git cannot match: it reads the file before trusting it
                    index.set(
                        path.encode(), (0, 0, 0, 0, 0, 0, 0o100644, 0, 0, 0), bytes.fromhex(sha)
                    )
            if changed:
                self.index.write(index)
        return changed

    def rebuild_index(self, head: str | None) -> None:
        """A fresh index matching HEAD, in place of one a dead writer left half-written
        (what ``git reset`` would do; a person's unstaged edits stay unstaged)."""
        index = GitIndex.empty()
        for path, mode, sha in self.objects.files(self.objects.commit_tree(head)) if head else ():
            fields: tuple[int, ...] = (0, 0, 0, 0, 0, 0, int(mode, 8), 0, 0, 0)
            target = self.root / path
            with contextlib.suppress(OSError):
                st = os.lstat(target)
                if S_ISREG(st.st_mode) and object_id("blob", target.read_bytes()) == sha:
                    fields = stat_fields(
                        st.st_ctime_ns,
                        st.st_mtime_ns,
                        st.st_dev,
                        st.st_ino,
                        st.st_mode,
                        st.st_uid,
                        st.st_gid,
                        st.st_size,
                    )
            index.set(path.encode("utf-8", "surrogateescape"), fields, bytes.fromhex(sha))
        data = index.encode()
        self.lock.locked_write(self.index.path, data, in_place=False)
        self.index.remember(data, index)
        log.warning("%s: rebuilt .git/index left half-written by a writer that died", self.root)
