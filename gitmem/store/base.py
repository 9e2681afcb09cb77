"""The bottom of ``Repository``: its state, and reading objects and refs.

:class:`StoreBase` opens the store and owns every attribute the layers above share (caches,
locks, the pending objects and temp files of a save, housekeeping counters), and holds the
reads every layer needs: refs and HEAD, objects through GitPython's ``cat-file`` pipes (with
small caches of trees and blobs), tree diffs, and the translation of an ``OSError`` into a
message that says what to do. The layers stack on it in one chain, each inheriting the one
below: ``StoreBase`` -> ``RevisionsLayer`` (revisions.py) -> ``LockingLayer`` (locks.py) ->
``WorktreeLayer`` (worktree.py) -> ``RecoveryLayer`` (recovery.py) -> ``TransactionLayer``
(transaction.py) -> ``Repository`` (repository.py); the git-running methods sit below it in
``GitCommands`` (git.py, kept free of GitPython for the merge driver).
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import git
from git.exc import BadName, BadObject

from gitmem.errors import LockTimeout, RepositoryError
from gitmem.store.git import SAFE_GIT_CONFIG, GitCommands
from gitmem.store.gitindex import Index
from gitmem.store.objects import MODE_TREE, Tree, find_tree_entry


@dataclass(frozen=True)
class Identity:
    """Who writes: the agent's name and email, used as commit author and committer."""

    name: str = "gitmem"
    email: str = "gitmem@localhost"


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


def _open_objects(root: Path) -> git.Repo:
    # GitPython keeps ``git cat-file`` pipes open for object reads: started with the safe
    # options too (GitPython runs no other git command here; store/git.py runs those)
    repo = git.Repo(root)
    repo.git.set_persistent_git_options(c=list(SAFE_GIT_CONFIG))
    return repo


# who holds each store's in-process lock, for the error of a thread that waits too long
_HOLDERS: dict[tuple[int, str], str] = {}


def _process_lock(
    key: str,
    _locks: dict[tuple[int, str], threading.RLock] = {},  # noqa: B006
) -> threading.RLock:
    # one in-process lock per store, shared by every Repository object opened on it; a
    # forked child gets its own (the parent's may have been held by another thread)
    return _locks.setdefault((os.getpid(), key), threading.RLock())


class StoreBase(GitCommands):
    """An open store: its state, its refs and its objects (see the module docs)."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        identity: Identity | None = None,
        housekeeping: Housekeeping | None = None,
        lock_timeout: float = 30.0,
    ) -> None:
        top = Path(root).resolve()
        try:
            self._git = _open_objects(top)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise RepositoryError(
                f"{top} is not a gitmem store (no git repository); "
                "create one with `gitmem init` or MemoryManager.init(path)"
            ) from None
        if self._git.bare or self._git.working_tree_dir is None:
            raise RepositoryError(f"{top} is a bare repository; gitmem needs a working tree")
        if Path(self._git.working_tree_dir).resolve() != top:
            raise RepositoryError(
                f"{top} is inside the repository at {self._git.working_tree_dir}; "
                "open the repository's top folder"
            )
        super().__init__(top, Path(self._git.git_dir).resolve())  # root, git_dir, ref_updates
        self.state_dir = self.git_dir / "gitmem"
        with contextlib.suppress(OSError):  # a read-only store can still be read
            (self.state_dir / "tmp").mkdir(parents=True, exist_ok=True)
        self._pid = os.getpid()
        self._identity = identity or Identity()
        self._acting = threading.local()  # a thread's own author while acting_as() runs
        self.housekeeping = housekeeping or Housekeeping()
        self.lock_timeout = lock_timeout
        self._thread_lock = _process_lock(str(self.git_dir))
        self._odb_lock = threading.Lock()  # the cat-file pipes of self._git
        self._trees: OrderedDict[str, Tree] = OrderedDict()
        self._commit_trees: dict[str, str] = {}
        self._blobs: OrderedDict[str, bytes] = OrderedDict()
        self._index: tuple[bytes, Index] | None = None
        self._commits_since_gc = 0
        self._bytes_since_gc = 0
        self._gc_thread: threading.Thread | None = None
        self._lock_handle: int | None = None
        self._git_locks_held: set[Path] = set()  # git lock files this writer holds now
        self._big_tree_lookups: OrderedDict[str, None] = OrderedDict()
        self._owner = b""
        self._staged: list[tuple[str, bytes, str]] = []
        self._packs_since_gc = 0
        self._prepared: list[Path] = []
        self._opened()

    def _opened(self) -> None:
        """Called last by ``__init__``, once every layer's state is set: a layer above that
        must act on opening (recovery) overrides it and calls ``super()._opened()``."""

    # --- refs ----------------------------------------------------------------------------

    def branch_ref(self) -> str:
        """The ref HEAD points at (``refs/heads/main``); detached HEAD cannot be written to."""
        head = (self.git_dir / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            raise RepositoryError(
                f"{self.root}: HEAD is detached at {head[:12]}; check out a branch before saving"
            )
        return head[5:]

    def _read_ref(self, ref: str) -> str | None:
        try:
            value = (self.git_dir / ref).read_text().strip()
            if value:
                return value
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            return None
        packed = self.git_dir / "packed-refs"
        with contextlib.suppress(FileNotFoundError):
            for line in packed.read_text().splitlines():
                if line.endswith(" " + ref) and not line.startswith(("#", "^")):
                    return line.split(" ", 1)[0]
        return None

    def head(self) -> str | None:
        """The commit id the current branch points at, or None in an empty repository."""
        head = (self.git_dir / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        return self._read_ref(head[5:])

    # --- object reading ------------------------------------------------------------------

    def _read_object(self, hexsha: str, kind: str) -> bytes:
        # one cat-file pipe per repository: a request and its whole answer under one lock,
        # or two threads take each other's answers (or wait forever); a forked child reads
        # before its first transaction (locating its session), so it takes its own pipe here
        self._check_fork()
        with self._odb_lock:
            try:
                stream = self._git.odb.stream(bytes.fromhex(hexsha))
            except (BadObject, BadName, ValueError) as exc:
                raise RepositoryError(f"{self.root}: object {hexsha} is missing ({exc})") from None
            data: bytes = stream.read()
        if stream.type.decode() != kind:
            raise RepositoryError(f"{self.root}: object {hexsha} is a {stream.type!r}, not {kind}")
        return data

    def has_object(self, hexsha: str, kind: str) -> bool:
        """True if the object database holds ``hexsha`` as an object of type ``kind``."""
        self._check_fork()
        try:
            with self._odb_lock:
                info = self._git.odb.info(bytes.fromhex(hexsha))
        except (BadObject, BadName, ValueError):
            return False
        return bool(info.type.decode() == kind)

    def tree(self, hexsha: str) -> Tree:
        """The parsed tree object ``hexsha`` (cached; trees are immutable)."""
        cached = self._trees.get(hexsha)
        if cached is not None:
            self._trees.move_to_end(hexsha)
            return cached
        parsed = Tree.parse(self._read_object(hexsha, "tree"))
        self._remember_tree(hexsha, parsed)
        return parsed

    def _remember_tree(self, hexsha: str, parsed: Tree) -> None:
        self._trees[hexsha] = parsed
        while len(self._trees) > 64:
            self._trees.popitem(last=False)

    def commit_tree(self, commit: str) -> str:
        """The root tree id of a commit."""
        cached = self._commit_trees.get(commit)
        if cached is None:
            body = self._read_object(commit, "commit")
            cached = body[5:45].decode()
            self._commit_trees[commit] = cached
        return cached

    def blob(self, hexsha: str) -> bytes:
        """The content of blob ``hexsha`` (small LRU cache)."""
        cached = self._blobs.get(hexsha)
        if cached is not None:
            self._blobs.move_to_end(hexsha)
            return cached
        data = self._read_object(hexsha, "blob")
        self._remember_blob(hexsha, data)
        return data

    def _remember_blob(self, hexsha: str, data: bytes) -> None:
        if len(data) > 4 * 1024 * 1024:
            return
        self._blobs[hexsha] = data
        while len(self._blobs) > 256:
            self._blobs.popitem(last=False)

    def entry(self, path: str, commit: str | None = None) -> tuple[bytes, str] | None:
        """(mode, blob id) of ``path`` at ``commit`` (default HEAD), or None."""
        rev = commit or self.head()
        if rev is None:
            return None
        tree = self.commit_tree(rev)
        parts = path.split("/")
        for part in parts[:-1]:
            found = self._tree_entry(tree, part.encode())
            if found is None or found[0] != MODE_TREE:
                return None
            tree = found[1].hex()
        leaf = self._tree_entry(tree, parts[-1].encode())
        if leaf is None or leaf[0] == MODE_TREE:
            return None
        return leaf[0], leaf[1].hex()

    def _tree_entry(self, hexsha: str, name: bytes) -> tuple[bytes, bytes] | None:
        """One entry of a tree; a big tree that is not cached is searched, not parsed.

        Parsing a 10,000-entry tree costs ~10 ms; reading a past revision needs one entry.
        """
        cached = self._trees.get(hexsha)
        if cached is not None:
            return cached.entries.get(name)
        data = self._read_object(hexsha, "tree")
        # a big tree asked for twice (HEAD's, during a batch) is worth parsing once
        seen = hexsha in self._big_tree_lookups
        self._big_tree_lookups[hexsha] = None
        while len(self._big_tree_lookups) > 16:
            self._big_tree_lookups.popitem(last=False)
        if len(data) < 16384 or seen:
            parsed = Tree.parse(data)
            self._remember_tree(hexsha, parsed)
            return parsed.entries.get(name)
        return find_tree_entry(data, name)

    def read(self, path: str, commit: str | None = None) -> bytes | None:
        """The committed content of ``path`` at ``commit`` (default HEAD), or None."""
        found = self.entry(path, commit)
        return None if found is None else self.blob(found[1])

    def folder_tree(self, folder: str, commit: str | None = None) -> Tree | None:
        """The tree of ``folder`` at ``commit`` (default HEAD), or None when there is none."""
        rev = commit or self.head()
        if rev is None:
            return None
        tree = self.tree(self.commit_tree(rev))
        for part in folder.strip("/").split("/"):
            found = tree.entries.get(part.encode())
            if found is None or found[0] != MODE_TREE:
                return None
            tree = self.tree(found[1].hex())
        return tree

    def list_dir(self, folder: str, commit: str | None = None) -> dict[str, str]:
        """File name -> blob id of the files directly inside ``folder`` at ``commit``."""
        tree = self.folder_tree(folder, commit)
        if tree is None:
            return {}
        return {
            name.decode("utf-8", "surrogateescape"): sha.hex()
            for name, (mode, sha) in tree.entries.items()
            if mode != MODE_TREE
        }

    # --- tree diffs and errors -----------------------------------------------------------

    def diff_trees(
        self, old: str | None, new: str | None
    ) -> dict[str, tuple[tuple[bytes, str] | None, tuple[bytes, str] | None]]:
        """Files that differ between two commits: path -> ((mode, blob) | None, ... | None).

        Only subtrees whose ids differ are read, so unchanged folders cost nothing.
        """
        out: dict[str, tuple[tuple[bytes, str] | None, tuple[bytes, str] | None]] = {}

        def walk(a: str | None, b: str | None, prefix: str) -> None:
            left = self.tree(a).entries if a else {}
            right = self.tree(b).entries if b else {}
            for name in left.keys() | right.keys():
                x, y = left.get(name), right.get(name)
                if x == y:
                    continue
                path = prefix + name.decode("utf-8", "surrogateescape")
                x_tree = x[1].hex() if x and x[0] == MODE_TREE else None
                y_tree = y[1].hex() if y and y[0] == MODE_TREE else None
                if x_tree or y_tree:
                    walk(x_tree, y_tree, path + "/")
                x_file = (x[0], x[1].hex()) if x and not x_tree else None
                y_file = (y[0], y[1].hex()) if y and not y_tree else None
                if x_file != y_file:
                    out[path] = (x_file, y_file)

        walk(self.commit_tree(old) if old else None, self.commit_tree(new) if new else None, "")
        return out

    @property
    def identity(self) -> Identity:
        """The author of this thread's commits: the store's, or the one ``acting_as`` set."""
        acting: Identity | None = getattr(self._acting, "identity", None)
        return acting or self._identity

    @identity.setter
    def identity(self, value: Identity) -> None:
        self._identity = value

    @contextlib.contextmanager
    def acting_as(self, identity: Identity) -> Iterator[None]:
        """Within the block, this thread's commits are authored by ``identity``."""
        before = getattr(self._acting, "identity", None)
        self._acting.identity = identity
        try:
            yield
        finally:
            self._acting.identity = before

    @contextlib.contextmanager
    def _holding_thread_lock(self, what: str) -> Iterator[None]:
        """The in-process write lock, waited for at most ``lock_timeout`` seconds: a thread
        that holds it may be waiting for this one (e.g. an async batch whose worker needs
        the event loop that a synchronous write blocks)."""
        key = (os.getpid(), str(self.git_dir))
        if not self._thread_lock.acquire(timeout=self.lock_timeout):
            holder = _HOLDERS.get(key, "another thread")
            raise LockTimeout(
                f"{self.root}: {holder} has held the write lock for over "
                f"{self.lock_timeout:.0f}s in this process; inside `async with amm.batch()`, "
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
            self._thread_lock.release()

    def _check_fork(self) -> None:
        # a forked child shares its parent's open lock file, so flock would not keep the
        # two apart, and its git cat-file pipes: it needs its own of both
        if self._pid == os.getpid():
            return
        self._pid = os.getpid()
        if self._lock_handle is not None:
            os.close(self._lock_handle)  # closing (not unlocking) leaves the parent's lock
            self._lock_handle = None
        self._git = _open_objects(self.root)
        self._thread_lock = _process_lock(str(self.git_dir))
        self._odb_lock = threading.Lock()  # another thread may have held it at the fork
        self._gc_thread = None

    @contextlib.contextmanager
    def _os_errors(self, doing: str, where: Path | None = None) -> Iterator[None]:
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
