"""Locking for ``Repository``: the store's write lock and git's own ``<file>.lock`` protocol.

Writers are serialised by ``flock`` on ``.git/gitmem/write.lock`` (the kernel releases it when
a writer dies; the file also holds the owner line and the journal of a save in progress),
plus an in-process lock per store. Files git itself locks (refs, the index) are written while
holding git's ``<file>.lock``, so a person's git command and gitmem never interleave. gitmem
removes only git locks it can prove dead (its own, naming a process that is gone); a person's
lock is waited for, then the save fails naming it. :class:`WriteLock` holds all of it.
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

from gitmem.errors import LockTimeout, RepositoryError
from gitmem.store.scratch import TempFiles, naming

_HELD = threading.local()

# what to do about an OSError while writing, by errno
_OS_ADVICE = {
    errno.ENOSPC: "the disk is full: free some space, then save again",
    errno.EDQUOT: "the disk quota is used up: free some space, then save again",
    errno.EROFS: "the file system is read-only: open the store from a writable place",
    errno.EACCES: "permission denied: check the owner and mode of the store's files",
    errno.EPERM: "operation not permitted: check the owner and mode of the store's files",
    errno.EFBIG: "the file is larger than the file-size limit (see `ulimit -f`)",
    errno.EIO: "an I/O error: check the disk",
}

# who holds each store's in-process lock, for the error of a thread that waits too long
_HOLDERS: dict[tuple[int, str], str] = {}

_locks: dict[tuple[int, str], threading.RLock] = {}


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


def _process_lock(
    key: str,
    _locks: dict[tuple[int, str], threading.RLock] = {},  # noqa: B006
) -> threading.RLock:
    # one in-process lock per store, shared by every Repository object opened on it; a
    # forked child gets its own (the parent's may have been held by another thread)
    return _locks.setdefault((os.getpid(), key), threading.RLock())


def overwrite(target: Path, data: bytes, temps: TempFiles, *, in_place: bool = True) -> None:
    """Replace ``target``'s content while holding its git lock: in place if it exists
    (see :meth:`WriteLock.locked_write` for why), else (or with ``in_place=False``) by
    renaming a new file into place; never the lock itself, so the lock names its owner to
    the end and a writer killed here leaves a lock provably dead."""
    try:
        if not in_place:
            raise FileNotFoundError
        handle = os.open(target, os.O_WRONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        tmp = temps.folder / f"{os.getpid()}-{threading.get_ident()}-new.tmp"
        with naming(tmp), open(tmp, "wb") as out:
            out.write(data)
        os.replace(tmp, target)
        return
    try:
        os.pwrite(handle, data, 0)
        os.ftruncate(handle, len(data))
    finally:
        os.close(handle)


class WriteLock:
    """The store's write lock (in-process and ``flock``), the journal slot in the lock file,
    and git's lock files."""

    def __init__(
        self,
        root: Path,
        git_dir: Path,
        temps: TempFiles,
        *,
        head: Callable[[], str | None],
        timeout: float,
    ) -> None:
        self.root = root
        self.git_dir = git_dir
        self.path = git_dir / "gitmem" / "write.lock"
        self.temps = temps
        self.head = head  # named in the error of a failed write
        self.timeout = timeout
        # run on taking the lock, before the holder writes: repairs what a dead writer left
        self.on_acquire: Callable[[], None] = lambda: None
        self.thread_lock = _process_lock(str(git_dir))
        self._handle: int | None = None
        self._owner = b""
        self._git_locks_held: set[Path] = set()  # git lock files this writer holds now
        self._pid = os.getpid()

    def check_fork(self) -> bool:
        """True (once) in a forked child, which then takes its own lock file and in-process
        lock: it shares its parent's open lock file, so flock would not keep the two apart."""
        if self._pid == os.getpid():
            return False
        self._pid = os.getpid()
        if self._handle is not None:
            os.close(self._handle)  # closing (not unlocking) leaves the parent's lock
            self._handle = None
        self.thread_lock = _process_lock(str(self.git_dir))
        return True

    def close(self) -> None:
        if self._handle is not None:
            os.close(self._handle)
            self._handle = None

    @contextlib.contextmanager
    def holding_thread_lock(self, what: str) -> Iterator[None]:
        """The in-process write lock, waited for at most ``timeout`` seconds: a thread
        that holds it may be waiting for this one (e.g. an async batch whose worker needs
        the event loop that a synchronous write blocks)."""
        key = (os.getpid(), str(self.git_dir))
        if not self.thread_lock.acquire(timeout=self.timeout):
            holder = _HOLDERS.get(key, "another thread")
            raise LockTimeout(
                f"{self.root}: {holder} has held the write lock for over "
                f"{self.timeout:.0f}s in this process; inside `async with amm.batch()`, "
                "write through the AsyncMemoryManager, not the synchronous manager"
            )
        mine = key not in _HOLDERS
        if mine:
            _HOLDERS[key] = f"{what} (thread {threading.current_thread().name})"
        try:
            yield
        finally:
            if mine:
                del _HOLDERS[key]
            self.thread_lock.release()

    @contextlib.contextmanager
    def os_errors(self, doing: str, where: Path | None = None) -> Iterator[None]:
        """Turn an OSError into a RepositoryError that says where, and what to do."""
        try:
            yield
        except OSError as exc:
            place = f"{exc.filename or where or self.root}"
            if exc.filename2:
                place += f" -> {exc.filename2}"
            advice = _OS_ADVICE.get(exc.errno or 0, "check the disk and the store's permissions")
            try:
                head = str(self.head())[:12]
            except OSError:
                head = "its last commit"
            raise RepositoryError(
                f"{self.root}: could not {doing}: {exc.strerror or exc} ({place}); {advice}. "
                f"Nothing was saved: the branch is still at {head}"
            ) from exc

    def held(self) -> bool:
        """True if this thread holds the store's write lock already."""
        return bool(_HELD.__dict__.get("depth", {}).get(str(self.git_dir)))

    @contextlib.contextmanager
    def file_lock(self) -> Iterator[None]:
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
        with self.flock():
            held[key] = 1
            try:
                yield
            finally:
                held[key] = 0

    def _fd(self) -> int:
        if self._handle is None:
            path = self.path
            with self.os_errors("open the write lock", path):
                self._handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._handle

    @contextlib.contextmanager
    def flock(self, wait: bool = True) -> Iterator[bool]:
        path = self.path
        fd = self._fd()
        try:
            deadline = time.monotonic() + self.timeout
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
                            f"{self.timeout:.0f}s (held by {owner}); it is released "
                            "when that process ends"
                        ) from None
                    time.sleep(delay)
                    delay = min(delay * 2, 0.05)
            self._owner = (
                f"pid={os.getpid()} host={socket.gethostname()} since={time.time():.0f}\n"
            ).encode()
            with self.os_errors("recover the last save", path):
                self.on_acquire()
                self.write_journal(b"")
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)  # also released by the kernel if we die

    def write_journal(self, journal: bytes) -> None:
        # the lock file holds the owner line, then the journal of a save in progress:
        # keeping the journal here saves creating a file per save
        fd = self._fd()
        payload = self._owner + journal
        os.pwrite(fd, payload, 0)
        os.ftruncate(fd, len(payload))

    def read_journal(self) -> dict[str, Any] | None:
        data = os.pread(self._fd(), 1 << 20, 0)
        _owner, _sep, journal = data.partition(b"\n")
        if not journal.strip():
            return None
        try:
            record: dict[str, Any] = json.loads(journal)
        except ValueError:
            return {"files": {}}
        return record

    def _take_git_lock(self, target: Path) -> int:
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
        deadline = time.monotonic() + self.timeout
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
            f"{lock} exists{age}: {holder} holds it; gitmem waited {self.timeout:g}s "
            f"for it. Nothing was saved. Let that command finish and save again; if no git "
            f"command is running, remove {lock}"
        )

    def _create_lock(self, lock: Path, owner: bytes) -> int:
        """Create ``lock`` holding ``owner`` in one step; FileExistsError if it exists."""
        aside = self.temps.folder / f"{os.getpid()}-{threading.get_ident()}-lock.tmp"
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
    def holding_git_lock(self, target: Path) -> Iterator[None]:
        """Hold git's ``<target>.lock`` for the block: a git command that would write
        ``target`` meanwhile (``git add``, ``git commit``) fails instead of interleaving."""
        held = self._git_locks_held
        if target in held:  # taken already by an enclosing block of this writer
            yield
            return
        fd = self._take_git_lock(target)
        held.add(target)
        try:
            yield
        finally:
            held.discard(target)
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                target.with_name(target.name + ".lock").unlink()

    def locked_write(
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
        fd = self._take_git_lock(target)
        lock = target.with_name(target.name + ".lock")
        try:
            if check is not None and not check():
                return False
            overwrite(target, data, self.temps, in_place=in_place)
            return True
        finally:
            if fd >= 0:
                os.close(fd)
                with contextlib.suppress(FileNotFoundError):
                    lock.unlink()
