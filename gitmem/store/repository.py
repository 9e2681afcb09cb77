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
import errno
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import git
from git.exc import BadName, BadObject

from gitmem.errors import RepositoryError, UnsupportedIndex
from gitmem.store.git import SAFE_GIT_ARGS as SAFE_GIT_ARGS  # its 0.1 home (docs/upgrading.md)
from gitmem.store.git import SAFE_GIT_CONFIG, run_git
from gitmem.store.gitindex import Index
from gitmem.store.locks import naming
from gitmem.store.objects import (
    MODE_FILE,
    MODE_TREE,
    Tree,
    commit_body,
    encode_pack,
    find_tree_entry,
    loose_object,
    object_id,
)
from gitmem.store.revisions import RevisionsMixin
from gitmem.store.transaction import Identity, Transaction, TransactionMixin, signature

STORE_README = """# gitmem memory store

This repository holds conversation memory written by [gitmem](https://pypi.org/project/gitmem-store/).
Each file under `sessions/` is one conversation session in Markdown; every save is one commit.
Read it, diff it, blame it; edit by hand if you like (`gitmem check` validates your edits).
"""

GITATTRIBUTES = (
    "sessions/*.md merge=gitmem text eol=lf\narchive/*.md merge=gitmem text eol=lf\n"
    "namespaces/**/*.md merge=gitmem text eol=lf\n"
)

log = logging.getLogger("gitmem")


@dataclass
class Housekeeping:
    """When to pack loose objects, off the save path."""

    enabled: bool = True
    every_commits: int = 100
    every_bytes: int = 64 * 1024 * 1024


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _open_objects(root: Path) -> git.Repo:
    # GitPython keeps ``git cat-file`` pipes open for object reads: started with the safe
    # options too (GitPython runs no other git command here; store/git.py runs those)
    repo = git.Repo(root)
    repo.git.set_persistent_git_options(c=list(SAFE_GIT_CONFIG))
    return repo


def _process_lock(key: str, _locks: dict[tuple[int, str], threading.RLock] = {}  # noqa: B006
                  ) -> threading.RLock:
    # one in-process lock per store, shared by every Repository object opened on it; a
    # forked child gets its own (the parent's may have been held by another thread)
    return _locks.setdefault((os.getpid(), key), threading.RLock())


class Repository(TransactionMixin, RevisionsMixin):
    """A gitmem store: a non-bare git repository whose working tree holds the memory files."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        identity: Identity | None = None,
        housekeeping: Housekeeping | None = None,
        lock_timeout: float = 30.0,
    ) -> None:
        self.root = Path(root).resolve()
        try:
            self._git = _open_objects(self.root)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise RepositoryError(
                f"{self.root} is not a gitmem store (no git repository); "
                "create one with `gitmem init` or MemoryManager.init(path)"
            ) from None
        if self._git.bare or self._git.working_tree_dir is None:
            raise RepositoryError(f"{self.root} is a bare repository; gitmem needs a working tree")
        if Path(self._git.working_tree_dir).resolve() != self.root:
            raise RepositoryError(
                f"{self.root} is inside the repository at {self._git.working_tree_dir}; "
                "open the repository's top folder"
            )
        self.git_dir = Path(self._git.git_dir).resolve()
        self.state_dir = self.git_dir / "gitmem"
        with contextlib.suppress(OSError):  # a read-only store can still be read
            (self.state_dir / "tmp").mkdir(parents=True, exist_ok=True)
        self._pid = os.getpid()
        self.identity = identity or Identity()
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
        self._git_locks_held: set[Path] = set()
        self._big_tree_lookups: OrderedDict[str, None] = OrderedDict()
        self.ref_updates = 0  # bumped whenever this object moves a ref
        self._owner = b""
        self._staged: list[tuple[str, bytes, str]] = []
        self._packs_since_gc = 0
        self._prepared: list[Path] = []
        # a short-lived writer (one CLI save) never reaches the housekeeping threshold by
        # itself: the packs that earlier ones left count towards it
        self._commits_since_gc = self._packs_on_disk()
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
            with repo.transaction() as txn:
                txn.write("README.md", STORE_README.encode())
                txn.write(".gitattributes", GITATTRIBUTES.encode())
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
        # or two threads take each other's answers (or wait forever)
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

    def list_dir(self, folder: str, commit: str | None = None) -> dict[str, str]:
        """File name -> blob id of the files directly inside ``folder`` at ``commit``."""
        rev = commit or self.head()
        if rev is None:
            return {}
        tree = self.tree(self.commit_tree(rev))
        for part in folder.strip("/").split("/"):
            found = tree.entries.get(part.encode())
            if found is None or found[0] != MODE_TREE:
                return {}
            tree = self.tree(found[1].hex())
        return {
            name.decode("utf-8", "surrogateescape"): sha.hex()
            for name, (mode, sha) in tree.entries.items()
            if mode != MODE_TREE
        }

    # --- writing -------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """Hold the store's write lock; changes made through the transaction are committed
        by ``txn.commit(...)`` (uncommitted changes are dropped when the block ends)."""
        self._check_fork()
        with self._thread_lock, self._file_lock():
            try:
                yield Transaction(self)
            finally:
                self._discard_prepared()  # temp files of a save that failed
        self._maybe_housekeep()

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
        for data, suffix in ((pack, ".pack"), (index, ".idx")):  # .idx last: it publishes
            with naming(tmp), open(tmp, "wb") as handle:
                handle.write(data)
            os.chmod(tmp, 0o444)
            os.replace(tmp, folder / f"pack-{name}{suffix}")
        self._prepared.remove(tmp)
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

    # --- merges and fast-forwards (sync) -------------------------------------------------

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
        due = (
            self._commits_since_gc >= policy.every_commits
            or self._bytes_since_gc >= policy.every_bytes
        )
        if not (policy.enabled and due):
            return
        if self._gc_thread is not None and self._gc_thread.is_alive():
            return
        self._commits_since_gc = 0
        self._bytes_since_gc = 0
        self._packs_since_gc = 0
        self._gc_thread = threading.Thread(target=self.pack, daemon=True, name="gitmem-gc")
        self._gc_thread.start()

    def pack(self) -> None:
        """Pack loose objects, refresh the commit-graph and the per-file history cache (what
        housekeeping runs)."""
        # a failure is left for next time: housekeeping only saves space and time
        run_git(self.root, "repack", "-d", "-q", "--geometric=2", ok=None)
        run_git(self.root, "-c", "gc.packRefs=false", "gc", "--auto", "--quiet", ok=None)
        run_git(self.root, "commit-graph", "write", "--reachable", "--split", "--changed-paths",
                ok=None)  # fmt: skip
        with contextlib.suppress(RepositoryError):
            self.index_history()
