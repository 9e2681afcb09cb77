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
  ``Repository._git_lock``); any other lock may be a person's live git command and is
  never removed, only waited for; temp files older than a minute: swept.

``Repository`` inherits :class:`RecoveryLayer`.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from stat import S_ISREG
from typing import Any

from gitmem.errors import RepositoryError, UnsupportedIndex
from gitmem.store import splitindex
from gitmem.store.gitindex import Index, stat_fields
from gitmem.store.locks import owner_is_dead
from gitmem.store.objects import MODE_TREE, object_id
from gitmem.store.worktree import WorktreeLayer

log = logging.getLogger("gitmem")


# the first line of the .keep a save holds while it writes its pack (see flush_objects)
KEEP_MARK = b"gitmem: a save is writing this pack"


class RecoveryLayer(WorktreeLayer):
    """Crash recovery for ``Repository`` (see the module docs)."""

    # saves of dead writers this object repaired: (commit it finished, or None when it
    # undid the save; the files); replaced, never appended to in place
    recovered: list[tuple[str | None, list[str]]] = []  # noqa: RUF012

    def recover(self) -> bool:
        """Finish or undo a save whose writer died half-way, if no writer holds the lock.

        Runs when a store is opened (and at every lock), so the working tree and index
        match HEAD again after any gitmem call. Returns True if it had the lock to check.
        """
        try:
            raw = (self.state_dir / "write.lock").read_bytes()
        except OSError:
            return False
        stale = self._stale_temps()
        if not raw.partition(b"\n")[2].strip() and not stale:
            return False  # nothing was left half-done
        self._check_fork()
        if not self._thread_lock.acquire(blocking=False):
            return False
        try:
            if self._held():
                return False
            with self._flock(wait=False) as got:
                for item in self._stale_temps() if got else ():
                    with contextlib.suppress(OSError):
                        item.unlink()
                return got
        except (OSError, RepositoryError) as exc:
            log.warning("%s: recovery postponed to the next save: %s", self.root, exc)
            return False
        finally:
            self._thread_lock.release()

    def _stale_temps(self) -> list[Path]:
        """Temp files a dead writer left (a live one keeps them for milliseconds), and the
        .keep of a pack it was writing (else git would never repack that pack)."""
        names: list[Path] = []
        with contextlib.suppress(OSError):
            names += (self.state_dir / "tmp").iterdir()
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

    def _recover(self) -> None:  # overrides LockingLayer's no-op: the lock calls it
        """Finish or undo a save whose writer died after it wrote its journal.

        The files the journal names are brought to HEAD (unless a person edited one
        since), and so are their index entries: the writer may have died between a file
        and its entry. An index it left half-rewritten is rebuilt from HEAD, and git lock
        files it left (``index.lock``, the branch's) are removed, so git works again.
        """
        record = self._read_journal()
        if record is None:
            return
        ref = record.get("ref")
        for target in (self.git_dir / "index", self.git_dir / str(ref or "HEAD")):
            lock = target.with_name(target.name + ".lock")
            if owner_is_dead(lock):
                with contextlib.suppress(FileNotFoundError):
                    lock.unlink()
        finished = self._finish_publish(record)
        undone = False
        head = self.head()
        wanted: dict[str, str | None] = {}
        written: dict[str, tuple[str | None, str | None]] = {}
        for path, (old, new) in record.get("files", {}).items():
            want = self.entry(path, head) if head else None
            want_sha = want[1] if want else None
            wanted[path] = want_sha
            written[path] = (old, new)
            current = self.working_blob(path)
            current_sha = current[1] if current else None
            if current_sha != want_sha and current_sha in (old, new):
                self._write_working(path, None if want_sha is None else self.blob(want_sha))
                undone = True
            # else: right already, or edited by a person since: leave it alone
        if self._index_torn():
            self._rebuild_index(head)
        elif wanted:
            undone = self._restage(wanted, written) or undone
        if finished is not None or undone:  # the pre-commit hook asks what was repaired
            self.recovered = [*self.recovered, (finished, sorted(wanted))]
        self._write_lock_file(b"")

    def _finish_publish(self, record: dict[str, Any]) -> str | None:
        """Finish the dead writer's save whose only step left was moving the branch;
        returns the commit, or None to undo the save. ``TransactionLayer`` overrides it:
        moving the branch is its job."""
        return None

    def _restage(
        self, wanted: dict[str, str | None], written: dict[str, tuple[str | None, str | None]]
    ) -> bool:
        """Point the index entries a dead writer may have left at HEAD's blobs (``wanted``);
        an entry a person staged since (neither the old nor the new blob) stays. Returns
        whether any entry changed."""
        try:
            seen = self._load_index()
        except UnsupportedIndex:
            present = {p for p, sha in wanted.items() if sha is None or self.working_blob(p)}
            self._update_index_with_git({p: wanted[p] for p in present})  # git sets them
            return True
        if all(
            self._entry_hex(seen, p) == sha or self._entry_hex(seen, p) not in written[p]
            for p, sha in wanted.items()
        ):
            return False  # no lock then: a `git commit` whose hook runs this holds it
        with self._holding_git_lock(self.git_dir / "index"):
            index = self._load_index()
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
                current = self.working_blob(path)
                if current is not None and current[1] == sha:
                    self._staged_entries(index, {path: sha})
                else:  # stat data git cannot match: it reads the file before trusting it
                    index.set(
                        path.encode(), (0, 0, 0, 0, 0, 0, 0o100644, 0, 0, 0), bytes.fromhex(sha)
                    )
            if changed:
                self._write_index(index)
        return changed

    @staticmethod
    def _entry_hex(index: Index, path: str) -> str | None:
        staged = index.entry_sha(path.encode())
        return staged.hex() if staged is not None else None

    def _index_torn(self) -> bool:
        """True if the index is missing, fails its checksum (a write cut short) or names a
        shared index that is missing."""
        try:
            data = (self.git_dir / "index").read_bytes()
        except FileNotFoundError:
            return True
        if len(data) < 32 or data[:4] != b"DIRC":
            return True
        trailer = data[-20:]
        # index.skipHash writes zeros instead of the checksum
        if trailer != bytes(20) and hashlib.sha1(data[:-20]).digest() != trailer:
            return True
        try:  # a split index whose shared index is gone cannot be read by git either
            splitindex.read_index(data, self.git_dir)
        except RepositoryError:
            return True
        except UnsupportedIndex:
            pass
        return False

    def _files(self, tree: str, prefix: str = "") -> Iterator[tuple[str, bytes, str]]:
        """(path, mode, blob id) of every file under ``tree``."""
        for name, (mode, sha) in sorted(self.tree(tree).entries.items()):
            path = prefix + name.decode("utf-8", "surrogateescape")
            if mode == MODE_TREE:
                yield from self._files(sha.hex(), path + "/")
            else:
                yield path, mode, sha.hex()

    def _rebuild_index(self, head: str | None) -> None:
        """A fresh index matching HEAD, in place of one a dead writer left half-written
        (what ``git reset`` would do; a person's unstaged edits stay unstaged)."""
        index = Index.empty()
        for path, mode, sha in self._files(self.commit_tree(head)) if head else ():
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
        self._locked_write(self.git_dir / "index", data, in_place=False)
        self._index = (data[-20:], index)
        log.warning("%s: rebuilt .git/index left half-written by a writer that died", self.root)
