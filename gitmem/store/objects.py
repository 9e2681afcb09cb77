"""The object database: git's byte formats for loose objects, trees, commits and packs (the
index file's format is in ``gitindex``), and :class:`ObjectDatabase`, the one way the store
reads and writes objects.

Reads go through GitPython's ``cat-file`` pipes (started with the safe options of
``git.py``), with small caches of trees and blobs; writes are in-process: a save stages its
objects and flushes them as one pack. Writing objects in-process instead of spawning
``git add``/``git commit`` is what makes one save cost a few milliseconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import threading
import zlib
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import git
from git.exc import BadName, BadObject

from gitmem.errors import RepositoryError
from gitmem.store.git import SAFE_GIT_CONFIG, GitCommands
from gitmem.store.scratch import TempFiles, naming

MODE_FILE = b"100644"

MODE_EXEC = b"100755"

MODE_LINK = b"120000"

MODE_TREE = b"40000"

MODE_GITLINK = b"160000"

# Big objects (the sessions tree of a large store) are stored without compression on the
# save path: zlib costs ~4 ms per 450 kB, and the periodic repack delta-compresses them anyway.
_STORE_UNCOMPRESSED_ABOVE = 64 * 1024


def deflated(data: bytes) -> bytes:
    """``data`` as a zlib stream git reads (see :func:`deflated_parts`)."""
    return b"".join(deflated_parts(data))


def deflated_parts(data: bytes) -> list[bytes | memoryview]:
    """``data`` as a zlib stream git reads, in pieces to be joined: compressed at level 1
    when small, else in stored (uncompressed) blocks framed here, which costs a fifth of
    ``zlib.compress(data, 0)`` (that copies each block through the deflate state), and
    whose pieces are views of ``data`` (a big object is copied once, into its pack)."""
    if len(data) <= _STORE_UNCOMPRESSED_ABOVE:
        return [zlib.compress(data, 1)]
    view, size = memoryview(data), len(data)
    parts: list[bytes | memoryview] = [b"\x78\x01"]  # deflate, 32 KiB window, no dictionary
    for at in range(0, size, 0xFFFF):
        block = view[at : at + 0xFFFF]
        last = at + 0xFFFF >= size
        parts += [struct.pack("<BHH", last, len(block), len(block) ^ 0xFFFF), block]
    parts.append(struct.pack(">I", zlib.adler32(data)))
    return parts


def object_id(kind: str, data: bytes) -> str:
    """The hex object id git gives ``data`` as an object of type ``kind``."""
    digest = hashlib.sha1(f"{kind} {len(data)}\0".encode())
    digest.update(data)  # no concatenation: trees of big stores are ~0.5 MB
    return digest.hexdigest()


def loose_object(kind: str, data: bytes) -> tuple[str, bytes]:
    """The object id and the zlib stream git stores in ``objects/xx/yyyy``."""
    raw = f"{kind} {len(data)}\0".encode() + data
    return hashlib.sha1(raw).hexdigest(), deflated(raw)


def _sort_key(name: bytes, mode: bytes) -> bytes:
    # git orders tree entries as if directory names ended with "/"
    return name + b"/" if mode == MODE_TREE else name


class JoinedChunks:
    """``b"".join(chunks)`` kept between edits, patched in place when one chunk is replaced
    by one of the same length (the common edit: a file's object id changes).

    A save changes one entry of a 10,000-entry tree and index; re-joining ~1 MB each time
    costs more than the rest of the save's bookkeeping.
    """

    def __init__(self) -> None:
        self.buffer: bytearray | None = None
        self.offsets: list[int] = []

    def copy(self) -> JoinedChunks:
        twin = JoinedChunks()
        if self.buffer is not None:
            twin.buffer, twin.offsets = bytearray(self.buffer), self.offsets
        return twin

    def replaced(self, at: int, old: bytes, new: bytes) -> None:
        if self.buffer is None:
            return
        if len(old) != len(new):
            self.buffer = None
            return
        start = self.offsets[at]
        self.buffer[start : start + len(new)] = new

    def invalidate(self) -> None:
        self.buffer = None

    def join(self, chunks: list[bytes]) -> bytearray:
        if self.buffer is None:
            self.buffer = bytearray(b"".join(chunks))
            offsets, pos = [], 0
            for chunk in chunks:
                offsets.append(pos)
                pos += len(chunk)
            self.offsets = offsets
        return self.buffer


@dataclass
class Tree:
    """A parsed tree object that can be edited and re-serialised cheaply.

    Entries are kept sorted in git order together with their serialised form, so that
    changing one entry of a 10,000-entry tree is a bisect and a join, not a re-sort.
    """

    keys: list[bytes]
    chunks: list[bytes]
    entries: dict[bytes, tuple[bytes, bytes]]
    shared_keys: bool = False
    joined: JoinedChunks = field(default_factory=JoinedChunks)

    @classmethod
    def empty(cls) -> Tree:
        return cls([], [], {})

    @classmethod
    def parse(cls, data: bytes) -> Tree:
        """Parse the body of a tree object."""
        keys: list[bytes] = []
        chunks: list[bytes] = []
        entries: dict[bytes, tuple[bytes, bytes]] = {}
        pos = 0
        size = len(data)
        while pos < size:
            space = data.index(b" ", pos)
            nul = data.index(b"\0", space)
            mode = data[pos:space]
            name = data[space + 1 : nul]
            sha = data[nul + 1 : nul + 21]
            chunks.append(data[pos : nul + 21])
            keys.append(_sort_key(name, mode))
            entries[name] = (mode, sha)
            pos = nul + 21
        return cls(keys, chunks, entries)

    def serialize(self) -> bytes:
        return bytes(self.joined.join(self.chunks))

    def copy(self) -> Tree:
        # ``keys`` only changes when an entry is added or removed: share it until then
        return Tree(
            self.keys,
            list(self.chunks),
            dict(self.entries),
            shared_keys=True,
            joined=self.joined.copy(),
        )

    def set(self, name: bytes, mode: bytes, sha: bytes) -> None:
        """Add or replace entry ``name`` (``sha`` is the 20-byte binary id)."""
        old = self.entries.get(name)
        key = _sort_key(name, mode)
        if old is not None and old[0] == mode:
            at = bisect_left(self.keys, key)
            chunk = mode + b" " + name + b"\0" + sha
            self.joined.replaced(at, self.chunks[at], chunk)
            self.chunks[at] = chunk
            self.entries[name] = (mode, sha)
            return
        if old is not None:
            self.remove(name)
        self.joined.invalidate()
        if self.shared_keys:
            self.keys, self.shared_keys = list(self.keys), False
        at = bisect_left(self.keys, key)
        self.keys.insert(at, key)
        self.chunks.insert(at, mode + b" " + name + b"\0" + sha)
        self.entries[name] = (mode, sha)

    def remove(self, name: bytes) -> None:
        self.joined.invalidate()
        if self.shared_keys:
            self.keys, self.shared_keys = list(self.keys), False
        mode, _ = self.entries.pop(name)
        at = bisect_left(self.keys, _sort_key(name, mode))
        del self.keys[at]
        del self.chunks[at]


_MODES = (MODE_FILE, MODE_EXEC, MODE_LINK, MODE_TREE, MODE_GITLINK)


def find_tree_entry(data: bytes, name: bytes) -> tuple[bytes, bytes] | None:
    """(mode, binary sha) of entry ``name`` in a serialised tree, without parsing it all.

    A match must start at an entry boundary: a known mode at the start of the tree or right
    after the 20-byte id that follows the previous entry's NUL. Bytes of an object id that
    happened to spell out ``<NUL>...<mode> <name><NUL>`` would fool this; at this length
    that is less likely than a SHA-1 collision.
    """
    needle = b" " + name + b"\0"
    at = data.find(needle)
    while at >= 0:
        for mode in _MODES:
            start = at - len(mode)
            if (
                start >= 0
                and data[start:at] == mode
                and (start == 0 or (start >= 21 and data[start - 21] == 0))
            ):
                sha_at = at + len(needle)
                return mode, data[sha_at : sha_at + 20]
        at = data.find(needle, at + 1)
    return None


@dataclass(frozen=True)
class Identity:
    """Who writes: the agent's name and email, used as commit author and committer."""

    name: str = "gitmem"
    email: str = "gitmem@localhost"


class Authors:
    """Who writes now: the store's identity, or the one a thread set with ``acting_as``."""

    def __init__(self, default: Identity) -> None:
        self.default = default
        self._acting = threading.local()  # a thread's own author while acting_as() runs

    def current(self) -> Identity:
        acting: Identity | None = getattr(self._acting, "identity", None)
        return acting or self.default

    @contextlib.contextmanager
    def acting_as(self, identity: Identity) -> Iterator[None]:
        """Within the block, this thread's commits are authored by ``identity``."""
        before = getattr(self._acting, "identity", None)
        self._acting.identity = identity
        try:
            yield
        finally:
            self._acting.identity = before


@dataclass(frozen=True)
class Signature:
    """A commit author or committer: name, email, seconds since the epoch, UTC offset."""

    name: str
    email: str
    when: int
    offset_minutes: int

    def encode(self) -> bytes:
        sign = "-" if self.offset_minutes < 0 else "+"
        hours, minutes = divmod(abs(self.offset_minutes), 60)
        name = _clean_ident(self.name) or "gitmem"
        email = _clean_ident(self.email) or "gitmem@localhost"
        return f"{name} <{email}> {self.when} {sign}{hours:02d}{minutes:02d}".encode()


def _clean_ident(text: str) -> str:
    # git fsck rejects '<', '>' and newlines inside an identity
    return " ".join(text.replace("<", "").replace(">", "").split())


def signature(identity: Identity, when: datetime | None = None) -> Signature:
    """Author/committer line data for ``identity`` at ``when`` (default now, local zone)."""
    moment = (when or datetime.now()).astimezone()
    offset = moment.utcoffset()
    minutes = int(offset.total_seconds() // 60) if offset is not None else 0
    return Signature(identity.name, identity.email, int(moment.timestamp()), minutes)


def commit_body(
    tree: str, parents: list[str], author: Signature, committer: Signature, message: str
) -> bytes:
    """Serialise a commit object body."""
    lines = [f"tree {tree}".encode()]
    lines += [f"parent {p}".encode() for p in parents]
    lines.append(b"author " + author.encode())
    lines.append(b"committer " + committer.encode())
    text = message if message.endswith("\n") else message + "\n"
    return b"\n".join(lines) + b"\n\n" + text.encode()


def format_message(subject: str, body: str = "", trailers: dict[str, str] | None = None) -> str:
    """A commit message: one-line subject, optional body, then ``Key: value`` trailers."""
    parts = [" ".join(subject.split()) or "gitmem change"]
    if body.strip():
        parts.append(body.strip())
    if trailers:
        parts.append(
            "\n".join(f"{k}: {' '.join(str(v).split())}" for k, v in trailers.items() if str(v))
        )
    return "\n\n".join(parts) + "\n"


_PACK_TYPES = {"commit": 1, "tree": 2, "blob": 3, "tag": 4}


def _pack_header(kind: str, size: int) -> bytes:
    out = bytearray()
    byte = (_PACK_TYPES[kind] << 4) | (size & 0x0F)
    size >>= 4
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def encode_pack(objects: list[tuple[str, bytes, str]]) -> tuple[str, bytes, bytes]:
    """A version-2 pack and its version-2 index holding ``objects`` (no deltas).

    ``objects`` are (kind, data, hex id); returns (pack name, pack bytes, index bytes).
    Creating files is what costs most on a save, so a save writes these two files instead
    of one per object.
    """
    entries: dict[bytes, tuple[int, int]] = {}
    parts: list[bytes | memoryview] = []
    offset = 12
    for kind, data, hexsha in objects:
        raw_id = bytes.fromhex(hexsha)
        if raw_id in entries:
            continue
        record = [_pack_header(kind, len(data)), *deflated_parts(data)]
        crc = 0
        for part in record:
            crc = zlib.crc32(part, crc)
            offset += len(part)
        entries[raw_id] = (offset - sum(map(len, record)), crc)
        parts += record
    parts[:0] = [b"PACK", struct.pack(">II", 2, len(entries))]
    summing = hashlib.sha1()
    for part in parts:
        summing.update(part)
    pack_sum = summing.digest()
    pack = b"".join([*parts, pack_sum])

    ids = sorted(entries)
    fanout = [0] * 256
    for raw_id in ids:
        fanout[raw_id[0]] += 1
    running = 0
    for at in range(256):
        running += fanout[at]
        fanout[at] = running
    index = b"".join(
        [
            b"\377tOc",
            struct.pack(">I", 2),
            struct.pack(">256I", *fanout),
            *ids,
            *(struct.pack(">I", entries[i][1]) for i in ids),
            *(struct.pack(">I", entries[i][0]) for i in ids),
            pack_sum,
        ]
    )
    index += hashlib.sha1(index).digest()
    return pack_sum.hex(), pack, index


# the first line of the .keep a save holds while it writes its pack (see ObjectDatabase.flush)
KEEP_MARK = b"gitmem: a save is writing this pack"

# one file and its blob: (mode, blob id)
FileEntry = tuple[bytes, str]


def is_repository(path: Path) -> bool:
    """True if ``path`` is the top of a git repository (or its ``.git`` folder)."""
    try:
        git.Repo(path)
    except git.InvalidGitRepositoryError:
        return False
    return True


def open_store(top: Path) -> tuple[git.Repo, Path]:
    """GitPython's view of the store whose working tree is ``top``, and its git folder;
    RepositoryError unless ``top`` is the top folder of a non-bare repository."""
    try:
        repo = open_git(top)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise RepositoryError(
            f"{top} is not a gitmem store (no git repository); "
            "create one with `gitmem init` or MemoryManager.init(path)"
        ) from None
    if repo.bare or repo.working_tree_dir is None:
        raise RepositoryError(f"{top} is a bare repository; gitmem needs a working tree")
    if Path(repo.working_tree_dir).resolve() != top:
        raise RepositoryError(
            f"{top} is inside the repository at {repo.working_tree_dir}; "
            "open the repository's top folder"
        )
    return repo, Path(repo.git_dir).resolve()


def open_git(root: Path) -> git.Repo:
    """GitPython's view of the store at ``root``: its ``cat-file`` pipes serve object reads,
    started with the safe options too (GitPython runs no other git command here)."""
    repo = git.Repo(root)
    repo.git.set_persistent_git_options(c=list(SAFE_GIT_CONFIG))
    return repo


class ObjectDatabase:
    """Reading objects (cached), and staging and flushing the objects of a save."""

    def __init__(self, gitpython: git.Repo, runner: GitCommands, temps: TempFiles) -> None:
        self.root = runner.root  # for messages
        self.git_dir = runner.git_dir
        self.runner = runner  # streams many blobs through one process
        self.temps = temps
        self._git = gitpython
        self._lock = threading.Lock()  # the cat-file pipes of self._git
        self._pid = os.getpid()
        self._trees: OrderedDict[str, Tree] = OrderedDict()
        self._commit_trees: dict[str, str] = {}
        self._blobs: OrderedDict[str, bytes] = OrderedDict()
        self._big_tree_lookups: OrderedDict[str, None] = OrderedDict()
        self.staged: list[tuple[str, bytes, str]] = []
        self.bytes_written = 0  # since housekeeping last ran

    def _check_fork(self) -> None:
        # a forked child shares its parent's cat-file pipes: it takes its own (and a new
        # lock: another thread may have held the parent's at the fork)
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._git = open_git(self.root)
            self._lock = threading.Lock()

    def close(self) -> None:
        self._git.close()

    # --- reading -------------------------------------------------------------------------

    def read_object(self, hexsha: str, kind: str) -> bytes:
        """The body of object ``hexsha``; RepositoryError if it is missing or not a ``kind``."""
        # one cat-file pipe per repository: a request and its whole answer under one lock,
        # or two threads take each other's answers (or wait forever)
        self._check_fork()
        with self._lock:
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
            with self._lock:
                info = self._git.odb.info(bytes.fromhex(hexsha))
        except (BadObject, BadName, ValueError):
            return False
        return bool(info.type.decode() == kind)

    def stream_blobs(self, shas: Iterable[str]) -> Iterator[tuple[str, bytes | None]]:
        """(blob id, content or None when missing) of each of ``shas``, in order: many blobs
        (an index rebuild reads every file of a commit) through one pipelined
        ``git cat-file --batch``, not a request and an answer per blob."""
        return self.runner.stream_blobs(shas)

    def tree(self, hexsha: str) -> Tree:
        """The parsed tree object ``hexsha`` (cached; trees are immutable)."""
        cached = self._trees.get(hexsha)
        if cached is not None:
            self._trees.move_to_end(hexsha)
            return cached
        parsed = Tree.parse(self.read_object(hexsha, "tree"))
        self._remember_tree(hexsha, parsed)
        return parsed

    def _remember_tree(self, hexsha: str, parsed: Tree) -> None:
        self._trees[hexsha] = parsed
        while len(self._trees) > 64:
            self._trees.popitem(last=False)

    def forget_trees(self) -> None:
        self._trees.clear()

    def commit_tree(self, commit: str) -> str:
        """The root tree id of a commit."""
        cached = self._commit_trees.get(commit)
        if cached is None:
            body = self.read_object(commit, "commit")
            cached = body[5:45].decode()
            self._commit_trees[commit] = cached
        return cached

    def parents(self, commit: str) -> list[str]:
        """The parent commit ids of ``commit`` (empty for a root commit)."""
        body = self.read_object(commit, "commit")
        header = body.split(b"\n\n", 1)[0]
        return [line[7:47].decode() for line in header.split(b"\n") if line.startswith(b"parent ")]

    def blob(self, hexsha: str) -> bytes:
        """The content of blob ``hexsha`` (small LRU cache)."""
        cached = self._blobs.get(hexsha)
        if cached is not None:
            self._blobs.move_to_end(hexsha)
            return cached
        data = self.read_object(hexsha, "blob")
        self._remember_blob(hexsha, data)
        return data

    def _remember_blob(self, hexsha: str, data: bytes) -> None:
        if len(data) > 4 * 1024 * 1024:
            return
        self._blobs[hexsha] = data
        while len(self._blobs) > 256:
            self._blobs.popitem(last=False)

    def entry(self, path: str, commit: str) -> FileEntry | None:
        """(mode, blob id) of ``path`` at ``commit``, or None."""
        tree = self.commit_tree(commit)
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
        data = self.read_object(hexsha, "tree")
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

    def folder_tree(self, folder: str, commit: str) -> Tree | None:
        """The tree of ``folder`` at ``commit``, or None when there is none."""
        tree = self.tree(self.commit_tree(commit))
        for part in folder.strip("/").split("/"):
            found = tree.entries.get(part.encode())
            if found is None or found[0] != MODE_TREE:
                return None
            tree = self.tree(found[1].hex())
        return tree

    def files(self, tree: str, prefix: str = "") -> Iterator[tuple[str, bytes, str]]:
        """(path, mode, blob id) of every file under ``tree``."""
        for name, (mode, sha) in sorted(self.tree(tree).entries.items()):
            path = prefix + name.decode("utf-8", "surrogateescape")
            if mode == MODE_TREE:
                yield from self.files(sha.hex(), path + "/")
            else:
                yield path, mode, sha.hex()

    def diff_trees(
        self, old: str | None, new: str | None
    ) -> dict[str, tuple[FileEntry | None, FileEntry | None]]:
        """Files that differ between two commits: path -> ((mode, blob) | None, ... | None).

        Only subtrees whose ids differ are read, so unchanged folders cost nothing.
        """
        out: dict[str, tuple[FileEntry | None, FileEntry | None]] = {}

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

    # --- writing -------------------------------------------------------------------------

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
        self.bytes_written += len(compressed)
        return hexsha

    def stage(self, kind: str, data: bytes) -> str:
        """Queue an object for the next :meth:`flush`; returns its id."""
        hexsha = object_id(kind, data)
        self.staged.append((kind, data, hexsha))
        return hexsha

    def stage_blob(self, data: bytes) -> str:
        """Queue a blob, and keep it in the cache (the save reads it back)."""
        hexsha = self.stage("blob", data)
        self._remember_blob(hexsha, data)
        return hexsha

    def stage_commit(self, tree: str, parents: list[str], sig: Signature, message: str) -> str:
        """Queue a commit of ``tree`` (authored and committed by ``sig``); returns its id."""
        commit = self.stage("commit", commit_body(tree, parents, sig, sig, message))
        self._commit_trees[commit] = tree
        return commit

    def stage_tree(self, base: str | None, changes: dict[str, bytes | None]) -> str:
        """Queue the trees for ``changes`` (path -> binary blob id or None to delete) over
        tree ``base``; returns the new root tree's id."""
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
            sub = self.stage_tree(sub_base, sub_changes)
            if self.tree(sub).entries:
                tree.set(name.encode(), MODE_TREE, bytes.fromhex(sub))
            elif name.encode() in tree.entries:
                tree.remove(name.encode())
        hexsha = self.stage("tree", tree.serialize())
        self._remember_tree(hexsha, tree)
        return hexsha

    def flush(self) -> None:
        """Write the queued objects: one pack (two files) rather than a file per object."""
        staged, self.staged = self.staged, []
        if not staged:
            return
        if len(staged) == 1:
            self.write_object(*staged[0][:2])
            return
        name, pack, index = encode_pack(staged)
        folder = self.git_dir / "objects" / "pack"
        folder.mkdir(parents=True, exist_ok=True)
        tmp = self.temps.folder / f"pack-{os.getpid()}-{threading.get_ident()}"
        self.temps.track(tmp)  # removed if the write fails
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
            self.temps.track(keep)
            os.write(fd, KEEP_MARK + f" pid={os.getpid()}\n".encode())
            os.close(fd)
        for data, suffix in ((pack, ".pack"), (index, ".idx")):
            with naming(tmp), open(tmp, "wb") as handle:
                handle.write(data)
            os.chmod(tmp, 0o444)
            os.replace(tmp, folder / f"pack-{name}{suffix}")
        self.temps.done(tmp)
        if keep is not None:
            self.temps.done(keep)
            keep.unlink()
        self.bytes_written += len(pack)
