"""The working tree and ``.git/index`` side of ``Repository``.

A save's files are written atomically (temp file, fsync, rename; the replaced file kept as a
backup until the branch has moved) and their index entries patched, so ``git status
--porcelain`` stays empty and a person's own ``git commit`` can never undo a save.
``Repository`` inherits :class:`WorktreeLayer`.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import stat
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from gitmem.errors import Diagnostic, NotRegularFile, ParseError, RepositoryError
from gitmem.store import splitindex
from gitmem.store.config import parse_bool, parse_int
from gitmem.store.git import run_git
from gitmem.store.gitindex import Index, stat_fields
from gitmem.store.locks import LockingLayer, naming
from gitmem.store.objects import object_id
from gitmem.store.splitindex import SplitSettings

# an existing store whose index passes this many entries (~180 KB rewritten per save) is
# switched to a split index (core.splitIndex=true); new stores start split
SPLIT_FROM_ENTRIES = 2000

_SEQ = itertools.count()


def read_regular(target: Path) -> bytes | None:
    """The bytes of a regular file, or None when it is absent.

    Checked with lstat before opening and with fstat after, and opened non-blocking, so a
    FIFO planted under a session's name can never hang a reader.
    """
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise NotRegularFile(f"{target} is not a regular file")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(target, flags)
    except FileNotFoundError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped between lstat and open
            raise NotRegularFile(f"{target} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)


def _load_renameat2() -> Callable[..., int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    found: Callable[..., int] | None = getattr(libc, "renameat2", None)
    return found


_RENAMEAT2 = _load_renameat2() if sys.platform.startswith("linux") else None


def swap_into_place(tmp: Path, target: Path) -> None:
    """Put the file ``tmp`` in place of ``target`` atomically (``tmp`` then holds the old
    file, or nothing).

    On Linux the two names are exchanged (``renameat2(RENAME_EXCHANGE)``): a rename over an
    existing file makes ext4 start writing the new data out first (auto_da_alloc), which
    cost ~1 ms per save (4 ms at p95 on a busy disk); an exchange costs ~20 us. Elsewhere,
    or when the exchange is refused (no ``target`` yet, a file system without it), a plain
    rename.
    """
    if _RENAMEAT2 is not None:
        done = _RENAMEAT2(-100, os.fsencode(tmp), -100, os.fsencode(target), 2)  # AT_FDCWD
        if done == 0:
            return
    os.replace(tmp, target)


def split_config(settings: SplitSettings | None = None) -> dict[str, str]:
    """The git config that turns the split index on (see ``splitindex``), leaving a shared
    index expiry the person set alone."""
    values = {"core.splitIndex": "true"}
    if settings is None or not settings.expire_set:
        values["splitIndex.sharedIndexExpire"] = splitindex.STORE_EXPIRE
    return values


class WorktreeLayer(LockingLayer):
    """Working files and their index entries."""

    # (config file identity, settings): re-read only when .git/config changes
    _split_config: tuple[tuple[int, int, int], SplitSettings] | None = None

    def _safe_target(self, path: str) -> Path:
        """The absolute working-tree path for ``path``, refusing symlinks on the way."""
        target = self.root
        parts = path.split("/")
        for at, part in enumerate(parts):
            if part in ("", ".", "..") or part == ".git":
                raise RepositoryError(f"refusing unsafe store path {path!r}")
            target = target / part
            try:
                info = target.lstat()
            except FileNotFoundError:
                continue
            if os.path.islink(target):
                raise RepositoryError(
                    f"{target} is a symlink; gitmem never writes through symlinks"
                )
            if at < len(parts) - 1 and not target.is_dir():
                raise RepositoryError(f"{target} is not a folder")
            del info
        return target

    def _write_working(self, path: str, data: bytes | None) -> None:
        self._write_working_files({path: data})

    def _write_working_files(self, changes: dict[str, bytes | None]) -> None:
        """Write working files atomically: temp file, fsync, rename (or unlink for None)."""
        self._place_working_files(self._prepare_working_files(changes))

    def _prepare_working_files(self, changes: dict[str, bytes | None]) -> dict[str, Path | None]:
        """Write each file's new content to a durable temp file (None: to be deleted).

        Done before the branch moves, so that a full disk fails the save, not the files
        after it. Many files (a batch) are made durable by one ``sync`` instead of one
        fsync each.
        """
        many = len(changes) > 8
        prepared: dict[str, Path | None] = {}
        for path, data in changes.items():
            target = self._safe_target(path)
            if data is None:
                prepared[path] = None
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._temp_name()
            self._prepared.append(tmp)
            with naming(tmp), open(tmp, "wb") as handle:
                handle.write(data)
                if not many:
                    handle.flush()
                    os.fsync(handle.fileno())
            prepared[path] = tmp
        if many:
            os.sync()
        return prepared

    def _place_working_files(self, prepared: dict[str, Path | None]) -> None:
        for path, tmp in prepared.items():
            self._place_working(path, tmp)

    def _place_working(self, path: str, tmp: Path | None) -> None:
        target = self._safe_target(path)
        if tmp is None:
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, target)
        self._prepared.remove(tmp)

    def _swap_in(self, prepared: dict[str, Path | None]) -> list[tuple[Path, Path | None]]:
        """Put prepared files in place, keeping each replaced file as a backup (a hard
        link) so that :meth:`_swap_back` can undo it until the branch has moved."""
        undo: list[tuple[Path, Path | None]] = []
        try:
            for path, tmp in prepared.items():
                target = self._safe_target(path)
                backup: Path | None = self._temp_name()
                assert backup is not None
                try:
                    os.link(target, backup)
                except FileNotFoundError:
                    backup = None  # a new file: undone by removing it
                except OSError:  # no hard links here: a copy does as well
                    with naming(backup), open(backup, "wb") as handle:
                        handle.write(target.read_bytes())
                if backup is not None:
                    self._prepared.append(backup)
                undo.append((target, backup))
                self._place_working(path, tmp)
        except BaseException:
            self._swap_back(undo)
            raise
        return undo

    def _swap_back(self, undo: list[tuple[Path, Path | None]]) -> None:
        """Put back what :meth:`_swap_in` replaced (the branch did not move)."""
        for target, backup in reversed(undo):
            if backup is None:
                with contextlib.suppress(FileNotFoundError):
                    target.unlink()
            else:
                os.replace(backup, target)
                self._prepared.remove(backup)

    def _temp_name(self) -> Path:
        return self.state_dir / "tmp" / f"{os.getpid()}-{threading.get_ident()}-{next(_SEQ)}.tmp"

    def _staged_entries(self, index: Index, changes: dict[str, str | None]) -> None:
        """Point ``index``'s entries of ``changes`` at their new blobs, with the stat data
        of the working files already in place (so ``git status`` need not re-read them)."""
        for path, sha in changes.items():
            if sha is None:
                index.remove(path.encode())
                continue
            st = os.stat(self.root / path)
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
            index.set(path.encode(), fields, bytes.fromhex(sha))

    def _write_index(self, index: Index) -> None:
        """Write ``index`` over ``.git/index``; the caller holds git's ``index.lock``.

        Split (see ``splitindex``) when ``core.splitIndex`` says so, or when it is unset and
        the index is already split or has grown past :data:`SPLIT_FROM_ENTRIES` entries
        (then ``core.splitIndex=true`` is set, so that git keeps it split too).
        """
        tmp = self._temp_name()
        self._prepared.append(tmp)
        try:
            data = self._encode_index(index)
            with naming(tmp), open(tmp, "wb") as out:
                out.write(data)
            # whole or not at all: git reads an index without checking its checksum, so a
            # write cut short in place would be taken at its word by a person's git
            swap_into_place(tmp, self.git_dir / "index")
        except BaseException:
            self._index = None
            raise
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
            self._prepared.remove(tmp)
        self._index = (data[-20:], index)

    def _encode_index(self, index: Index) -> bytes:
        settings = self._split_settings()
        split = settings.enabled
        if split is None:
            split = index.base is not None or len(index.keys) >= SPLIT_FROM_ENTRIES
            if split:
                self.ensure_config(split_config(settings))
        if not split:
            return splitindex.encode_unsplit(index)
        if index.base is None or not splitindex.freshen(self.git_dir, index):
            return self._rotate_index(index)
        data, entries = splitindex.encode_delta(index)
        if splitindex.needs_rotation(index, entries, len(data), settings):
            return self._rotate_index(index)
        return data

    def _rotate_index(self, index: Index) -> bytes:
        tmp = self._temp_name()
        self._prepared.append(tmp)
        try:
            with naming(tmp):
                return splitindex.rotate(index, self.git_dir, tmp, self._shared_index_expiry)
        finally:
            self._prepared.remove(tmp)

    def _shared_index_expiry(self) -> float:
        """The time before which an unused shared index may go (``splitIndex.sharedIndexExpire``,
        as git reads it; 0: never)."""
        done = run_git(
            self.root, "config", "--type=expiry-date", "splitIndex.sharedIndexExpire", ok=None
        )
        if done.returncode == 0 and done.stdout.strip().isdigit():
            return float(done.stdout.strip())
        return time.time() - splitindex.DEFAULT_EXPIRE_SECONDS

    def _split_settings(self) -> SplitSettings:
        try:
            st = os.stat(self.git_dir / "config")
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = (0, 0, 0)
        if self._split_config is not None and self._split_config[0] == stamp:
            return self._split_config[1]
        done = run_git(
            self.root, "config", "--get-regexp", r"^(core\.splitindex|splitindex\.)", ok=None
        )
        values = dict(line.partition(" ")[::2] for line in done.stdout.splitlines())
        enabled = values.get("core.splitindex")
        percent = values.get("splitindex.maxpercentchange")
        settings = SplitSettings(
            None if enabled is None else parse_bool("core.splitIndex", enabled),
            splitindex.DEFAULT_MAX_PERCENT
            if percent is None
            else parse_int("splitIndex.maxPercentChange", percent, 0, 100),
            "splitindex.sharedindexexpire" in values,
        )
        self._split_config = (stamp, settings)
        return settings

    def _discard_prepared(self) -> None:
        while self._prepared:
            with contextlib.suppress(OSError):
                self._prepared.pop().unlink()

    def _load_index(self) -> Index:
        # the trailing checksum identifies the content: mtime is too coarse to tell two
        # writes by different processes apart
        try:
            fd = os.open(self.git_dir / "index", os.O_RDONLY)
        except FileNotFoundError:
            return Index.empty()
        try:
            size = os.fstat(fd).st_size
            checksum = os.pread(fd, 20, max(0, size - 20))
            if self._index is not None and self._index[0] == checksum:
                return self._index[1]
            data = os.pread(fd, size, 0)
        finally:
            os.close(fd)
        index = splitindex.read_index(data, self.git_dir)
        self._index = (data[-20:], index)
        return index

    def _update_index_with_git(self, changes: dict[str, str | None]) -> None:
        # index v4 / sparse: let git itself edit it (rare, slower)
        for path, sha in changes.items():
            if sha is None:
                run_git(self.root, "update-index", "--force-remove", "--", path)
            else:
                run_git(self.root, "update-index", "--add", "--cacheinfo", f"100644,{sha},{path}")
        run_git(self.root, "update-index", "-q", "--refresh")
        self._index = None

    def working_blob(self, path: str) -> tuple[bytes, str] | None:
        """The working-tree content of ``path`` and its blob id, or None if absent."""
        target = self._safe_target(path)
        try:
            data = read_regular(target)
        except NotRegularFile:
            raise ParseError([Diagnostic(path, 1, "not a regular file")]) from None
        if data is None:
            return None
        return data, object_id("blob", data)
