"""Locking for ``Repository``: the store's write lock and git's own ``<file>.lock`` protocol.

Writers are serialised by ``flock`` on ``.git/gitmem/write.lock`` (the kernel releases it when
a writer dies; the file also holds the owner line and the journal of a save in progress),
plus an in-process lock per store. Files git itself locks (refs, the index) are written while
holding git's ``<file>.lock``, so a person's git command and gitmem never interleave. gitmem
removes only git locks it can prove dead (its own, naming a process that is gone); a person's
lock is waited for, then the save fails naming it.
``Repository`` inherits :class:`LockingLayer`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gitmem.errors import LockTimeout
from gitmem.store.revisions import RevisionsLayer

_HELD = threading.local()


@contextlib.contextmanager
def naming(path: Path) -> Iterator[None]:
    """Name ``path`` in an OSError raised inside the block (a failed write to an open file
    does not say which file)."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)
        raise


def owner_is_dead(lock: Path) -> bool:
    """True if ``lock`` names a gitmem process on this host that no longer runs."""
    try:
        with open(lock, "rb") as handle:
            head = handle.read(200)
    except OSError:
        return False
    if not head.startswith(b"gitmem pid="):
        return False
    fields = dict(item.partition("=")[::2] for item in head.decode(errors="replace").split())
    if fields.get("host") != socket.gethostname():
        return False
    try:
        os.kill(int(fields["pid"]), 0)
    except ProcessLookupError:
        return True
    except (KeyError, ValueError, OSError):
        return False
    return False


def owner_text(raw: bytes) -> str:
    """``pid=1 host=h since=T`` from a lock file, with the lock's age spelled out."""
    owner = raw.partition(b"\n")[0].decode(errors="replace").strip()
    fields = dict(item.partition("=")[::2] for item in owner.split())
    try:
        age = time.time() - float(fields["since"])
    except (KeyError, ValueError):
        return owner or "unknown"
    return f"pid {fields.get('pid', '?')} on {fields.get('host', '?')}, for {age:.0f}s"


def _git_gc_running(pidfile: Path, host: str) -> bool:
    """True if ``gc.pid`` names a gc that runs, as git judges it: written in the last 12
    hours by a process on another host, or by one alive on this host."""
    try:
        stat = pidfile.stat()
        pid_text, _, locking_host = pidfile.read_text(errors="replace").partition(" ")
        pid = int(pid_text)
    except (OSError, ValueError):
        return False
    if time.time() - stat.st_mtime > 12 * 3600:
        return False
    if locking_host.strip() != host:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def git_gc_lock(git_dir: Path) -> Iterator[bool]:
    """Hold git's own gc lock (``gc.pid``, taken the way ``git gc`` takes it); yields False
    when a ``git gc`` runs (or its lock file is being written).

    Two repacks at once lose objects: one deletes a pack the other has listed and is
    reading from. While it is held, a person's ``git gc`` says "gc is already running"
    and the auto gc of their ``git commit`` skips; and gitmem does not repack beside theirs.
    """
    pidfile = git_dir / "gc.pid"
    lock = git_dir / "gc.pid.lock"
    host = socket.gethostname()
    mine = f"{os.getpid()} {host}"
    try:
        handle = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError:
        yield False
        return
    taken = False
    try:
        with os.fdopen(handle, "w") as out:
            if not _git_gc_running(pidfile, host):
                out.write(mine)
                taken = True
        if taken:
            os.replace(lock, pidfile)
    except OSError:
        taken = False
    if not taken:
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()  # ours: the pid never reached gc.pid
        yield False
        return
    try:
        yield True
    finally:
        with contextlib.suppress(OSError):
            if pidfile.read_text() == mine:
                pidfile.unlink()


class LockingLayer(RevisionsLayer):
    """The write lock, the journal slot in the lock file, and git lock files."""

    def _recover(self) -> None:
        """Repair what a dead writer left, on taking the write lock: nothing at this layer.

        :class:`~gitmem.store.recovery.RecoveryLayer` overrides it: the repair needs the
        working tree and the index, which sit above the locks.
        """

    def _held(self) -> bool:
        """True if this thread holds the store's write lock already."""
        return bool(_HELD.__dict__.get("depth", {}).get(str(self.git_dir)))

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        # flock conflicts between two open files even in one process: a thread that holds
        # the lock already (through another Repository object) must not take it again
        held: dict[str, int] = _HELD.__dict__.setdefault("depth", {})
        key = str(self.git_dir)
        if held.get(key):
            held[key] += 1
            try:
                yield
            finally:
                held[key] -= 1
            return
        with self._flock():
            held[key] = 1
            try:
                yield
            finally:
                held[key] = 0

    def _lock_fd(self) -> int:
        if self._lock_handle is None:
            path = self.state_dir / "write.lock"
            with self._os_errors("open the write lock", path):
                self._lock_handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._lock_handle

    @contextlib.contextmanager
    def _flock(self, wait: bool = True) -> Iterator[bool]:
        path = self.state_dir / "write.lock"
        fd = self._lock_fd()
        try:
            deadline = time.monotonic() + self.lock_timeout
            delay = 0.001
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    if not wait:
                        yield False
                        return
                    if time.monotonic() > deadline:
                        owner = owner_text(os.pread(fd, 200, 0))
                        raise LockTimeout(
                            f"{self.root}: another writer has held {path} for over "
                            f"{self.lock_timeout:.0f}s (held by {owner}); it is released "
                            "when that process ends"
                        ) from None
                    time.sleep(delay)
                    delay = min(delay * 2, 0.05)
            self._owner = (
                f"pid={os.getpid()} host={socket.gethostname()} since={time.time():.0f}\n"
            ).encode()
            with self._os_errors("recover the last save", path):
                self._recover()
                self._write_lock_file(b"")
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)  # also released by the kernel if we die

    def _write_lock_file(self, journal: bytes) -> None:
        # the lock file holds the owner line, then the journal of a save in progress:
        # keeping the journal here saves creating a file per save
        fd = self._lock_fd()
        payload = self._owner + journal
        os.pwrite(fd, payload, 0)
        os.ftruncate(fd, len(payload))

    def _read_journal(self) -> dict[str, Any] | None:
        data = os.pread(self._lock_fd(), 1 << 20, 0)
        _owner, _sep, journal = data.partition(b"\n")
        if not journal.strip():
            return None
        try:
            record: dict[str, Any] = json.loads(journal)
        except ValueError:
            return {"files": {}}
        return record

    def _git_lock(self, target: Path) -> int:
        """Take git's ``<file>.lock`` for ``target``, clearing one left by a dead gitmem writer.

        Only a lock that gitmem can prove dead is removed: one that names its gitmem owner
        (``gitmem pid=... host=...``, there from the moment the lock exists: it is written
        aside and hard-linked into place) whose process is gone. Any other lock may be a
        person's live ``git commit`` waiting in their editor, however old it is: removing it
        would break their commit, so it is waited for up to ``lock_timeout`` and then the
        save fails (nothing written) with a message naming the lock file.
        """
        lock = target.with_name(target.name + ".lock")
        owner = f"gitmem pid={os.getpid()} host={socket.gethostname()}\n".encode()
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.001
        while True:
            try:
                return self._create_lock(lock, owner)
            except FileExistsError:
                if owner_is_dead(lock):
                    with contextlib.suppress(FileNotFoundError):
                        lock.unlink()
                    continue
                if time.monotonic() > deadline:
                    raise LockTimeout(self._held_by_git(lock)) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)

    def _held_by_git(self, lock: Path) -> str:
        """Why a save gave up waiting for ``lock``, and what to do about it."""
        try:
            head = lock.read_bytes()[:200]
            age = f" for {time.time() - lock.stat().st_mtime:.0f}s"
        except OSError:
            head, age = b"", ""
        holder = "another git command (perhaps a `git commit` waiting in an editor)"
        if head.startswith(b"gitmem pid="):
            text = head.decode(errors="replace")
            fields = dict(item.partition("=")[::2] for item in text.split())
            holder = f"another gitmem process (pid {fields.get('pid')} on {fields.get('host')})"
        return (
            f"{lock} exists{age}: {holder} holds it; gitmem waited {self.lock_timeout:g}s "
            f"for it. Nothing was saved. Let that command finish and save again; if no git "
            f"command is running, remove {lock}"
        )

    def _create_lock(self, lock: Path, owner: bytes) -> int:
        """Create ``lock`` holding ``owner`` in one step; FileExistsError if it exists."""
        aside = self.state_dir / "tmp" / f"{os.getpid()}-{threading.get_ident()}-lock.tmp"
        with naming(aside), open(aside, "wb") as handle:
            handle.write(owner)
        try:
            os.link(aside, lock)
        except FileExistsError:
            raise
        except OSError:  # no hard links here: create it, then name the owner
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, owner)
            return fd
        finally:
            with contextlib.suppress(OSError):
                os.unlink(aside)
        return os.open(lock, os.O_WRONLY)

    @contextlib.contextmanager
    def _holding_git_lock(self, target: Path) -> Iterator[None]:
        """Hold git's ``<target>.lock`` for the block: a git command that would write
        ``target`` meanwhile (``git add``, ``git commit``) fails instead of interleaving."""
        held = self._git_locks_held
        if target in held:  # taken already by an enclosing block of this writer
            yield
            return
        fd = self._git_lock(target)
        held.add(target)
        try:
            yield
        finally:
            held.discard(target)
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                target.with_name(target.name + ".lock").unlink()

    def _overwrite(self, target: Path, data: bytes, *, in_place: bool = True) -> None:
        """Replace ``target``'s content while holding its git lock: in place if it exists
        (see :meth:`_locked_write` for why), else (or with ``in_place=False``) by renaming a
        new file into place; never the lock itself, so the lock names its owner to the end
        and a writer killed here leaves a lock provably dead."""
        try:
            if not in_place:
                raise FileNotFoundError
            handle = os.open(target, os.O_WRONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            tmp = self.state_dir / "tmp" / f"{os.getpid()}-{threading.get_ident()}-new.tmp"
            with naming(tmp), open(tmp, "wb") as out:
                out.write(data)
            os.replace(tmp, target)
            return
        try:
            os.pwrite(handle, data, 0)
            os.ftruncate(handle, len(data))
        finally:
            os.close(handle)

    def _locked_write(
        self,
        target: Path,
        data: bytes,
        check: Callable[[], bool] | None = None,
        *,
        in_place: bool = True,
    ) -> bool:
        """Replace ``target``'s content while holding git's ``<target>.lock``.

        git renames the lock file over the target; on ext4 a rename over an existing file
        forces the new data to disk first (auto_da_alloc) and costs ~1 ms per file, so an
        existing target is overwritten in place instead (one ``pwrite`` while every other
        writer is locked out) and the lock is removed. Returns False if ``check`` fails.
        ``in_place=False`` always renames a new file into place (a reader never sees a
        partly written file).
        """
        fd = self._git_lock(target)
        lock = target.with_name(target.name + ".lock")
        try:
            if check is not None and not check():
                return False
            self._overwrite(target, data, in_place=in_place)
            return True
        finally:
            if fd >= 0:
                os.close(fd)
                with contextlib.suppress(FileNotFoundError):
                    lock.unlink()
